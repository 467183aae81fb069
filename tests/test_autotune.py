"""Autotuning: picks the fastest, caches by key, survives a corrupt cache, never changes results."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from simsplit.backends.cuda_c import source
from simsplit.gpu import autotune as at
from tests.conftest import CXX

TIMES = {64: 3.0, 128: 2.0, 256: 1.0, 512: 1.5}


def _tuner(tmp_path: Path) -> at.Autotuner:
    return at.Autotuner(at.AutotuneCache(tmp_path / "autotune.json"), repeats=1)


def _timer(times: dict[int, float], calls: list[int]):
    def time_block(block: int) -> float:
        calls.append(block)
        if block not in times:
            raise RuntimeError("too many resources requested for launch")
        return times[block]

    return time_block


def test_picks_fastest_and_caches(tmp_path: Path) -> None:
    calls: list[int] = []
    t = _tuner(tmp_path)
    assert t.choose("NVIDIA H200", "k<float>", "abc", (512, 512), _timer(TIMES, calls), 128) == 256
    assert sorted(calls) == [64, 128, 256, 512]
    r = t.results[-1]
    assert not r.cached and r.speedup == pytest.approx(2.0)
    # a new process: answered from the file, nothing timed
    calls.clear()
    t2 = _tuner(tmp_path)
    assert t2.choose("NVIDIA H200", "k<float>", "abc", (512, 512), _timer(TIMES, calls), 128) == 256
    assert calls == [] and t2.results[-1].cached
    table = at.format_table(t2.results)
    assert "k<float>" in table and "512x512" in table and "cache" in table


@pytest.mark.parametrize("change", ["model", "hash", "shape", "kernel"])
def test_key_parts_each_force_a_new_tuning(tmp_path: Path, change: str) -> None:
    base = dict(gpu="NVIDIA H200", kernel="k", src_hash="v1", shape=(64, 64))
    _tuner(tmp_path).choose(**base, time_block=_timer(TIMES, []), default=128)
    new = dict(base, **{"model": {"gpu": "NVIDIA L4"}, "hash": {"src_hash": "v2"},
                        "shape": {"shape": (64, 128)}, "kernel": {"kernel": "k2"}}[change])
    calls: list[int] = []
    faster_64 = {64: 0.5, 128: 1.0, 256: 1.0, 512: 1.0}
    assert _tuner(tmp_path).choose(**new, time_block=_timer(faster_64, calls), default=128) == 64
    assert calls  # timed afresh
    entries = json.loads((tmp_path / "autotune.json").read_text())["entries"]
    assert len(entries) == 2


def test_source_hash_follows_source() -> None:
    assert at.source_hash("a") != at.source_hash("b") and len(at.source_hash("a")) == 16


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"version": 99, "entries": {}}',
                                     '{"version": 1, "entries": {"x": {"block": "big"}}}'])
def test_corrupt_cache_is_tolerated(tmp_path: Path, content: str) -> None:
    (tmp_path / "autotune.json").write_text(content)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a warning is expected for most of these
        cache = at.AutotuneCache(tmp_path / "autotune.json")
    assert cache.entries == {}
    t = at.Autotuner(cache, repeats=1)
    assert t.choose("g", "k", "h", (8, 8), _timer(TIMES, []), 128) == 256
    assert json.loads((tmp_path / "autotune.json").read_text())["version"] == at.CACHE_VERSION


def test_failing_candidates_skipped_ties_prefer_default(tmp_path: Path) -> None:
    t = _tuner(tmp_path)
    assert t.choose("g", "k", "h", (8, 8), _timer({64: 1.0, 128: 1.0}, []), 128) == 128
    assert t.choose("g", "k", "h", (9, 9), _timer({}, []), 128) == 128  # nothing ran: default


def test_cache_dir_env(tmp_path: Path) -> None:
    assert at.cache_dir({at.CACHE_ENV: str(tmp_path)}) == tmp_path
    assert at.cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/simsplit")
    assert at.cache_dir({}).parts[-2:] == (".cache", "simsplit")


def test_variant_source_sets_block_size() -> None:
    src = source.variant_source("d2q9.cu", 512)
    assert "#define SIMSPLIT_BLOCK_X 512" in src and "#define SIMSPLIT_BLOCK_X 128" not in src


# --- bitwise identity across block sizes: the CUDA C source run as host C++ -------------------
BLOCKS = (64, 128, 512)


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    import ctypes

    from tests.test_kernels_compile import _EMULATION_LAUNCHERS, _EMULATION_PRELUDE

    if CXX is None:
        pytest.skip("no host C++ compiler")
    tmp = tmp_path_factory.mktemp("variants")
    procs = {}
    for b in BLOCKS:  # built in parallel: CI has two cores
        (tmp / f"emu{b}.cpp").write_text(_EMULATION_PRELUDE + source.variant_source("d2q9.cu", b)
                                         + _EMULATION_LAUNCHERS)
        procs[b] = subprocess.Popen([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC",
                                     "-shared", "-o", str(tmp / f"emu{b}.so"),
                                     str(tmp / f"emu{b}.cpp")], stderr=subprocess.PIPE, text=True)
    for p in procs.values():
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    return {b: ctypes.CDLL(str(tmp / f"emu{b}.so")) for b in BLOCKS}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_block_size_never_changes_results(variants, dtype) -> None:
    """Every block size gives the same populations and fields, bit for bit (nx = 150 leaves a
    partial block for each size)."""
    from simsplit.numerics.lbm_params import D2Q9Params
    from tests.test_kernels_compile import _emulated_collide

    nx, ny = 150, 9
    rng = np.random.default_rng(3)
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)[:, None, None]
    f_src = (w * (1 + 0.05 * rng.standard_normal((9, ny + 2, nx + 2)))).astype(dtype)
    flags = np.zeros((ny + 2, nx + 2), np.uint8)
    flags[0, :] = flags[-1, :] = flags[:, 0] = flags[:, -1] = 1
    params = D2Q9Params(1 / 0.7, 1 / 1.1, 0.07, 3e-5, -2e-5, False)
    results = {}
    for b, lib in variants.items():
        dst = np.zeros_like(f_src)
        macro = [np.zeros((ny, nx), dtype) for _ in range(3)]
        _emulated_collide(lib, dtype, f_src, dst, flags, macro, (1, ny + 1), params, True, 4)
        results[b] = (dst, *macro)
    ref = results[at.CANDIDATES[1]]
    assert np.isfinite(ref[0][:, 1:-1, 1:-1]).all()
    for b in BLOCKS:
        for got, want in zip(results[b], ref, strict=True):
            assert got.tobytes() == want.tobytes(), b


def test_d3q19_block_variant_matches_cpu(tmp_path_factory) -> None:
    """The D3Q19 source the tuner compiles for another block size (128 threads, so 10 blocks
    per SM asked of the register allocator) still equals the CPU kernel bit for bit."""
    import ctypes

    from tests.test_kernels_compile import (
        _EMULATION_LAUNCHERS_3D,
        _EMULATION_PRELUDE,
        _check_d3q19_against_cpu,
    )

    if CXX is None:
        pytest.skip("no host C++ compiler")
    code = source.variant_source("d3q19.cu", 128)
    assert "#define SIMSPLIT_BLOCK_X 128" in code
    tmp = tmp_path_factory.mktemp("variant3d")
    (tmp / "emu3.cpp").write_text(_EMULATION_PRELUDE
                                  + code + _EMULATION_LAUNCHERS_3D)
    build = subprocess.run([CXX, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared",
                            "-o", str(tmp / "emu3.so"), str(tmp / "emu3.cpp")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    lib = ctypes.CDLL(str(tmp / "emu3.so"))
    _check_d3q19_against_cpu(lib, "float32", "float16", periodic=False, padded=True, nx=150)


@pytest.mark.gpu
def test_d3q19_autotune_on_gpu_keeps_bits(tmp_path: Path) -> None:
    """cupy, D3Q19 16-bit storage: the kernels tuned to another block size give the untuned
    run's velocities bit for bit, and the tuner reports them. e4m11, whose every step takes
    the tuned one-cell kernel: fp16 takes the two-cell kernel at its measured launch, which is
    not tuned, and float32 two steps per sweep."""
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA GPU")
    except Exception:
        pytest.skip("no CUDA GPU")
    import simsplit
    from tests.conftest import ROOT

    overrides = {"domain.shape": [70, 33, 20], "run.backend": "cupy",
                 "run.precision": "float32", "run.storage": "e4m11", "run.tolerance": 0,
                 "run.steps": 40, "output.dir": None}
    plain = simsplit.Simulation(simsplit.load_case(ROOT / "cases/cavity3d.yaml",
                                                   overrides=overrides))
    plain.run(output=False)
    tuned = simsplit.Simulation(simsplit.load_case(ROOT / "cases/cavity3d.yaml",
                                                   overrides=overrides))
    tuner = at.Autotuner(at.AutotuneCache(tmp_path / "autotune.json"), candidates=(64,),
                         repeats=1)
    results = at.tune_solver(tuned.solver, tuner)
    assert results and {r.block for r in results} == {64}  # 16-bit default: 128
    assert any("d3q19_stream_collide" in r.kernel for r in results)
    tuned.run(output=False)
    assert np.array_equal(tuned.velocity(), plain.velocity())
