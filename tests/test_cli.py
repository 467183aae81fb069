"""The command line: a real run writes its files; bad input gives one line and exit code 2;
warnings and notices are one clean line each."""

import os
import subprocess
import sys
import warnings
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
        (["run", CAVITY, "--set", "domain.shape=[4,4,4,4]"],
         "domain.shape: [4, 4, 4, 4] is not allowed: expected 2 entries [nx, ny] (D2Q9) or "
         "3 entries [nx, ny, nz] (D3Q19)"),
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


@pytest.mark.parametrize(
    "var, value, case, expected",
    [
        ("SIMSPLIT_CPU_NEQ_PLANES", "abc", CAVITY, "SIMSPLIT_CPU_NEQ_PLANES='abc': expected"),
        ("SIMSPLIT_MD_TRANSFER", "fast", str(ROOT / "cases" / "lj_tiny.yaml"),
         "SIMSPLIT_MD_TRANSFER='fast': expected one of"),
    ],
)
def test_bad_tuning_variable_one_line_exit_2_nothing_written(run_cli, tmp_path: Path,
                                                              monkeypatch, var, value, case,
                                                              expected):
    monkeypatch.setenv(var, value)
    res = run_cli("run", case, "--set", "run.backend=cpu", "--output", "out")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simsplit: error: "), res.stderr
    assert expected in lines[0]
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


def test_version_prints_and_exits_0(run_cli, capsys):
    from simsplit.cli.commands import main
    from simsplit.version import __version__

    res = run_cli("--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"simsplit {__version__}"
    with pytest.raises(SystemExit) as stop:  # the console script's parser: the same one
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"simsplit {__version__}"


def test_stability_warning_prints_once_as_one_clean_line(run_cli):
    """The case is validated by the loader and again by Simulation, and the solver sets it up
    once more: one warning line, no Python source line after it."""
    res = run_cli("run", CAVITY, "--set", "fluid.reynolds=5000", "--set", "domain.shape=[64,64]",
                  "--steps", "10", "--quiet")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("simsplit: warning: fluid.reynolds: relaxation time tau = 0.50384")
    assert "close to the stability limit" in lines[0]


def test_warnings_once_each_and_case_warnings_from_rank_0_only(capsys):
    from simsplit.cli.notices import print_warnings_once
    from simsplit.errors import CaseWarning

    saved = warnings.showwarning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            print_warnings_once()
            for text in ("tau is small", "tau is small", "NCCL not found"):
                warnings.warn(text, stacklevel=1)
            print_warnings_once(rank=1)
            warnings.warn(CaseWarning("tau is small"), stacklevel=1)
            warnings.warn("GPUs shared", stacklevel=1)
    finally:
        warnings.showwarning = saved
    assert capsys.readouterr().err.splitlines() == [
        "simsplit: warning: tau is small", "simsplit: warning: NCCL not found",
        "simsplit: warning: GPUs shared"]


def _run_with_numba_cache(cache_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(cache_dir))
    return subprocess.run([sys.executable, "-m", "simsplit", "run", *args, "--overwrite"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("case, extra", [
    (CAVITY, ["--set", "domain.shape=[16,16]", "--subdomains", "1"]),
    (str(ROOT / "cases" / "lj_tiny.yaml"), []),
])
def test_compile_notice_only_when_numba_compiles(tmp_path: Path, case, extra):
    """An empty Numba cache compiles the CPU kernels: one notice line; the next run loads
    them from the cache and says nothing; --quiet says nothing either."""
    from simsplit.cli.notices import COMPILE_NOTICE

    cold = _run_with_numba_cache(tmp_path / "cache", tmp_path, case, *extra, "--steps", "2",
                                 "--backend", "cpu")
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr.count(COMPILE_NOTICE) == 1, cold.stderr
    warm = _run_with_numba_cache(tmp_path / "cache", tmp_path, case, *extra, "--steps", "2",
                                 "--backend", "cpu")
    assert warm.returncode == 0 and COMPILE_NOTICE not in warm.stderr, warm.stderr
    quiet = _run_with_numba_cache(tmp_path / "cold-again", tmp_path, case, *extra, "--steps",
                                  "2", "--backend", "cpu", "--quiet")
    assert quiet.returncode == 0 and COMPILE_NOTICE not in quiet.stderr, quiet.stderr


def _xdmf_times(directory: Path) -> list[float]:
    import xml.etree.ElementTree as ET

    series = ET.parse(directory / "fields.xmf").getroot().find("Domain/Grid")
    return [float(grid.find("Time").get("Value")) for grid in series.findall("Grid")]


def test_snapshots_start_at_step_0_with_time_in_lid_units_and_survive_a_restart(run_cli,
                                                                                 tmp_path: Path):
    """output.every > 0: the series starts at t = 0; a snapshot's time is step x U / nx (the
    cavity's L / U with L = nx cells), named in the file; a restart appends, no step twice."""
    from simsplit.io.fields import list_snapshots, read_snapshot

    common = ["run", CAVITY, "--set", "domain.shape=[48, 48]", "--set", "run.tolerance=0",
              "--set", "output.every=100", "--set", "output.checkpoint_every=100",
              "--set", "output.plots=false", "--output", "out", "--quiet"]
    first = run_cli(*common, "--steps", "300")
    assert first.returncode == 0, first.stderr
    again = run_cli(*common, "--steps", "500", "--restart", "auto")
    assert again.returncode == 0, again.stderr
    out = tmp_path / "out"
    steps = [0, 100, 200, 300, 400, 500]
    assert list_snapshots(out) == [(n, n * 0.1 / 48) for n in steps]
    assert _xdmf_times(out) == [n * 0.1 / 48 for n in steps]
    attrs = read_snapshot(out, 0)["attrs"]
    assert attrs["time_unit"].startswith("L / U") and attrs["velocity_unit"] == "lid speed U"
    assert np.all(read_snapshot(out, 0)["fields"]["velocity"] == 0.0)  # the fluid at rest


def test_channel_case_reaches_the_parabola(run_cli, tmp_path: Path):
    """cases/channel.yaml runs to steady state; the summary gives its error against the
    analytic profile, profile.png plots it, and times are lattice time steps."""
    import re

    from simsplit.io.fields import read_snapshot

    res = run_cli("run", str(ROOT / "cases" / "channel.yaml"), "--output", "out", "--quiet",
                  "--backend", "cpu")
    assert res.returncode == 0, res.stderr
    assert "steady state" in res.stdout, res.stdout
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("Poiseuille"))
    assert "u_x(y) against g / (2 nu) y (H - y)" in line
    error = float(re.search(r"L2 error ([0-9.e+-]+);", line).group(1))
    assert error < 1e-8, line
    out = tmp_path / "out"
    assert (out / "profile.png").stat().st_size > 0 and not (out / "velocity.png").exists()
    snap = read_snapshot(out)
    assert snap["time"] == float(snap["step"])
    assert snap["attrs"]["time_unit"] == "lattice time steps (t = step)"
