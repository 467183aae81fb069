"""``simsplit warmup``: after it, runs of the shipped cases load every CPU kernel from Numba's
cache (nothing compiles, no compile notice); a read-only install caches in the user's folder.

Each test runs in child processes with a Numba cache folder of its own, so it neither uses nor
fills the cache of the checkout. The cache is warmed for float64 only (``--precision``): float32
runs the same code with another dtype, and warming both doubled the slowest setup in CI (3.5 min
on two cores).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simsplit.cli.notices import COMPILE_NOTICE
from tests.conftest import ROOT

CASES = ROOT / "cases"


def _child(args: list[str], cwd: Path, env: dict[str, str],
           timeout: float = 900) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str]:
    """A Numba cache folder filled by ``python -m simsplit warmup --precision float64``:
    (environment, output)."""
    cache = tmp_path_factory.mktemp("numba-cache")
    env = _env(NUMBA_CACHE_DIR=str(cache))
    res = _child(["-m", "simsplit", "warmup", "--precision", "float64"], cache, env)
    return env, res.stdout


def test_warmup_compiles_and_says_where(warm: tuple[dict[str, str], str]) -> None:
    env, out = warm
    lines = out.splitlines()
    total = re.fullmatch(r"(\d+) kernel variants compiled in [\d.]+ s and cached in (\S+)",
                         lines[-1])
    assert total, out
    assert Path(total[2]).parent == Path(env["NUMBA_CACHE_DIR"]), out
    assert list(Path(total[2]).glob("*.nbi")), total[2]
    rows = 0
    for label in ("D2Q9 fluid", "D2Q9 fluid, one step per sweep", "D2Q9 forced channel",
                  "D3Q19 fluid", "LJ MD"):
        (row,) = [line for line in lines if line.startswith(f"{label} ")
                  and " float64 " in line]
        m = re.search(r" (\d+) compiled, +(\d+) from the cache", row)
        assert m and int(m[1]) > 0, row  # a cold cache: this case compiled something
        rows += int(m[1])
    assert rows == int(total[1]), out
    assert not [line for line in lines if " float32 " in line], out


def test_warmup_again_compiles_nothing(warm: tuple[dict[str, str], str], tmp_path: Path) -> None:
    env, _ = warm
    out = _child(["-m", "simsplit", "warmup", "--precision", "float64"], tmp_path, env).stdout
    assert out.splitlines()[-1].startswith("nothing to compile: every kernel variant was already "
                                           f"cached in {env['NUMBA_CACHE_DIR']}"), out
    assert " 0 compiled" in out and "float32" not in out.split("\n", 1)[1], out


_RUN_AND_COUNT = """
import json, sys
from simsplit.backends.cpu.jit_cache import cache_counts
from simsplit.case import load_case
from simsplit.run.simulation import Simulation

counts = {}
for spec in json.loads(sys.argv[1]):
    name, *overrides = spec
    before = cache_counts()
    Simulation(load_case(name, overrides + ["run.backend=cpu", "output.dir=out/" + name])).run()
    done = cache_counts() - before
    counts[" ".join(spec)] = [done.compiled, done.loaded]
print(json.dumps(counts))
"""


def test_shipped_cases_after_warmup_compile_nothing(warm: tuple[dict[str, str], str],
                                                    tmp_path: Path) -> None:
    """Every shipped case (shortened, with its output written), in the warmed precision, finds
    all its kernels in the cache: Numba's own hit and miss counters, in one process."""
    env, _ = warm
    for name in ("cavity.yaml", "cavity3d.yaml", "channel.yaml", "lj_tiny.yaml"):
        shutil.copy(CASES / name, tmp_path / name)
    p = "run.precision=float64"
    specs = [["cavity.yaml", p, "run.steps=600"],  # 600: the steady-state check runs too
             ["cavity3d.yaml", p, "run.steps=12", "domain.shape=[16,16,16]"],
             ["channel.yaml", p, "run.steps=600"],
             ["lj_tiny.yaml", p, "run.steps=200"]]  # neighbour rebuilds and migration
    res = _child(["-c", _RUN_AND_COUNT, json.dumps(specs)], tmp_path, env)
    counts = json.loads(res.stdout.splitlines()[-1])
    assert len(counts) == len(specs)
    assert all(compiled == 0 for compiled, _ in counts.values()), counts
    # the first run of each kind loads its kernels (later ones find them in the process)
    assert all(counts[" ".join(specs[k])][1] > 0 for k in (0, 1, 3)), counts


def test_run_after_warmup_has_no_compile_notice(warm: tuple[dict[str, str], str],
                                                tmp_path: Path) -> None:
    env, _ = warm
    res = _child(["-m", "simsplit", "run", str(CASES / "cavity.yaml"), "--steps", "20",
                  "--output", "out"], tmp_path, env)
    assert "steps        20" in res.stdout
    assert COMPILE_NOTICE not in res.stderr, res.stderr


def test_read_only_install_caches_in_the_user_folder(tmp_path: Path) -> None:
    """Where the package's folders cannot take a cache (a read-only site-packages; here a
    file stands where ``__pycache__`` would go, which stops root too) and no NUMBA_CACHE_DIR
    is set, Numba caches in the user's folder: the second run loads from it."""
    package = tmp_path / "site" / "simsplit"
    shutil.copytree(ROOT / "simsplit", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "backends" / "cpu" / "__pycache__").write_text("not a folder")
    user_cache = tmp_path / "xdg-cache"
    env = _env(XDG_CACHE_HOME=str(user_cache), HOME=str(tmp_path / "home"))
    env["PYTHONPATH"] = str(tmp_path / "site")
    probe = _child(["-c", "import simsplit, simsplit.run.warmup as w; "
                          "print(simsplit.__file__); print(*w.cache_directories())"],
                   tmp_path, env).stdout.split()
    assert probe[0] == str(package / "__init__.py")
    assert Path(probe[1]).parent == user_cache / "numba", probe
    args = ["-m", "simsplit", "run", str(CASES / "cavity.yaml"), "--steps", "2", "--subdomains",
            "1", "--set", "domain.shape=[16,16]", "--backend", "cpu", "--overwrite"]
    cold = _child(args, tmp_path, env)
    assert COMPILE_NOTICE in cold.stderr, cold.stderr
    assert list(Path(probe[1]).glob("d2q9._stream_collide*.nbi")), probe[1]
    warm = _child(args, tmp_path, env)
    assert COMPILE_NOTICE not in warm.stderr, warm.stderr
