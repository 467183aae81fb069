"""The container recipe: pinned CUDA base, pip without cache, non-root user, exec entrypoint."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_base_image_pinned_cuda_runtime() -> None:
    froms = [a for i, a in _instructions() if i == "FROM"]
    assert len(froms) == 1
    m = re.fullmatch(r"nvidia/cuda:(\d+\.\d+\.\d+)-(runtime|devel|base)-ubuntu(\d+\.\d+)", froms[0])
    assert m, froms[0]
    assert "latest" not in froms[0]


def test_pip_without_cache_installs_gpu_extra() -> None:
    runs = [a for i, a in _instructions() if i == "RUN"]
    pips = [r for r in runs if re.search(r"\bpip3? install\b", r)]
    assert pips and all("--no-cache-dir" in r for r in pips)
    args = dict(a.split("=", 1) for i, a in _instructions() if i == "ARG" and "=" in a)
    assert "gpu" in args.get("EXTRAS", "")
    assert any("${EXTRAS}" in r for r in pips)
    assert all("rm -rf /var/lib/apt/lists" in r for r in runs if "apt-get install" in r)


def test_non_root_and_exec_entrypoint() -> None:
    ins = _instructions()
    users = [a for i, a in ins if i == "USER"]
    assert users and users[-1] not in ("root", "0")
    (entry,) = [a for i, a in ins if i == "ENTRYPOINT"]
    assert json.loads(entry) == ["simsplit"]  # exec form: signals reach simsplit
    last_user = max(k for k, (i, _) in enumerate(ins) if i == "USER")
    assert last_user < max(k for k, (i, _) in enumerate(ins) if i == "ENTRYPOINT")


def test_copies_only_what_the_package_needs() -> None:
    sources = []
    for i, a in _instructions():
        if i == "COPY":
            parts = [p for p in a.split() if not p.startswith("--")]
            sources += parts[:-1]
    assert set(sources) <= {"pyproject.toml", "setup.py", "README.md", "simsplit", "kernels",
                            "cases"}
    assert "." not in sources
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore and "*" in ignore  # everything else stays out of the build context
    for src in sources:
        assert (ROOT / src).exists(), src


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint is not installed")
def test_hadolint() -> None:
    res = subprocess.run(["hadolint", "--ignore", "DL3008", str(DOCKERFILE)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_warms_the_kernel_cache_as_the_user_that_runs() -> None:
    """``simsplit warmup`` at build time, after the last USER: run as root, it would fill the
    package's own ``__pycache__``, which the runtime user cannot write to, so Numba would
    look in that user's own cache instead and compile again."""
    ins = _instructions()
    last_user = max(k for k, (i, _) in enumerate(ins) if i == "USER")
    warmups = [k for k, (i, a) in enumerate(ins)
               if i == "RUN" and re.search(r"\bsimsplit warmup\b", a)]
    assert warmups and min(warmups) > last_user, ins
