"""Grid-field output: all snapshots of a run in one HDF5 file plus an XDMF 3 sidecar for ParaView.

Layout of ``fields.h5``::

    /                       attrs: format, format_version, simsplit_version, shape, spacing,
                            origin, time_unit (when given), plus the user's ``attrs`` (e.g.
                            the case as YAML text)
    /snapshots/000001000/   attrs: step, time (in time_unit)
        density             (nz, ny, nx), dtype as given; 2D grids have nz = 1
        velocity            (nz, ny, nx, 3); a 2-component vector is stored zero-padded to 3
                            components with the dataset attr ``n_components = 2``

Open ``fields.xmf`` in ParaView (Xdmf3ReaderS / "XDMF Reader (Top Level Partition)").
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import h5py
import numpy as np
import yaml

from simsplit.version import __version__

H5_NAME = "fields.h5"
XMF_NAME = "fields.xmf"
FORMAT_NAME = "simsplit-fields"
FORMAT_VERSION = 1

_NUMBER_TYPES = {"f": "Float", "i": "Int", "u": "UInt"}


def _simsplit_version() -> str:
    return __version__


@dataclass(frozen=True)
class _Item:
    """One dataset of one snapshot, as the XDMF sidecar needs it."""

    name: str
    h5_path: str
    dims: tuple[int, ...]
    number_type: str
    precision: int
    is_vector: bool


@dataclass(frozen=True)
class _Snapshot:
    step: int
    time: float
    items: tuple[_Item, ...]


def _snapshot_group(step: int) -> str:
    return f"/snapshots/{step:09d}"


class FieldWriter:
    """Append grid-field snapshots to ``directory/fields.h5`` and keep ``fields.xmf`` in step.

    ``shape`` is the grid shape in array order, ``(ny, nx)`` or ``(nz, ny, nx)``; ``spacing``
    is in the same order and defaults to a unit square/cube (``1 / n`` per axis). Values sit at
    cell centres: array index ``[j, i]`` is at ``((i + 0.5) dx, (j + 0.5) dy)``.

    Time: each snapshot has its step and its time, in ``time_unit`` (a free text, e.g.
    "lattice time steps"), which the file's attrs and an XDMF ``Information`` element of the
    time series name; XDMF ``Time`` values, which ParaView shows, are these times.

    XDMF mapping: every snapshot is a ``3DCoRectMesh`` whose *nodes* are the cell centres
    (Origin = half a cell, attributes ``Center="Node"``), so ParaView shows exactly the stored
    values without resampling. 2D grids are written as one layer of a 3DCoRectMesh
    (Dimensions ``1 ny nx``, datasets stored with a leading axis of length 1): ParaView's Xdmf3
    reader would put a 2DCoRectMesh in the y-z plane, where x-y velocity vectors lie across
    the plane and stream tracers fail, and its legacy XDMF reader needs each dataset's rank to
    match the mesh. Origin and DxDyDz values are listed z, y, x like the Dimensions.

    Vectors: ParaView only treats 3-component arrays as vectors (glyphs, stream tracers), so a
    2-component vector is stored zero-padded to 3 components. That costs 50 % more space for
    that field but needs no XDMF ``Function``/``HyperSlab`` machinery, which readers support
    unevenly, and any HDF5 tool sees a plain array. :func:`read_snapshot` strips the padding.

    Consistency: the HDF5 file is flushed after every :meth:`write` and the XDMF file is then
    replaced atomically, so after a crash both are readable and list the same snapshots.
    ``keep_open=False`` closes the HDF5 file between writes (slower), which lets other
    processes, e.g. ParaView, open it while the run goes on (HDF5 locks a file open for
    writing). ``append=True`` continues an existing file (e.g. on restart) instead of
    truncating it.
    """

    def __init__(
        self,
        directory: Path,
        shape: tuple[int, ...],
        spacing: tuple[float, ...] | None = None,
        attrs: dict | None = None,
        *,
        keep_open: bool = True,
        append: bool = False,
        time_unit: str | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.shape = tuple(int(n) for n in shape)
        if len(self.shape) not in (2, 3) or min(self.shape) < 1:
            raise ValueError(f"shape must be (ny, nx) or (nz, ny, nx) of positive ints: {shape}")
        if spacing is None:
            spacing = tuple(1.0 / n for n in self.shape)
        self.spacing = tuple(float(d) for d in spacing)
        if len(self.spacing) != len(self.shape) or min(self.spacing) <= 0:
            raise ValueError(f"spacing must be positive, one per axis of {self.shape}: {spacing}")
        self.origin = tuple(0.5 * d for d in self.spacing)
        self.h5_path = self.directory / H5_NAME
        self.xmf_path = self.directory / XMF_NAME
        self._keep_open = keep_open
        self._snapshots: list[_Snapshot] = []
        self._closed = False
        self.directory.mkdir(parents=True, exist_ok=True)

        if append and self.h5_path.exists():
            self._file = h5py.File(self.h5_path, "a")
            self._check_compatible()
            self._snapshots = _scan_snapshots(self._file)
        else:
            self._file = h5py.File(self.h5_path, "w")
            self._write_file_attrs(attrs or {})
            self._file.create_group("snapshots")
        if attrs and append:
            self._set_user_attrs(attrs)
        if time_unit is not None:
            self._file.attrs["time_unit"] = time_unit
        self.time_unit: str | None = _plain(self._file.attrs.get("time_unit"))
        self._file.flush()
        self._write_xmf()
        if not keep_open:
            self._file.close()

    # -- public API -------------------------------------------------------------------------

    @property
    def steps(self) -> list[int]:
        """Steps written so far, in order."""
        return [snap.step for snap in self._snapshots]

    def write(self, step: int, time: float, fields: dict[str, np.ndarray]) -> None:
        """Append one snapshot; scalars have the grid shape, vectors one extra axis of 2 or 3."""
        if self._closed:
            raise RuntimeError("FieldWriter is closed")
        step = int(step)
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if any(snap.step == step for snap in self._snapshots):
            raise ValueError(f"step {step} was already written")
        if not fields:
            raise ValueError("no fields to write")
        arrays = {name: self._validate(name, value) for name, value in fields.items()}

        h5 = self._open()
        group_path = _snapshot_group(step)
        items = []
        try:
            group = h5.create_group(group_path)
            group.attrs["step"] = step
            group.attrs["time"] = float(time)
            for name, (data, n_comp) in arrays.items():
                dset = group.create_dataset(name, data=data)
                if n_comp:
                    dset.attrs["n_components"] = n_comp
                items.append(_item(dset, is_vector=bool(n_comp)))
        except BaseException:
            # leave no half-written snapshot behind for read_snapshot to find
            if group_path in h5:
                del h5[group_path]
            raise
        finally:
            h5.flush()
            if not self._keep_open:
                h5.close()
        self._snapshots.append(_Snapshot(step, float(time), tuple(items)))
        # the sidecar only ever names data that is already on disk
        self._write_xmf()

    def close(self) -> None:
        """Flush and close the HDF5 file; further writes raise RuntimeError."""
        if self._closed:
            return
        self._closed = True
        if self._file.id.valid:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _open(self) -> h5py.File:
        if not self._file.id.valid:
            self._file = h5py.File(self.h5_path, "a")
        return self._file

    def _validate(self, name: str, value: Any) -> tuple[np.ndarray, int]:
        """Return the array to store and its original component count (0 for scalars)."""
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise ValueError(f"invalid field name {name!r}")
        data = np.ascontiguousarray(value)
        kind, size = data.dtype.kind, data.dtype.itemsize
        if kind not in _NUMBER_TYPES or (kind == "f" and size not in (4, 8)):
            # XDMF has no half floats, complex or bool
            raise TypeError(
                f"field {name!r}: dtype {data.dtype} cannot be written; use a "
                "32/64-bit float or an integer type"
            )
        if data.shape == self.shape:
            n_comp = 0
        elif data.shape[:-1] == self.shape and data.shape[-1] in (2, 3):
            n_comp = data.shape[-1]
            if n_comp == 2:
                padded = np.zeros(self.shape + (3,), dtype=data.dtype)
                padded[..., :2] = data
                data = padded
        else:
            raise ValueError(
                f"field {name!r}: shape {data.shape} is neither the grid shape {self.shape} "
                f"nor a vector of 2 or 3 components on it"
            )
        if len(self.shape) == 2:
            data = data[np.newaxis]
        return data, n_comp

    def _write_file_attrs(self, attrs: dict) -> None:
        h5 = self._file
        h5.attrs["format"] = FORMAT_NAME
        h5.attrs["format_version"] = FORMAT_VERSION
        h5.attrs["simsplit_version"] = _simsplit_version()
        h5.attrs["shape"] = np.array(self.shape, dtype=np.int64)
        h5.attrs["spacing"] = np.array(self.spacing, dtype=np.float64)
        h5.attrs["origin"] = np.array(self.origin, dtype=np.float64)
        self._set_user_attrs(attrs)

    def _set_user_attrs(self, attrs: dict) -> None:
        for key, value in attrs.items():
            # nested structures (e.g. a parsed case) become YAML text, readable by any tool
            if isinstance(value, (dict, list, tuple)) and not _is_numeric_sequence(value):
                value = yaml.safe_dump(value, sort_keys=False)
            elif value is None:
                value = "null"
            self._file.attrs[str(key)] = value

    def _check_compatible(self) -> None:
        h5 = self._file
        if h5.attrs.get("format") != FORMAT_NAME:
            raise ValueError(f"{self.h5_path} is not a {FORMAT_NAME} file")
        shape = tuple(int(n) for n in h5.attrs["shape"])
        spacing = tuple(float(d) for d in h5.attrs["spacing"])
        if shape != self.shape or not np.allclose(spacing, self.spacing, rtol=1e-12, atol=0):
            raise ValueError(
                f"cannot append to {self.h5_path}: it has shape {shape} and spacing {spacing}, "
                f"not {self.shape} and {self.spacing}"
            )

    def _write_xmf(self) -> None:
        tree = _build_xmf(self._snapshots, self.shape, self.origin, self.spacing, self.time_unit)
        tmp = self.xmf_path.with_name(self.xmf_path.name + ".tmp")
        tree.write(tmp, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, self.xmf_path)


def _is_numeric_sequence(value: Any) -> bool:
    return all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value)


def _item(dset: h5py.Dataset, is_vector: bool) -> _Item:
    return _Item(
        name=dset.name.rsplit("/", 1)[-1],
        h5_path=dset.name,
        dims=dset.shape,
        number_type=_NUMBER_TYPES[dset.dtype.kind],
        precision=dset.dtype.itemsize,
        is_vector=is_vector,
    )


def _scan_snapshots(h5: h5py.File) -> list[_Snapshot]:
    snapshots = []
    for group in h5["snapshots"].values():
        items = []
        for dset in group.values():
            items.append(_item(dset, is_vector="n_components" in dset.attrs))
        snapshots.append(
            _Snapshot(int(group.attrs["step"]), float(group.attrs["time"]), tuple(items))
        )
    snapshots.sort(key=lambda snap: snap.step)
    return snapshots


def _text_vector(values: tuple[float, ...]) -> str:
    return " ".join(repr(float(v)) for v in values)


def _build_xmf(
    snapshots: list[_Snapshot],
    shape: tuple[int, ...],
    origin: tuple[float, ...],
    spacing: tuple[float, ...],
    time_unit: str | None = None,
) -> ET.ElementTree:
    if len(shape) == 2:
        # one layer at z = 0; its dz only matters to ParaView's bounding box
        shape3 = (1,) + shape
        origin3 = (0.0,) + origin
        spacing3 = (min(spacing),) + spacing
    else:
        shape3, origin3, spacing3 = shape, origin, spacing

    root = ET.Element("Xdmf", Version="3.0")
    domain = ET.SubElement(root, "Domain")
    series = ET.SubElement(
        domain, "Grid", Name="fields", GridType="Collection", CollectionType="Temporal"
    )
    if time_unit is not None:
        ET.SubElement(series, "Information", Name="time_unit", Value=time_unit)
    for snap in snapshots:
        grid = ET.SubElement(series, "Grid", Name=f"step_{snap.step:09d}", GridType="Uniform")
        ET.SubElement(grid, "Time", Value=repr(snap.time))
        ET.SubElement(
            grid,
            "Topology",
            TopologyType="3DCoRectMesh",
            Dimensions=" ".join(str(n) for n in shape3),
        )
        geometry = ET.SubElement(grid, "Geometry", GeometryType="ORIGIN_DXDYDZ")
        for values in (origin3, spacing3):
            item = ET.SubElement(
                geometry,
                "DataItem",
                Format="XML",
                NumberType="Float",
                Precision="8",
                Dimensions="3",
            )
            item.text = _text_vector(values)
        for field in snap.items:
            attribute = ET.SubElement(
                grid,
                "Attribute",
                Name=field.name,
                AttributeType="Vector" if field.is_vector else "Scalar",
                Center="Node",
            )
            item = ET.SubElement(
                attribute,
                "DataItem",
                Format="HDF",
                NumberType=field.number_type,
                Precision=str(field.precision),
                Dimensions=" ".join(str(n) for n in field.dims),
            )
            item.text = f"{H5_NAME}:{field.h5_path}"
    ET.indent(root)
    return ET.ElementTree(root)


def _resolve_h5(path: Path | str) -> Path:
    path = Path(path)
    return path / H5_NAME if path.is_dir() else path


def list_snapshots(path: Path | str) -> list[tuple[int, float]]:
    """``(step, time)`` of every snapshot in a fields file (or its directory), by step."""
    with h5py.File(_resolve_h5(path), "r") as h5:
        return [(snap.step, snap.time) for snap in _scan_snapshots(h5)]


def read_snapshot(path: Path | str, step: int | None = None) -> dict:
    """Read one snapshot (the last step by default) from a fields file or its directory.

    Returns ``{"step": int, "time": float, "fields": {name: array}, "attrs": {file attrs}}``;
    arrays come back exactly as written (dtype, shape, 2-component vectors unpadded).
    """
    with h5py.File(_resolve_h5(path), "r") as h5:
        snapshots = h5["snapshots"]
        if step is None:
            if len(snapshots) == 0:
                raise KeyError(f"{path} holds no snapshots")
            group = max(snapshots.values(), key=lambda g: int(g.attrs["step"]))
        else:
            name = _snapshot_group(int(step))
            if name not in h5:
                raise KeyError(f"{path} has no snapshot for step {step}")
            group = h5[name]
        flat = len(h5.attrs["shape"]) == 2
        fields = {}
        for name, dset in group.items():
            data = dset[0] if flat else dset[()]
            n_comp = dset.attrs.get("n_components")
            if n_comp is not None:
                data = np.ascontiguousarray(data[..., : int(n_comp)])
            fields[name] = data
        attrs = {key: _plain(value) for key, value in h5.attrs.items()}
        return {
            "step": int(group.attrs["step"]),
            "time": float(group.attrs["time"]),
            "fields": fields,
            "attrs": attrs,
        }


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value
