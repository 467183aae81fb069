"""Case files: schema errors name the key, the value and what is allowed; overrides work."""

import copy
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simsplit.case import CaseError, apply_overrides, load_case, validate_case
from tests.conftest import ROOT, fluid_case

CAVITY = ROOT / "cases" / "cavity.yaml"
LJ_TINY = ROOT / "cases" / "lj_tiny.yaml"


def test_shipped_cases_are_valid():
    for path in sorted((ROOT / "cases").glob("*.yaml")):
        case = load_case(path)
        assert case["physics"] in ("fluid", "md")


def test_defaults_are_filled():
    case = validate_case(
        {"physics": "fluid", "fluid": {"reynolds": 10}, "domain": {"shape": [16, 16]}}
    )
    assert case["fluid"]["collision"] == "trt"
    assert case["fluid"]["trt_magic"] == pytest.approx(3 / 16)
    assert case["domain"]["boundaries"] == {"x": "wall", "y": "wall", "lid": True}
    assert case["decomposition"] == {"subdomains": 1, "weights": None}
    assert case["run"]["backend"] == "auto" and case["output"]["dir"] is None


def test_overrides_are_typed_and_nested():
    case = load_case(
        CAVITY, ["fluid.reynolds=400", "decomposition.weights=[1, 2]", "run.precision=float32"]
    )
    assert case["fluid"]["reynolds"] == 400
    assert case["decomposition"]["weights"] == [1, 2]
    api = load_case(CAVITY, {"fluid.collision": "bgk"})
    assert api["fluid"]["collision"] == "bgk"


@pytest.mark.parametrize(
    "override, expected",
    [
        ({"fluid.reynolds": "fast"}, "fluid.reynolds: 'fast' is not allowed: expected a number"),
        ({"fluid.reynods": 5}, "fluid.reynods: unknown key; did you mean 'reynolds'?"),
        (
            {"domain.shape": [-4, 16]},
            "domain.shape[0]: -4 is not allowed: expected an integer >= 2",
        ),
        ({"domain.shape": [16]}, "domain.shape: [16] is not allowed"),
        (
            {"fluid.collision": "mrt"},
            "fluid.collision: 'mrt' is not allowed: expected one of 'bgk', 'trt'",
        ),
        ({"run.backend": "opencl"}, "run.backend: 'opencl' is not allowed: expected one of 'auto'"),
        ({"decomposition.subdomains": 0}, "decomposition.subdomains: 0 is not allowed"),
        ({"decomposition.subdomains": 100}, "too small to split into 100 slabs"),
        ({"decomposition.weights": [1, 2, 3]}, "decomposition.weights: 3 weights given"),
        ({"fluid.lid_velocity": 0.5}, "fluid.lid_velocity: 0.5 is not allowed: expected <= 0.2"),
        ({"fluid.reynolds": 1e9}, "fluid.reynolds: relaxation time tau"),
        ({"fluid.viscosity": 0.1}, "give exactly one of fluid.reynolds, fluid.viscosity and "
                                   "fluid.physical.viscosity"),
        ({"run.steps": 1.5}, "run.steps: 1.5 is not allowed: expected an integer >= 0"),
        ({"run.tolerance": float("nan")}, "run.tolerance: nan is not allowed"),
        ({"outptu.dir": "x"}, "outptu: unknown key; did you mean 'output'?"),
        ({"physics": "plasma"}, "physics: 'plasma' is not allowed: expected one of 'fluid', 'md'"),
    ],
)
def test_errors_name_key_value_and_allowed(override, expected):
    with pytest.raises(CaseError) as info:
        load_case(CAVITY, override)
    msg = str(info.value)
    assert expected in msg
    assert "\n" not in msg and msg.startswith(str(CAVITY))


SHAPE_ALLOWED = "expected 2 entries [nx, ny] (D2Q9) or 3 entries [nx, ny, nz] (D3Q19)"


@pytest.mark.parametrize(
    "case_file, override, expected",
    [
        (CAVITY, {"domain.shape": [4, 4, 4, 4]}, f"domain.shape: [4, 4, 4, 4] is not allowed: "
                                                 f"{SHAPE_ALLOWED}"),
        (CAVITY, {"domain.shape": [16]}, f"domain.shape: [16] is not allowed: {SHAPE_ALLOWED}"),
        (CAVITY, {"domain.shape": 16}, f"domain.shape: 16 is not allowed: {SHAPE_ALLOWED}"),
        (CAVITY, {"domain.shape": [16, 1]},
         "domain.shape[1]: 1 is not allowed: expected an integer >= 2 and <= 1048576"),
        (CAVITY, {"fluid.body_force": [0, 0, 0, 0]},
         "expected 2 numbers [fx, fy] for a 2D grid or 3 numbers [fx, fy, fz] for a 3D grid"),
        (CAVITY, {"decomposition.weights": []},
         "decomposition.weights: [] is not allowed: expected a list of at least 1 number "
         "(each > 0), or null"),
        (CAVITY, {"run.devices": [0, 0]},
         "expected a list of at least 1 integer (each >= 0, no repeats), or null"),
        (LJ_TINY, {"md.lattice.cells": [4, 4]},
         "md.lattice.cells: [4, 4] is not allowed: expected a list of 3 integers (each >= 1)"),
        (LJ_TINY, {"md.box": [4, 4]},
         "md.box: [4, 4] is not allowed: expected a list of 3 numbers (each > 0), or null"),
    ],
)
def test_array_errors_say_how_many_entries_are_allowed(case_file, override, expected):
    with pytest.raises(CaseError) as info:
        load_case(case_file, override)
    assert expected in str(info.value)
    assert "at least 2 items" not in str(info.value)


def test_solver_does_not_repeat_the_case_warnings():
    """The case checks warn; building the solver from the checked case says nothing more."""
    from simsplit import Simulation
    from simsplit.errors import CaseWarning

    with pytest.warns(CaseWarning, match="fluid.reynolds: relaxation time tau = 0.50384"):
        case = load_case(CAVITY, {"fluid.reynolds": 5000, "domain.shape": [64, 64],
                                  "run.backend": "cpu"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Simulation(case)  # validates the case again (one warning), then sets up the solver
    stability = [w for w in caught if "stability limit" in str(w.message)]
    assert len(stability) == 1 and stability[0].category is CaseWarning


def test_missing_file_and_bad_yaml(tmp_path: Path):
    with pytest.raises(CaseError, match="not found"):
        load_case(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("physics: fluid\nfluid: {reynolds: 100\n")
    with pytest.raises(CaseError, match=r"invalid YAML at line \d+"):
        load_case(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(CaseError, match="expected a mapping"):
        load_case(empty)


def test_bad_override_syntax():
    with pytest.raises(CaseError, match="expected KEY=VALUE"):
        load_case(CAVITY, ["fluid.reynolds"])
    with pytest.raises(CaseError, match="not a section"):
        apply_overrides({"fluid": 3}, {"fluid.reynolds": 1})


# --- property-based: random corruption of a valid case never escapes as anything but CaseError
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(-5, 300), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
_KEYS = [
    "physics",
    "fluid",
    "fluid.reynolds",
    "fluid.lid_velocity",
    "fluid.collision",
    "fluid.body_force",
    "fluid.trt_magic",
    "domain",
    "domain.shape",
    "domain.boundaries",
    "domain.boundaries.x",
    "domain.boundaries.lid",
    "decomposition.subdomains",
    "decomposition.weights",
    "run.steps",
    "run.tolerance",
    "run.backend",
    "run.precision",
    "output.dir",
    "output.every",
    "extra",
    "fluid.extra",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES), min_size=1, max_size=3))
def test_random_bad_cases_give_one_line_case_error(edits):
    base = yaml.safe_load(CAVITY.read_text())
    try:
        case = apply_overrides(base, dict(edits))
    except CaseError as exc:
        assert "\n" not in str(exc)
        return
    try:
        validate_case(copy.deepcopy(case))
    except CaseError as exc:
        assert "\n" not in str(exc) and str(exc)


def test_fluid_case_helper_is_valid():
    validate_case(fluid_case())


def test_readme_schema_table_matches_the_schema():
    """The README's case-file table is generated; regenerate it with
    ``python -m simsplit.case.doc --update README.md`` after a schema change."""
    from simsplit.case.doc import END, START, markdown

    text = (ROOT / "README.md").read_text()
    table = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert table == markdown().strip()


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    # YAML 1.1 (plain PyYAML) reads 1e3 as a string; the case loader reads it as YAML 1.2 does
    path = tmp_path / "case.yaml"
    path.write_text(CAVITY.read_text().replace("reynolds: 100", "reynolds: 1e2"))
    assert "reynolds: 1e2" in path.read_text()
    case = load_case(path, ["run.tolerance=1E-9", "fluid.lid_velocity=5e-2"])
    assert case["fluid"]["reynolds"] == 100.0 and case["run"]["tolerance"] == 1e-9
    assert case["fluid"]["lid_velocity"] == 0.05
    with pytest.raises(CaseError, match="fluid.reynolds: 'e5' is not allowed"):
        load_case(path, ["fluid.reynolds=e5"])


def test_lid_corner_pressure_refused_on_large_grids_at_low_reynolds():
    # Re 100 on 768^2: nu = 0.768, nu U = 0.077; such a run empties the lid's corner cells
    with pytest.raises(CaseError, match=r"fluid.reynolds: lid velocity x viscosity = 0.0768 .*"
                                        r"lower fluid.lid_velocity"):
        load_case(CAVITY, ["domain.shape=[768, 768]"])
    with pytest.warns(UserWarning, match="density dip of about 0.36"):
        load_case(CAVITY, ["domain.shape=[512, 512]"])
    load_case(CAVITY, ["domain.shape=[768, 768]", "fluid.lid_velocity=0.05"])  # nu U = 0.0192


def test_boolean_choices_are_named_as_yaml_writes_them():
    with pytest.raises(CaseError, match=r"run.timing: 'maybe' is not allowed: expected one of "
                                        r"false, true, 'device'"):
        load_case(CAVITY, ["run.timing=maybe"])


def test_unprintable_key_is_quoted_on_one_line() -> None:
    """Found by the fuzz test: a key holding a newline made a two-line error."""
    case = yaml.safe_load(CAVITY.read_text())
    case["fluid"]["\n"] = 0
    with pytest.raises(CaseError) as exc:
        validate_case(case)
    assert "\n" not in str(exc.value) and "fluid.'\\n': unknown key" in str(exc.value)
