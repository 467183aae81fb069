"""Checkpoints: the full global state in HDF5, written atomically, verified on read.

A checkpoint is written to a temporary file, flushed, fsynced and renamed over its final name,
so a crash at any moment leaves every earlier checkpoint intact. Each dataset carries a SHA-256
of its bytes; a truncated or corrupted file is detected on load and the next older one is used.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import yaml

from simsplit.version import __version__

FORMAT = "simsplit-checkpoint"
FORMAT_VERSION = 1
PREFIX, SUFFIX = "checkpoint_", ".h5"
#: case parts that define the physical problem: a restart must agree on all of them
IDENTITY_KEYS = ("physics", "fluid", "md", "domain")


class CheckpointError(RuntimeError):
    """No usable checkpoint, or one that belongs to another case or version."""


#: MD settings a restart may change: how the same trajectory is integrated or reported
MD_RESTART_TUNABLE = ("timestep", "thermo_every", "steps")


def case_identity(case: dict[str, Any]) -> str:
    """Digest of what defines the problem (not its length, split, backend or output)."""
    part = {k: case[k] for k in IDENTITY_KEYS if k in case}
    if "md" in part:
        part["md"] = {k: v for k, v in part["md"].items() if k not in MD_RESTART_TUNABLE}
    part["precision"] = case["run"]["precision"]
    storage = case["run"].get("storage")
    if storage not in (None, part["precision"]):  # narrow storage: another state (fp16 bits)
        part["storage"] = storage
    text = yaml.safe_dump(part, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def checkpoint_path(directory: Path, step: int) -> Path:
    return Path(directory) / f"{PREFIX}{step:010d}{SUFFIX}"


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint files in ``directory``, newest step first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(directory.glob(f"{PREFIX}*{SUFFIX}"), reverse=True)


def write_checkpoint(directory: Path, step: int, case: dict[str, Any],
                     arrays: dict[str, np.ndarray], attrs: dict[str, Any] | None = None,
                     keep: int = 3) -> Path:
    """Write ``arrays`` (+ scalar ``attrs``) atomically; keep the newest ``keep`` files."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(directory, step)
    tmp = final.with_name(final.name + f".tmp{os.getpid()}")
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs.update({"format": FORMAT, "format_version": FORMAT_VERSION,
                            "simsplit_version": __version__, "step": step,
                            "case": yaml.safe_dump(case, sort_keys=False),
                            "case_identity": case_identity(case)})
            for key, value in (attrs or {}).items():
                f.attrs[key] = value
            for name, arr in arrays.items():
                dset = f.create_dataset(name, data=arr)
                dset.attrs["sha256"] = _digest(arr)
            f.flush()
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        _fsync_dir(directory)
    finally:
        if tmp.exists():
            tmp.unlink()
    for old in list_checkpoints(directory)[max(keep, 1):]:
        old.unlink(missing_ok=True)
    return final


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_checkpoint(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(attrs, arrays) of one checkpoint; :class:`CheckpointError` if it is damaged."""
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
            if attrs.get("format") != FORMAT:
                raise CheckpointError(f"{path}: not a simsplit checkpoint")
            arrays = {}
            for name, dset in f.items():
                arr = dset[()]
                if dset.attrs.get("sha256") != _digest(arr):
                    raise CheckpointError(f"{path}: dataset '{name}' fails its checksum")
                arrays[name] = arr
    except CheckpointError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable ({exc})") from None
    return attrs, arrays


def check_compatible(attrs: dict[str, Any], case: dict[str, Any], path: Path) -> None:
    if int(attrs.get("format_version", -1)) != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format {attrs.get('format_version')} (simsplit "
            f"{attrs.get('simsplit_version')}) cannot be read by simsplit {__version__} "
            f"(format {FORMAT_VERSION})")
    if attrs.get("case_identity") != case_identity(case):
        raise CheckpointError(
            f"{path}: written by a different case (physics, domain, precision or storage "
            "differ); "
            "restart with the case that wrote it, or start afresh")


def load_latest(source: Path, case: dict[str, Any]
                ) -> tuple[Path, dict[str, Any], dict[str, np.ndarray]]:
    """Newest intact checkpoint in a directory (or the given file), checked against ``case``.

    Damaged files are skipped with a warning; a checkpoint of another case is refused.
    """
    source = Path(source)
    candidates = [source] if source.is_file() else list_checkpoints(source)
    if source.is_file():
        candidates += [p for p in list_checkpoints(source.parent) if p.name < source.name]
    if not candidates:
        raise CheckpointError(f"no checkpoint found in {source}")
    for path in candidates:
        try:
            attrs, arrays = read_checkpoint(path)
        except CheckpointError as exc:
            warnings.warn(f"{exc}; falling back to the previous checkpoint", stacklevel=2)
            continue
        check_compatible(attrs, case, path)
        return path, attrs, arrays
    raise CheckpointError(f"every checkpoint in {source} is damaged")
