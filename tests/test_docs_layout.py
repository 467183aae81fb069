"""docs/ holds guides only; benchmark logs live in benchmarks/logs/ and every citation of one
names a file that is there."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT

GUIDE_SUFFIXES = {".md"}
LOG_REFERENCE = re.compile(r"(?:benchmarks/logs|docs)/([A-Za-z0-9_.-]+\.(?:log|png))")


def _tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return out.stdout.split()


def test_docs_holds_guides_only() -> None:
    docs = [p for p in (ROOT / "docs").rglob("*") if p.is_file()]
    stray = [str(p.relative_to(ROOT)) for p in docs if p.suffix not in GUIDE_SUFFIXES]
    assert not stray, f"measurement files belong in benchmarks/logs/: {stray}"


def test_every_cited_log_exists_in_benchmarks_logs() -> None:
    cited: dict[str, set[str]] = {}
    for name in _tracked_files():
        path = ROOT / name
        if not path.is_file() or path.suffix in (".log", ".png", ".h5", ".csv"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in LOG_REFERENCE.finditer(text):
            cited.setdefault(match.group(0), set()).add(name)
    assert cited, "no log citations found: the pattern no longer matches"
    stale = {ref: sorted(where) for ref, where in cited.items()
             if not ref.startswith("benchmarks/logs/") or not (ROOT / ref).is_file()}
    assert not stale, f"citations of logs that are not in benchmarks/logs/: {stale}"
