"""``run.json``: what ran, where, how long, and whether it finished.

Written when a run starts (status ``running``) and rewritten atomically at the end
(``completed``, ``diverged``, ``interrupted`` or ``failed``), so a reader can always tell a
finished output directory from an abandoned one.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from simsplit.version import __version__

NAME = "run.json"


class OutputExists(RuntimeError):
    """The output directory holds an earlier run's results."""


def check_output_dir(directory: Path, overwrite: bool, restart: bool) -> None:
    """Refuse to write over an earlier run unless asked to (a restart continues it)."""
    directory = Path(directory)
    if overwrite or restart or not directory.exists():
        return
    if directory.is_file():
        raise OutputExists(f"output.dir: '{directory}' is a file, expected a directory")
    if (directory / NAME).exists() or any(directory.iterdir()):
        raise OutputExists(
            f"output.dir: '{directory}' already holds a run's output; pass --overwrite to "
            "replace it, --restart auto to continue it, or choose another --output")


#: what a run writes into its output directory (cleared by --overwrite; nothing else is touched)
OUTPUTS = ("run.json", "case.yaml", "fields.h5", "fields.xmf", "velocity.png", "timing.json",
           "trajectory.h5md", "thermo.csv", "thermo.png")


def clear_output(directory: Path) -> None:
    """Remove an earlier run's results (only the files simsplit writes)."""
    import shutil

    directory = Path(directory)
    for name in OUTPUTS:
        (directory / name).unlink(missing_ok=True)
    shutil.rmtree(directory / "checkpoints", ignore_errors=True)


class Manifest:
    """The run.json of one run, kept in memory and rewritten on each update."""

    def __init__(self, directory: Path, case: dict[str, Any], info: dict[str, Any]) -> None:
        self.path = Path(directory) / NAME
        self.data: dict[str, Any] = {
            "simsplit_version": __version__,
            "status": "running",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": platform.node(),
            "python": platform.python_version(),
            "case": case,
            **info,
        }

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        os.replace(tmp, self.path)
