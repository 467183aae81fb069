"""FieldWriter: HDF5 round trips, snapshot order, crash consistency and the XDMF sidecar."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from simsplit.io.fields import FieldWriter, list_snapshots, read_snapshot

XDMF_TYPES = {("Float", 4): np.float32, ("Float", 8): np.float64, ("Int", 4): np.int32}


def _fields(shape: tuple[int, ...], dtype, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ndim = len(shape)
    return {
        "density": rng.standard_normal(shape).astype(dtype),
        "velocity": rng.standard_normal(shape + (ndim,)).astype(dtype),
    }


def _check_xmf(directory: Path, expected: list[tuple[int, float]], shape: tuple[int, ...]):
    """Validate fields.xmf against fields.h5; returns the list of uniform grids."""
    root = ET.parse(directory / "fields.xmf").getroot()
    assert root.tag == "Xdmf" and root.get("Version") == "3.0"
    (domain,) = root.findall("Domain")
    (series,) = domain.findall("Grid")
    assert series.get("GridType") == "Collection"
    assert series.get("CollectionType") == "Temporal"
    grids = series.findall("Grid")
    assert len(grids) == len(expected)
    shape3 = shape if len(shape) == 3 else (1,) + shape
    with h5py.File(directory / "fields.h5", "r") as h5:
        for grid, (step, time) in zip(grids, expected, strict=True):
            assert grid.get("GridType") == "Uniform"
            assert float(grid.find("Time").get("Value")) == time
            topology = grid.find("Topology")
            assert topology.get("TopologyType") == "3DCoRectMesh"
            dims = tuple(int(n) for n in topology.get("Dimensions").split())
            assert dims == shape3
            geometry = grid.find("Geometry")
            assert geometry.get("GeometryType") == "ORIGIN_DXDYDZ"
            origin, spacing = (
                np.array([float(v) for v in item.text.split()])
                for item in geometry.findall("DataItem")
            )
            assert origin.shape == spacing.shape == (3,)
            attributes = grid.findall("Attribute")
            assert attributes
            for attribute in attributes:
                assert attribute.get("Center") == "Node"
                (item,) = attribute.findall("DataItem")
                assert item.get("Format") == "HDF"
                filename, dataset_path = item.text.strip().split(":", 1)
                assert filename == "fields.h5"
                assert f"/{step:09d}/" in dataset_path
                dset = h5[dataset_path]
                declared = tuple(int(n) for n in item.get("Dimensions").split())
                assert declared == dset.shape
                key = (item.get("NumberType"), int(item.get("Precision")))
                assert np.dtype(XDMF_TYPES[key]) == dset.dtype
                if attribute.get("AttributeType") == "Vector":
                    # ParaView only uses 3-component arrays as vectors
                    assert declared == dims + (3,)
                else:
                    assert attribute.get("AttributeType") == "Scalar"
                    assert declared == dims
    return grids


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(6, 10), (3, 5, 4)])
def test_round_trip_exact(tmp_path, shape, dtype):
    snaps = [(0, 0.0), (500, 0.25), (1000, 0.5)]
    written = {}
    with FieldWriter(tmp_path, shape) as writer:
        for seed, (step, time) in enumerate(snaps):
            written[step] = _fields(shape, dtype, seed)
            writer.write(step, time, written[step])
        assert writer.steps == [0, 500, 1000]
    assert list_snapshots(tmp_path) == snaps
    for step, time in snaps:
        snap = read_snapshot(tmp_path / "fields.h5", step)
        assert (snap["step"], snap["time"]) == (step, time)
        assert set(snap["fields"]) == {"density", "velocity"}
        for name, array in written[step].items():
            got = snap["fields"][name]
            assert got.dtype == array.dtype and got.shape == array.shape
            np.testing.assert_array_equal(got, array)
    assert read_snapshot(tmp_path)["step"] == 1000  # last by default, directory accepted
    _check_xmf(tmp_path, snaps, shape)


def test_2d_velocity_stored_padded_and_geometry_at_cell_centres(tmp_path):
    ny, nx = 4, 8
    velocity = np.arange(ny * nx * 2, dtype=np.float64).reshape(ny, nx, 2) + 1.0
    with FieldWriter(tmp_path, (ny, nx)) as writer:
        writer.write(7, 1.5, {"velocity": velocity})
    with h5py.File(tmp_path / "fields.h5", "r") as h5:
        stored = h5["/snapshots/000000007/velocity"][()]
    # one z-layer, so every dataset has the rank of the 3DCoRectMesh it is attached to
    assert stored.shape == (1, ny, nx, 3)
    np.testing.assert_array_equal(stored[0, ..., :2], velocity)
    np.testing.assert_array_equal(stored[..., 2], 0.0)

    (grid,) = _check_xmf(tmp_path, [(7, 1.5)], (ny, nx))
    origin, spacing = (
        [float(v) for v in item.text.split()] for item in grid.find("Geometry").findall("DataItem")
    )
    # z, y, x order like Dimensions; nodes sit at the cell centres of the unit square
    assert origin == pytest.approx([0.0, 0.5 / ny, 0.5 / nx])
    assert spacing[1:] == pytest.approx([1.0 / ny, 1.0 / nx])


def test_custom_spacing_3d(tmp_path):
    shape = (2, 3, 4)
    with FieldWriter(tmp_path, shape, spacing=(0.5, 0.25, 0.125)) as writer:
        writer.write(1, 0.1, {"w": np.ones(shape + (3,), np.float32)})
    (grid,) = _check_xmf(tmp_path, [(1, 0.1)], shape)
    origin, spacing = (
        [float(v) for v in item.text.split()] for item in grid.find("Geometry").findall("DataItem")
    )
    assert origin == pytest.approx([0.25, 0.125, 0.0625])
    assert spacing == pytest.approx([0.5, 0.25, 0.125])


def test_integer_fields_and_per_snapshot_field_sets(tmp_path):
    shape = (3, 4)
    flags = np.arange(12, dtype=np.int32).reshape(shape)
    with FieldWriter(tmp_path, shape) as writer:
        writer.write(0, 0.0, {"flags": flags, "density": np.ones(shape)})
        writer.write(1, 1.0, {"density": np.zeros(shape)})
    grids = _check_xmf(tmp_path, [(0, 0.0), (1, 1.0)], shape)
    assert [len(g.findall("Attribute")) for g in grids] == [2, 1]
    np.testing.assert_array_equal(read_snapshot(tmp_path, 0)["fields"]["flags"], flags)


def test_file_attrs(tmp_path):
    case_yaml = "name: cavity\nreynolds: 1000\n"
    attrs = {"case": case_yaml, "parsed": {"nx": 64, "lid": [1.0, 0.0]}, "cells": [64, 64]}
    with FieldWriter(tmp_path, (4, 4), attrs=attrs) as writer:
        writer.write(0, 0.0, {"density": np.ones((4, 4))})
    file_attrs = read_snapshot(tmp_path)["attrs"]
    assert file_attrs["case"] == case_yaml
    assert yaml.safe_load(file_attrs["parsed"]) == attrs["parsed"]
    assert list(file_attrs["cells"]) == [64, 64]
    assert isinstance(file_attrs["simsplit_version"], str) and file_attrs["simsplit_version"]
    assert list(file_attrs["shape"]) == [4, 4]


@pytest.mark.parametrize("keep_open", [True, False])
def test_file_readable_while_writer_open(tmp_path, keep_open):
    """A crash after write() must leave a valid file: copy it while the writer is still open."""
    shape = (5, 6)
    writer = FieldWriter(tmp_path / "run", shape, keep_open=keep_open)
    fields = _fields(shape, np.float64, 3)
    writer.write(10, 0.5, fields)
    crash = tmp_path / "crash"
    shutil.copytree(tmp_path / "run", crash)
    snap = read_snapshot(crash)
    np.testing.assert_array_equal(snap["fields"]["density"], fields["density"])
    _check_xmf(crash, [(10, 0.5)], shape)
    writer.write(20, 1.0, fields)
    writer.close()
    assert list_snapshots(tmp_path / "run") == [(10, 0.5), (20, 1.0)]


def test_append_continues_existing_file(tmp_path):
    shape = (4, 4)
    with FieldWriter(tmp_path, shape, attrs={"case": "a"}) as writer:
        writer.write(0, 0.0, {"density": np.zeros(shape)})
        writer.write(5, 0.5, {"density": np.ones(shape)})
    with FieldWriter(tmp_path, shape, append=True) as writer:
        assert writer.steps == [0, 5]
        with pytest.raises(ValueError, match="already"):
            writer.write(5, 0.5, {"density": np.ones(shape)})
        writer.write(10, 1.0, {"density": np.full(shape, 2.0)})
    _check_xmf(tmp_path, [(0, 0.0), (5, 0.5), (10, 1.0)], shape)
    assert read_snapshot(tmp_path)["attrs"]["case"] == "a"
    with pytest.raises(ValueError, match="shape"):
        FieldWriter(tmp_path, (8, 8), append=True)
    # without append the file starts afresh
    with FieldWriter(tmp_path, shape):
        pass
    assert list_snapshots(tmp_path) == []
    _check_xmf(tmp_path, [], shape)


def test_steps_are_ordered_numerically_not_by_insertion(tmp_path):
    with FieldWriter(tmp_path, (2, 2)) as writer:
        writer.write(100, 1.0, {"density": np.ones((2, 2))})
        writer.write(20, 0.2, {"density": np.zeros((2, 2))})
    # the XDMF keeps write order (the writer's timeline); readers sort by step
    assert list_snapshots(tmp_path) == [(20, 0.2), (100, 1.0)]
    assert read_snapshot(tmp_path)["step"] == 100


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"density": np.ones((4, 5))}, ValueError),
        ({"velocity": np.ones((4, 4, 4))}, ValueError),
        ({"bad/name": np.ones((4, 4))}, ValueError),
        ({"density": np.ones((4, 4), dtype=np.float16)}, TypeError),
        ({"density": np.ones((4, 4), dtype=np.complex128)}, TypeError),
        ({}, ValueError),
    ],
)
def test_invalid_fields_rejected_without_side_effects(tmp_path, fields, error):
    with FieldWriter(tmp_path, (4, 4)) as writer:
        with pytest.raises(error):
            writer.write(0, 0.0, fields)
        assert writer.steps == []
        writer.write(0, 0.0, {"density": np.ones((4, 4))})  # step 0 still free
    assert list_snapshots(tmp_path) == [(0, 0.0)]


def test_write_after_close_and_missing_step(tmp_path):
    writer = FieldWriter(tmp_path, (2, 2))
    writer.write(1, 0.1, {"density": np.ones((2, 2))})
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(RuntimeError):
        writer.write(2, 0.2, {"density": np.ones((2, 2))})
    with pytest.raises(KeyError):
        read_snapshot(tmp_path, step=2)


def test_bad_grid_arguments(tmp_path):
    with pytest.raises(ValueError):
        FieldWriter(tmp_path, (4,))
    with pytest.raises(ValueError):
        FieldWriter(tmp_path, (4, 4), spacing=(0.1,))
    with pytest.raises(ValueError):
        FieldWriter(tmp_path, (4, 4), spacing=(0.1, 0.0))


def test_time_unit_in_file_attrs_and_xdmf_and_kept_on_append(tmp_path):
    shape = (3, 4)
    unit = "L / U (L: nx cells, U: fluid.lid_velocity; t = step U / nx)"
    with FieldWriter(tmp_path, shape, time_unit=unit) as writer:
        writer.write(0, 0.0, {"density": np.ones(shape)})
        writer.write(100, 0.25, {"density": np.ones(shape)})
    with FieldWriter(tmp_path, shape, append=True) as writer:  # a restart names no unit
        assert writer.time_unit == unit
        writer.write(200, 0.5, {"density": np.ones(shape)})
    _check_xmf(tmp_path, [(0, 0.0), (100, 0.25), (200, 0.5)], shape)
    series = ET.parse(tmp_path / "fields.xmf").getroot().find("Domain/Grid")
    (info,) = series.findall("Information")
    assert (info.get("Name"), info.get("Value")) == ("time_unit", unit)
    assert read_snapshot(tmp_path)["attrs"]["time_unit"] == unit
