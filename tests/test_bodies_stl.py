"""STL meshes as bodies (issue #21, 3D): binary and ASCII files read alike, ray-parity
voxelisation against the exact shapes, wall distances from the triangles, the project's own
sphere case against the primitive sphere, and bad meshes refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.case import load_case, validate_case
from simsplit.errors import CaseError
from simsplit.fluid.geometry import build_bodies
from simsplit.fluid.geometry.links import link_weights
from simsplit.fluid.geometry.mesh import open_edges, read_stl
from simsplit.numerics.lattice import D3Q19
from tests.conftest import body_case_3d

CASES = Path(__file__).resolve().parents[1] / "cases"
WALLS = ("wall", "wall")


def _body(shape: list[int], spec: dict):
    (b,) = build_bodies({"shape": shape, "bodies": [{"name": "b", **spec}]}, WALLS)
    return b


def _delta(k: np.ndarray) -> np.ndarray:
    """The wall distance a link weight stands for (simsplit/fluid/geometry/links.py)."""
    return np.where(k >= 0, k / 2, -1 / (2 * k))


def test_binary_and_ascii_read_alike(tmp_path) -> None:
    import struct

    ascii_tris = read_stl(CASES / "cube.stl", "b")
    assert ascii_tris.shape == (12, 3, 3) and open_edges(ascii_tris) == 0
    with (tmp_path / "cube_bin.stl").open("wb") as out:
        out.write(b"x" * 80 + struct.pack("<I", 12))
        for t in ascii_tris:
            out.write(struct.pack("<12fH", 0, 0, 0, *t.ravel(), 0))
    np.testing.assert_array_equal(read_stl(tmp_path / "cube_bin.stl", "b"), ascii_tris)
    sphere = read_stl(CASES / "sphere.stl", "b")
    assert sphere.shape == (1280, 3, 3) and open_edges(sphere) == 0
    assert np.allclose(np.linalg.norm(sphere, axis=2), 0.5, atol=1e-7)  # float32 vertices


def test_cube_mesh_is_the_box_exactly() -> None:
    """A cube mesh (vertices on no cell centre) gives the box primitive's cells and, from its
    triangles, the box's link weights (to rounding)."""
    mesh = _body([20, 16, 16], {"shape": "stl", "file": str(CASES / "cube.stl"), "scale": 6,
                                "offset": [5.2, 3.3, 4.1]})
    box = _body([20, 16, 16], {"shape": "box", "lower": [5.2, 3.3, 4.1],
                               "upper": [11.2, 9.3, 10.1]})
    assert np.array_equal(mesh.cells, box.cells) and mesh.size == 6 ** 3
    km = link_weights([mesh], mesh.cells, D3Q19, (False,) * 3)
    kb = link_weights([box], box.cells, D3Q19, (False,) * 3)
    assert (km != -1).sum() > 200 and np.abs(km - kb).max() < 1e-12
    assert mesh.extent == pytest.approx((5.2, 11.2, 3.3, 9.3, 4.1, 10.1))


def test_icosphere_against_the_exact_sphere() -> None:
    """1,280 triangles at radius 5 cells (chords 0.011 cells inside the sphere): the cells
    differ in a few of 500 and the wall distances by 0.02 cells at the median."""
    spec = {"shape": "stl", "file": str(CASES / "sphere.stl"), "scale": 10,
            "offset": [12.1, 11.8, 12.3]}
    mesh = _body([24, 24, 24], spec)
    exact = _body([24, 24, 24], {"shape": "sphere", "centre": [12.1, 11.8, 12.3], "radius": 5})
    differ = int((mesh.cells ^ exact.cells).sum())
    assert differ <= 0.01 * exact.size and mesh.size <= exact.size  # chords cut inside
    km = link_weights([mesh], mesh.cells, D3Q19, (False,) * 3)
    ke = link_weights([exact], exact.cells, D3Q19, (False,) * 3)
    both = (km != -1) & (ke != -1)
    gap = np.abs(_delta(km[both]) - _delta(ke[both]))
    print(f"icosphere: {differ} cells of {exact.size} differ; wall distances differ by "
          f"{np.median(gap):.3g} (median), {np.percentile(gap, 90):.3g} (90 %)")
    assert both.sum() > 1000 and np.median(gap) < 0.03 and np.percentile(gap, 90) < 0.06


def _sphere_case(body: dict, subdomains: int = 1) -> dict:
    """cases/sphere_stl.yaml on a coarser duct (D = 8 cells), ``body`` in place of its mesh."""
    import yaml

    raw = yaml.safe_load((CASES / "sphere_stl.yaml").read_text())
    raw["domain"].update(shape=[48, 20, 20], bodies=[body])
    raw["domain"]["inlet"]["ramp_steps"] = 50
    raw["output"]["dir"] = None
    raw["decomposition"]["subdomains"] = subdomains
    return validate_case(raw)


def test_sphere_case_against_the_primitive_sphere() -> None:
    """The project's STL case, 300 steps on a coarser duct: the mesh's drag within 2 % of the
    exact sphere's, the same bits on 1 and 2 slabs."""
    from simsplit.fluid.forces import body_links, measure_forces

    case = load_case(CASES / "sphere_stl.yaml")  # the case itself validates
    assert case["domain"]["bodies"][0]["shape"] == "stl"
    mesh = {"name": "sphere", "shape": "stl", "file": str(CASES / "sphere.stl"), "scale": 8,
            "offset": [14, 9.7, 10], "reference_length": 8}
    exact = {"name": "sphere", "shape": "sphere", "centre": [14, 9.7, 10], "diameter": 8}
    runs = {}
    for name, body, n in (("mesh", mesh, 1), ("mesh2", mesh, 2), ("exact", exact, 1)):
        sim = Simulation(_sphere_case(body, n))
        sim.step(300)
        runs[name] = (sim.solver.populations(),
                      measure_forces(sim.solver, body_links(sim.solver.setup))[0])
    assert np.array_equal(runs["mesh"][0], runs["mesh2"][0])
    assert np.array_equal(runs["mesh"][1], runs["mesh2"][1])
    ratio = runs["mesh"][1][0] / runs["exact"][1][0]
    print(f"drag at step 300: mesh {runs['mesh'][1][0]:.6g}, exact sphere "
          f"{runs['exact'][1][0]:.6g} (ratio {ratio:.4f})")
    assert abs(ratio - 1) < 0.02


BAD = [
    ("missing.stl", "does not exist"),
    ("garbage.stl", "cannot read"),
    ("open.stl", "is not closed (watertight): 3 of its edges"),
]


@pytest.mark.parametrize("name, message", BAD)
def test_bad_meshes_are_one_line(tmp_path, monkeypatch, name, message) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.stl").write_bytes(b"\x00\x01 this is no mesh")
    text = (CASES / "cube.stl").read_text().split("  facet")
    (tmp_path / "open.stl").write_text("  facet".join(text[:-1]) + "\nendsolid\n")  # 11 facets
    with pytest.raises(CaseError) as err:
        validate_case(body_case_3d(24, 10, 12, bodies=[
            {"name": "b", "shape": "stl", "file": name, "scale": 4, "offset": [8, 3, 4]}]))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("offset, scale, message", [
    ([22, 3, 4], 4, "leaves the domain"), ([0.5, 3, 4], 4, "touches the inlet at x = 0"),
    ([8, 3, 4], 0.5, "thinner than a cell")])
def test_bad_placement_is_one_line(offset, scale, message) -> None:
    with pytest.raises(CaseError) as err:
        validate_case(body_case_3d(24, 10, 12, bodies=[
            {"name": "b", "shape": "stl", "file": str(CASES / "cube.stl"), "scale": scale,
             "offset": offset}]))
    assert message in str(err.value) and "\n" not in str(err.value)
