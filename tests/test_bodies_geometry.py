"""Bodies from the case file (issue #21): shapes rasterised to cells in lattice or physical
units, masks from .npy and PNG, and bad geometry refused in one line (exit 2 from the CLI)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from simsplit.case import validate_case
from simsplit.errors import CaseError
from simsplit.fluid.geometry import Frame, build_bodies
from simsplit.fluid.geometry.polygon import hull_width, inside
from tests.conftest import body_case


def _bodies(domain: dict, faces: tuple[str, str] = ("inlet", "outlet")):
    return build_bodies(domain, faces)


def _one(shape: list[int], body: dict, **domain) -> np.ndarray:
    (b,) = _bodies({"shape": shape, "bodies": [{"name": "b", **body}], **domain})
    return b.cells


def test_circle_cells_in_lattice_and_physical_units() -> None:
    lattice = _one([20, 10], {"shape": "circle", "centre": [5, 5], "radius": 1.0})
    assert sorted(map(tuple, np.argwhere(lattice))) == [(4, 4), (4, 5), (5, 4), (5, 5)]
    physical = _one([20, 10], {"shape": "circle", "centre": [0.5, 0.5], "diameter": 0.2},
                    size=[2.0, 1.0], units="physical")
    assert np.array_equal(physical, lattice)
    big = _one([100, 100], {"shape": "circle", "centre": [50.3, 49.1], "radius": 20})
    assert abs(big.sum() / (math.pi * 400) - 1) < 0.01


def test_box_and_polygon() -> None:
    box = _one([12, 8], {"shape": "box", "lower": [2, 1], "upper": [5, 3]})
    assert np.array_equal(np.argwhere(box.any(axis=0)).ravel(), [2, 3, 4])  # centres 2.5..4.5
    assert np.array_equal(np.argwhere(box.any(axis=1)).ravel(), [1, 2])
    square = _one([12, 8], {"shape": "polygon", "vertices": [[2, 1], [5, 1], [5, 3], [2, 3]]})
    assert np.array_equal(square, box)
    # an L (concave; clockwise): the notch's cells stay fluid
    ell = _one([10, 10], {"shape": "polygon",
                          "vertices": [[1, 1], [1, 7], [3, 7], [3, 3], [7, 3], [7, 1]]})
    assert ell[1, 5] and ell[5, 1] and not ell[5, 5] and ell.sum() == 2 * 6 + 4 * 2
    got = inside(np.array([0.25, 0.6, -0.1]), np.array([0.25, 0.6, 0.5]),
                 np.array([0.0, 1, 0]), np.array([0.0, 0, 1]))
    assert got.tolist() == [True, False, False]
    assert hull_width(np.array([0.0, 3, 3, 0]), np.array([0.0, 0, 1, 1])) == pytest.approx(1)
    tilted = np.array([[0.0, 0], [3, 3], [2.5, 3.5], [-0.5, 0.5]])
    assert hull_width(tilted[:, 0], tilted[:, 1]) == pytest.approx(math.sqrt(0.5))


def test_mask_from_npy_and_png(tmp_path) -> None:
    from PIL import Image

    arr = np.zeros((4, 6), dtype=np.uint8)
    arr[0, 1] = arr[3, 4] = 1  # row 0 is y = 0 (the bottom)
    np.save(tmp_path / "m.npy", arr)
    cells = _one([10, 8], {"shape": "mask", "file": str(tmp_path / "m.npy"), "origin": [2, 1]})
    assert sorted(map(tuple, np.argwhere(cells))) == [(1, 3), (4, 6)]
    img = np.full((4, 6, 3), 255, dtype=np.uint8)
    img[0, 4] = (20, 20, 20)  # the image's top row: the highest y
    img[3, 1] = (0, 0, 90)  # dark blue is dark too
    img[1, 1] = (200, 200, 200)  # light grey is fluid
    Image.fromarray(img).save(tmp_path / "m.png")
    png = _one([10, 8], {"shape": "mask", "file": str(tmp_path / "m.png"), "origin": [2, 1]})
    assert np.array_equal(png, cells)
    import h5py

    with h5py.File(tmp_path / "m.h5", "w") as h5:
        h5["wing"] = arr.astype(bool)
    h5mask = _one([10, 8], {"shape": "mask", "file": str(tmp_path / "m.h5"), "dataset": "wing",
                            "origin": [2, 1]})
    assert np.array_equal(h5mask, cells)
    with pytest.raises(CaseError, match=r"cannot read .*no dataset 'mask' \(it has: wing\)"):
        _one([10, 8], {"shape": "mask", "file": str(tmp_path / "m.h5")})


def test_mask_path_is_relative_to_the_case_file(tmp_path) -> None:
    from simsplit.case import load_case

    np.save(tmp_path / "body.npy", np.ones((3, 3)))
    case = body_case(30, 12, bodies=[{"name": "m", "shape": "mask", "file": "body.npy",
                                      "origin": [8, 4]}])
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(case))
    loaded = load_case(tmp_path / "case.yaml")
    assert loaded["domain"]["bodies"][0]["file"] == str(tmp_path / "body.npy")


BAD = [
    ({"shape": "mask", "file": "missing.npy"}, "domain.bodies[0] (b).file: 'missing.npy' "
     "does not exist"),
    ({"shape": "mask", "file": "garbage.png"}, "cannot read"),
    ({"shape": "mask", "file": "flat.npy"}, "expected a 2D numeric or boolean array"),
    ({"shape": "circle", "centre": [38, 10], "radius": 3}, "leaves the domain"),
    ({"shape": "circle", "centre": [1.2, 10], "radius": 1}, "touches the inlet at x = 0"),
    ({"shape": "box", "lower": [30, 4], "upper": [40, 6]}, "touches the outlet at x = 1"),
    ({"shape": "circle", "centre": [10, 10], "diameter": 0.9}, "thinner than a cell (0.9"),
    ({"shape": "circle", "centre": [10, 10], "diameter": 1.0}, "no cell centre lies inside"),
    ({"shape": "polygon", "vertices": [[10, 10], [20, 10.6], [20, 10.9]]}, "thinner than a cell"),
    ({"shape": "mask", "file": "diagonal.npy", "origin": [10, 5]}, "meet only at a corner"),
    ({"shape": "circle", "centre": [10, 10]}, "one of radius or diameter"),
]


@pytest.mark.parametrize("body, message", BAD)
def test_bad_geometry_is_one_line(tmp_path, monkeypatch, body, message) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.png").write_bytes(b"not a png at all")
    np.save(tmp_path / "flat.npy", np.ones(5))
    np.save(tmp_path / "diagonal.npy", np.eye(3))
    with pytest.raises(CaseError) as err:
        validate_case(body_case(40, 20, bodies=[{"name": "b", **body}]))
    text = str(err.value)
    assert message in text and "\n" not in text


def test_bad_layouts() -> None:
    two = [{"name": "a", "shape": "circle", "centre": [10, 10], "radius": 3},
           {"name": "a", "shape": "circle", "centre": [20, 10], "radius": 3}]
    with pytest.raises(CaseError, match=r"bodies\[1\] \(a\): name 'a' is already used"):
        validate_case(body_case(40, 20, bodies=two))
    two[1].update(name="c", centre=[14, 10])
    with pytest.raises(CaseError, match="overlaps domain.bodies"):
        validate_case(body_case(40, 20, bodies=two))
    case = body_case(40, 20)
    case["domain"].update(units="physical", size=[2.0, 1.5])
    with pytest.raises(CaseError, match="cells must be square"):
        validate_case(case)
    case["domain"].pop("size")
    with pytest.raises(CaseError, match="physical needs domain.size"):
        validate_case(case)
    case = body_case(40, 20, bodies=[])
    case["domain"]["boundaries"]["lid"] = True
    with pytest.raises(CaseError, match="a lid with an inlet is not allowed"):
        validate_case(case)
    case = body_case(40, 20, bodies=[])
    del case["domain"]["inlet"]
    with pytest.raises(CaseError, match="domain.inlet: required"):
        validate_case(case)
    case = body_case(40, 20)  # a circle on a 3D grid: the 3D shapes are sphere, cylinder
    case["domain"]["shape"] = [40, 20, 8]
    with pytest.raises(CaseError, match="a circle needs a 2D grid"):
        validate_case(case)
    case = body_case(40, 20, bodies=[])
    case["domain"]["shape"] = [40, 20, 8]
    case["domain"]["inlet"] = {"profile": "file", "file": "x.npy"}  # 3D files: test_units.py
    with pytest.raises(CaseError, match="domain.inlet.file: 'x.npy' does not exist"):
        validate_case(case)


def test_reynolds_number_from_inflow_and_body() -> None:
    """Re = U_mean D / nu: Schäfer & Turek's 2D-1 at D = 10 cells, U_max 0.1."""
    case = body_case(220, 41, bodies=[{"name": "c", "shape": "circle", "centre": [0.2, 0.2],
                                       "diameter": 0.1}])
    case["fluid"].update(reynolds=20, viscosity=None)
    case["domain"].update(size=[2.2, 0.41], units="physical")
    case["domain"]["inlet"] = {"velocity": 0.1}
    from simsplit.fluid.setup import setup_from_case

    setup = setup_from_case(validate_case(case))
    assert setup.bodies[0].reference_length == pytest.approx(10)
    assert setup.params.viscosity == pytest.approx(0.1 * 2 / 3 * 10 / 20)
    assert Frame.from_domain(case["domain"]).dx == pytest.approx(0.01)


def test_cli_bad_geometry_exits_2_with_one_line(run_cli, tmp_path) -> None:
    case = body_case(40, 20, bodies=[{"name": "wing", "shape": "mask", "file": "nope.png"}])
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(case))
    res = run_cli("run", "case.yaml", timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "domain.bodies[0] (wing).file" in lines[0]
    assert "does not exist" in lines[0], lines


def test_interpolation_weights_from_exact_distances() -> None:
    """Bouzidi weights: k = 2 delta below halfway, -1 / (2 delta) beyond, -1 (halfway) where
    there is no body, for masks, and where a short link's neighbour is not fluid."""
    from simsplit.fluid.geometry import solid_and_ids
    from simsplit.fluid.geometry.links import link_weights
    from simsplit.numerics.lattice import D2Q9

    bodies = _bodies({"shape": [20, 12], "bodies": [
        {"name": "c", "shape": "circle", "centre": [10.0, 6.0], "radius": 2.2},
        {"name": "m", "shape": "box", "lower": [15.2, 0], "upper": [17, 1.7]}]})
    solid, _ = solid_and_ids(bodies, (12, 20))
    k = link_weights(bodies, solid, D2Q9, (False, False))
    # cell (i=12, j=5) (centre 12.5, 5.5) pulls q=1 (c = +x) from (11, 5) inside the circle;
    # the link runs towards -x and meets the circle at x = 10 + sqrt(2.2^2 - 0.5^2)
    delta = 12.5 - (10 + (2.2**2 - 0.25) ** 0.5)
    assert solid[5, 11] and not solid[5, 12]
    assert k[1, 5, 12] == pytest.approx(2 * delta if delta < 0.5 else -1 / (2 * delta))
    # the box's face at x = 15.2: from cell 14 (centre 14.5) delta = 0.7 along +x (q = 3 pulls)
    assert k[3, 0, 14] == pytest.approx(-1 / 1.4)
    # its top at y = 1.7: from row 2 (centre 2.5) delta = 0.8 along -y (q = 2 pulls from below)
    assert k[2, 2, 16] == pytest.approx(-1 / 1.6)
    assert (k[:, ~solid] != -1).sum() > 10 and (k[:, solid] == -1).all()
    assert (k[:, 4:9, 0:6] == -1).all()  # cells more than a link away from every body
    assert (k[0] == -1).all()  # the rest direction has no link


def test_cylinder_case_is_schaefer_turek_2d1() -> None:
    """cases/cylinder2d.yaml: D = 10 cells at (20, 20) cells in a 220 x 41 channel, Re = 20
    from the mean inflow 2/3 U_max and D."""
    from simsplit.case import load_case
    from simsplit.fluid.setup import setup_from_case
    from tests.conftest import ROOT

    setup = setup_from_case(load_case(ROOT / "cases" / "cylinder2d.yaml"))
    (body,) = setup.bodies
    assert body.name == "cylinder" and body.reference_length == pytest.approx(10)
    assert body.extent == pytest.approx((15, 25, 15, 25))
    assert setup.inlet.mean_velocity * 10 / setup.params.viscosity == pytest.approx(20)
    assert setup.x_kinds == ("inlet", "outlet")
    refined = setup_from_case(load_case(ROOT / "cases" / "cylinder2d.yaml",
                                        ["domain.shape=[440,82]"]))
    assert refined.bodies[0].reference_length == pytest.approx(20)


def test_shedding_from_a_lift_signal() -> None:
    """A sampled lift sin(2 pi f t) with a drag at twice the frequency: the Strouhal number
    f L / U, maxima and means over whole periods; a steady or too short signal gives None."""
    from simsplit.fluid.shedding import analyse

    steps = np.arange(0, 20000, 10, dtype=float)
    f = 1 / 1234.5
    lift = 0.9 * np.sin(2 * np.pi * f * steps + 0.3) + 0.02
    drag = 3.1 + 0.05 * np.sin(4 * np.pi * f * steps)
    shed = analyse(steps, drag, lift, length=20.0, velocity=0.0667)
    assert shed is not None and shed.periods >= 7
    assert shed.period_steps == pytest.approx(1234.5, rel=1e-4)
    assert shed.strouhal == pytest.approx(20.0 * f / 0.0667, rel=1e-4)
    assert shed.lift_max == pytest.approx(0.92, abs=2e-3)
    assert shed.lift_mean == pytest.approx(0.02, abs=0.01)
    assert shed.drag_max == pytest.approx(3.15, abs=1e-3)
    assert analyse(steps, drag, np.full_like(steps, 0.0106), 20.0, 0.0667) is None
    assert analyse(steps[:200], drag[:200], lift[:200], 20.0, 0.0667) is None  # < 2 periods


def test_inflow_stability_checks() -> None:
    """A viscous inflow is not refused by the lid's corner rule (nu U = 0.1 here); a cell
    Reynolds number U / nu beyond 1000 is, in one line."""
    case = body_case(40, 20, bodies=[], fluid__viscosity=0.5)
    case["domain"]["inlet"] = {"velocity": 0.2}
    validate_case(case)
    case["fluid"]["viscosity"] = 1e-4
    with pytest.raises(CaseError, match="cell Reynolds number U / nu = 2e\\+03"):
        validate_case(case)


def test_bad_probes_are_one_line() -> None:
    case = body_case(40, 20, output__probes=[{"name": "p", "point": [10, 9.5]}])
    with pytest.raises(CaseError, match=r"output.probes \(p\): cell \[10, 9\] is inside a body"):
        validate_case(case)
    case["output"]["probes"] = [{"name": "p", "point": [41, 5]}]
    with pytest.raises(CaseError, match=r"output.probes\[0\] \(p\): point \[41, 5\] lies outside"):
        validate_case(case)
    case["output"]["probes"] = [{"name": "p", "point": [1, 5]}, {"name": "p", "point": [2, 5]}]
    with pytest.raises(CaseError, match="already used by another probe"):
        validate_case(case)
