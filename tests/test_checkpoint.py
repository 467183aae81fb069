"""Checkpoint/restart: killed runs resume bit for bit, on any split; damage is detected."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from simsplit import Simulation, load_case
from simsplit.io.fields import read_snapshot
from simsplit.run.checkpoint import list_checkpoints
from tests.conftest import ROOT

CAVITY = ROOT / "cases" / "cavity.yaml"
STEPS = 6000
COMMON = ["--set", "domain.shape=[48, 48]", "--set", "run.tolerance=0",
          "--set", "output.checkpoint_every=250", "--set", "output.plots=false", "--quiet"]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")


def _cmd(out: Path, subdomains: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "simsplit", "run", str(CAVITY), *COMMON, "--output", str(out),
            "--subdomains", str(subdomains), "--steps", str(STEPS), *extra]


def _final_velocity(out: Path) -> np.ndarray:
    snap = read_snapshot(out / "fields.h5")
    assert snap["step"] == STEPS
    return snap["fields"]["velocity"]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    case = load_case(CAVITY, {"domain.shape": [48, 48], "run.tolerance": 0, "run.steps": STEPS,
                              "run.backend": "cpu"})
    sim = Simulation(case)
    sim.run(output=False)
    return sim.velocity()


def _kill_at_random_step(cmd: list[str], ckpt_dir: Path, rng: random.Random) -> None:
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not list_checkpoints(ckpt_dir) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.6))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.parametrize("subdomains, restart_on", [(1, 1), (2, 2), (2, 3)])
def test_sigkill_then_restart_is_bitwise_identical(tmp_path, reference, subdomains, restart_on):
    rng = random.Random(1000 + 10 * subdomains + restart_on)
    out = tmp_path / "run"
    _kill_at_random_step(_cmd(out, subdomains), out / "checkpoints", rng)
    steps_at_kill = [int(p.stem.split("_")[1]) for p in list_checkpoints(out / "checkpoints")]
    assert steps_at_kill and max(steps_at_kill) < STEPS, "the kill came too late to test anything"
    res = subprocess.run(_cmd(out, restart_on, "--restart", "auto"), env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    print(f"killed after checkpoint {max(steps_at_kill)}, resumed on {restart_on} slabs")
    assert np.array_equal(_final_velocity(out), reference)


def test_corrupt_checkpoint_falls_back(tmp_path, reference):
    out = tmp_path / "run"
    res = subprocess.run(_cmd(out, 2, "--steps", "1000"), env=_env(), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    ckpts = list_checkpoints(out / "checkpoints")
    assert len(ckpts) >= 2
    newest = ckpts[0]
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])  # truncated mid-file
    res = subprocess.run(_cmd(out, 2, "--restart", "auto"), env=_env(), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "falling back to the previous checkpoint" in res.stderr
    assert np.array_equal(_final_velocity(out), reference)


def test_flipped_byte_is_caught_by_checksum(tmp_path):
    from simsplit.run.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

    case = load_case(CAVITY)
    arr = np.arange(4096, dtype=np.float64)
    path = write_checkpoint(tmp_path, 7, case, {"x": arr})
    raw = bytearray(path.read_bytes())
    pos = raw.find(arr[1000:1001].tobytes())
    raw[pos] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="checksum"):
        read_checkpoint(path)


def test_restart_from_other_case_is_refused(tmp_path):
    out = tmp_path / "run"
    res = subprocess.run(_cmd(out, 1, "--steps", "300"), env=_env(), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    res = subprocess.run(_cmd(out, 1, "--set", "fluid.reynolds=200", "--restart", "auto"),
                         env=_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    assert "written by a different case" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_output_dir_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    first = subprocess.run(_cmd(out, 1, "--steps", "100"), env=_env(), capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run(_cmd(out, 1, "--steps", "100"), env=_env(), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    forced = subprocess.run(_cmd(out, 1, "--steps", "100", "--overwrite"), env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert forced.returncode == 0, forced.stderr
    import json

    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "completed" and manifest["steps_done"] == 100


def test_sigterm_writes_checkpoint_and_exits_143(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(_cmd(out, 2, "--steps", "10000000"), env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list_checkpoints(out / "checkpoints") and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    import json

    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "interrupted"
    last = int(list_checkpoints(out / "checkpoints")[0].stem.split("_")[1])
    assert last == manifest["steps_done"]


def test_unstable_case_diverges_with_exit_3_and_restartable_checkpoint(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "simsplit", "run", str(CAVITY), "--output", str(out), "--quiet",
           "--set", "fluid.reynolds=20000", "--set", "fluid.lid_velocity=0.2",
           "--set", "domain.shape=[64, 64]", "--set", "run.check_every=50",
           "--set", "output.checkpoint_every=100", "--steps", "20000"]
    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, res.stderr
    msg = res.stderr.strip().splitlines()[-1]
    assert "diverged at step" in msg and "subdomain" in msg and "cell (i=" in msg
    assert "--restart" in msg
    ckpts = list_checkpoints(out / "checkpoints")
    assert ckpts
    from simsplit.run.checkpoint import read_checkpoint

    attrs, arrays = read_checkpoint(ckpts[0])
    assert np.isfinite(arrays["populations"]).all()
    step = int(msg.split("diverged at step ")[1].split()[0])
    assert int(attrs["step"]) < step <= 20000


# --- molecular dynamics ------------------------------------------------------------------------
LJ_TINY = ROOT / "cases" / "lj_tiny.yaml"
MD_STEPS = 1500


def _md_cmd(out: Path, subdomains: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "simsplit", "run", str(LJ_TINY), "--output", str(out),
            "--quiet", "--subdomains", str(subdomains), "--steps", str(MD_STEPS),
            "--set", "output.checkpoint_every=100", *extra]


@pytest.fixture(scope="module")
def md_reference() -> np.ndarray:
    case = load_case(LJ_TINY, {"run.steps": MD_STEPS, "output.dir": None})
    sim = Simulation(case)
    sim.run(output=False)
    return sim.positions()


def _final_positions(out: Path) -> np.ndarray:
    from simsplit.run.checkpoint import read_checkpoint

    attrs, arrays = read_checkpoint(list_checkpoints(out / "checkpoints")[0])
    assert int(attrs["step"]) == MD_STEPS
    order = np.argsort(arrays["ids"])
    return arrays["positions"][order]


@pytest.mark.parametrize("subdomains, restart_on", [(1, 1), (2, 3)])
def test_md_sigkill_then_restart_is_bitwise_identical(tmp_path, md_reference, subdomains,
                                                      restart_on):
    rng = random.Random(7 + subdomains)
    out = tmp_path / "md"
    _kill_at_random_step(_md_cmd(out, subdomains), out / "checkpoints", rng)
    steps_at_kill = [int(p.stem.split("_")[1]) for p in list_checkpoints(out / "checkpoints")]
    assert steps_at_kill and max(steps_at_kill) < MD_STEPS, "the kill came too late"
    res = subprocess.run(_md_cmd(out, restart_on, "--restart", "auto"), env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    print(f"MD killed after checkpoint {max(steps_at_kill)}, resumed on {restart_on} slabs")
    assert np.array_equal(_final_positions(out), md_reference)


def test_md_too_large_timestep_diverges_then_restarts_smaller(tmp_path):
    out = tmp_path / "md"
    res = subprocess.run(_md_cmd(out, 2, "--set", "md.timestep=0.05"), env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, res.stderr
    msg = res.stderr.strip().splitlines()[-1]
    assert "diverged at step" in msg and "atom id" in msg and "subdomain" in msg
    assert "--restart" in msg and "md.timestep=" in msg
    ckpt = list_checkpoints(out / "checkpoints")[0]
    again = subprocess.run(_md_cmd(out, 2, "--restart", str(ckpt), "--set", "md.timestep=0.005",
                                   "--steps", "200"), env=_env(), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
