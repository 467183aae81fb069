"""The command line: a real run writes its files; bad input gives one line and exit code 2."""

from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.conftest import ROOT

CAVITY = str(ROOT / "cases" / "cavity.yaml")


def test_run_writes_hdf5_xdmf_png(run_cli, tmp_path: Path):
    res = run_cli(
        "run",
        CAVITY,
        "--set",
        "domain.shape=[48, 48]",
        "--steps",
        "600",
        "--output",
        "out",
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out"
    for name in ("fields.h5", "fields.xmf", "velocity.png", "case.yaml"):
        assert (out / name).stat().st_size > 0, name
    assert "steps        600" in res.stdout
    with h5py.File(out / "fields.h5") as f:
        assert f.attrs["simsplit_version"]
    from simsplit.io.fields import read_snapshot

    snap = read_snapshot(out / "fields.h5")
    assert snap["step"] == 600
    fields = snap["fields"]
    assert fields["velocity"].shape == (48, 48, 2) and np.isfinite(fields["density"]).all()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["run", "missing.yaml"], "not found"),
        (["run", CAVITY, "--set", "fluid.reynolds=-1"], "fluid.reynolds: -1 is not allowed"),
        (["run", CAVITY, "--set", "fluid.reynolds"], "expected KEY=VALUE"),
        (["run", CAVITY, "--subdomains", "500"], "too small to split"),
        (["run", CAVITY, "--backend", "fortran"], "run.backend: 'fortran' is not allowed"),
        (["validate", CAVITY, "--set", "domian.shape=[4,4]"], "did you mean 'domain'?"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(run_cli, tmp_path: Path, args, expected):
    res = run_cli(*args, "--output", "out") if args[0] == "run" else run_cli(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simsplit: error: "), res.stderr
    assert expected in lines[0]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_validate_ok_and_help(run_cli):
    res = run_cli("validate", CAVITY)
    assert res.returncode == 0 and "valid fluid case" in res.stdout
    helped = run_cli("run", "--help")
    assert helped.returncode == 0 and "examples:" in helped.stdout


def test_memory_preflight_refuses_a_grid_too_large(run_cli, tmp_path: Path):
    """200,000^2 cells need ~5.8 TB in float64: refused with numbers before any allocation."""
    res = run_cli("run", CAVITY, "--set", "domain.shape=[200000, 200000]", "--backend", "cpu",
                  "--set", "fluid.reynolds=1e6", "--output", "out", timeout=120)
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert "GiB of host memory" in line and "available" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["run", CAVITY, "--monitor", "-1"],
                                  ["run", CAVITY, "--devices", "a,b"],
                                  ["run", CAVITY, "--no-such-flag"], ["frobnicate"]])
def test_bad_command_line_is_one_line_exit_2(run_cli, tmp_path: Path, args):
    res = run_cli(*args, "--output", "out") if args[0] == "run" else run_cli(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0], res.stderr
    assert not (tmp_path / "out").exists()
