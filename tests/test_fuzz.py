"""Fuzzing the front door: 1,000+ generated bad or borderline cases through ``validate`` and
``run --steps 1``. Only exit codes 0 and 2, one line on stderr for 2, no traceback, no hang,
and nothing written for a rejected case."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simsplit.cli.commands import main

NUMBERS = st.one_of(st.integers(-3, 300), st.floats(-1, 2e4),
                    st.sampled_from([0, 0.5, 0.2, 0.2000001, 1e-9, 1e9, 0.1875, float("nan"),
                                     float("inf"), -0.0]))
ANY = st.one_of(NUMBERS, st.none(), st.booleans(), st.text(max_size=6),
                st.lists(st.integers(-2, 70), max_size=3))
SHAPES = st.one_of(st.lists(st.integers(1, 40), min_size=2, max_size=2),
                   st.sampled_from([[2, 2], [1 << 20, 1 << 20], [200000, 200000], [3, 1]]),
                   ANY)


@st.composite
def valid_cases(draw) -> dict:
    """Cases that should run, many of them at the edge of what is allowed."""
    nx, ny = draw(st.integers(2, 40)), draw(st.integers(2, 40))
    subdomains = draw(st.integers(1, max(1, ny // 2)))
    case = {
        "physics": "fluid",
        "fluid": {"reynolds": draw(st.floats(0.5, 5000)),
                  "lid_velocity": draw(st.sampled_from([0.2, 0.19999, 0.05, 1e-3, 0.1])),
                  "collision": draw(st.sampled_from(["bgk", "trt"]))},
        "domain": {"shape": [nx, ny],
                   "boundaries": {"x": draw(st.sampled_from(["wall", "periodic"])),
                                  "y": "wall", "lid": True}},
        "decomposition": {"subdomains": subdomains},
        "run": {"backend": "cpu", "precision": draw(st.sampled_from(["float32", "float64"])),
                "tolerance": draw(st.sampled_from([0, 1e-6, 0.5]))},
    }
    if draw(st.booleans()):
        case["decomposition"]["weights"] = draw(st.lists(st.floats(0.01, 100),
                                                         min_size=subdomains,
                                                         max_size=subdomains))
    return case


#: (dotted key, strategy of values) that break or stretch a valid case
MUTATIONS = [
    ("physics", st.sampled_from(["md", "gas", None, 1])),
    ("fluid.reynolds", st.one_of(NUMBERS, ANY)),
    ("fluid.viscosity", NUMBERS),
    ("fluid.lid_velocity", NUMBERS),
    ("fluid.collision", st.sampled_from(["mrt", 3, None])),
    ("fluid.body_force", st.one_of(st.lists(NUMBERS, max_size=3), ANY)),
    ("fluid.trt_magic", NUMBERS),
    ("fluid.reynold", ANY),
    ("domain.shape", SHAPES),
    ("domain.boundaries.y", st.sampled_from(["periodic", "open"])),
    ("domain.boundaries.lid", ANY),
    ("domain", ANY),
    ("decomposition.subdomains", st.one_of(st.integers(-1, 64), ANY)),
    ("decomposition.weights", st.one_of(st.lists(NUMBERS, max_size=5), ANY)),
    ("run.steps", st.one_of(st.integers(-2, 3), ANY)),
    ("run.tolerance", NUMBERS),
    ("run.backend", st.sampled_from(["gpu", "opencl", None])),
    ("run.precision", st.sampled_from(["half", "float16", 64])),
    ("run.check_every", st.one_of(st.integers(-1, 2), ANY)),
    ("output.every", st.one_of(st.integers(-1, 2), ANY)),
    ("output.checkpoint_every", st.one_of(st.integers(-1, 2), ANY)),
    ("output.stray", ANY),
    ("extra", ANY),
]


@st.composite
def cases(draw) -> dict:
    case = draw(valid_cases())
    for _ in range(draw(st.integers(0, 2))):
        key, values = draw(st.sampled_from(MUTATIONS))
        node, parts = case, key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = draw(values)
    return case


def _call(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings():
        code = main(args)
    return code, err.getvalue()


@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_generated_cases(tmp_path_factory, case):
    tmp = tmp_path_factory.mktemp("fuzz")
    path = tmp / "case.yaml"
    path.write_text(yaml.safe_dump(case))
    out = tmp / "out"
    code, err = _call(["validate", str(path), "--set", "run.steps=1", "--set",
                       f"output.dir={out}"])
    assert code in (0, 2), err
    run_code, run_err = _call(["run", str(path), "--steps", "1", "--quiet", "--output", str(out),
                               "--set", "output.plots=false"])
    assert run_code in (0, 2), run_err
    for c, e in ((code, err), (run_code, run_err)):
        if c == 2:
            lines = [ln for ln in e.splitlines() if not ln.startswith("simsplit: warning:")]
            assert len(lines) == 1 and lines[0].startswith("simsplit: error: "), e
    if run_code == 2:
        assert not out.exists(), f"rejected case wrote {sorted(Path(out).rglob('*'))}"
    assert code == 0 or run_code == 2  # what validate rejects, run rejects too
