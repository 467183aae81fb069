"""H5MD 1.1 trajectory writer (https://www.nongnu.org/h5md/h5md.html).

Layout written::

    /h5md                           version = [1, 1]; author/name; creator/name, version
    /parameters                     attributes the caller gives (unit system, model constants)
    /particles/trajectory/box       dimension = 3, boundary = periodic x 3;
                                    edges/{step,time,value}: value (frames, 3), one box a frame
    /particles/trajectory/{position,velocity,image}/{step,time,value}   value (frames, N, 3)
    /particles/trajectory/id        (N,) time-independent: rows are in atom-id order
    /particles/trajectory/species   (N,) type ids (0-based), attribute ``names``: added at the
                                    end of a run (:func:`write_species`)
    /observables/<name>/{step,time,value}                               scalars

Time-dependent elements are appendable chunked datasets. What MDAnalysis' H5MD reader (2.11)
needs, besides the spec, decides three details: the particle group is named ``trajectory``
(its topology-free loading, ``Universe(path)``, looks only there), the box is stored per frame
(``edges/value[frame]``), and ``unit`` attributes are variable-length strings (it compares
them to ``str`` keys; the spec's fixed-length ASCII reads back as ``bytes`` and is refused).
Which unit attributes go on which dataset is the caller's choice (``units``).
"""

from __future__ import annotations

import getpass
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

import h5py
import numpy as np

_VLEN_STR = h5py.string_dtype("ascii")

#: the group under /particles; MDAnalysis' ``Universe(path)`` reads no other name
PARTICLE_GROUP = "trajectory"

#: attributes per quantity: ``{"length": {"unit": ...}, "time": ..., "<observable>": ...}``
UnitAttrs = Mapping[str, Mapping[str, str]]


def _creator_version() -> str:
    try:
        from importlib.metadata import version

        return version("simsplit")
    except Exception:  # package not installed (source checkout)
        return "0.0.0+source"


class H5MDWriter:
    """Append frames of N particles in a fixed periodic box to an H5MD file.

    With ``resume_step`` (a restarted run) an existing file of the same system is continued:
    every element is cut back to its entries up to that step (a run killed after its last
    checkpoint may have written later frames, which the restarted run writes again, bit for
    bit) and entries up to that step are not written twice. A file that cannot be read (killed
    while HDF5 was writing it) is moved aside to ``<name>.damaged``, with a warning, and a new
    one is started.

    ``units`` gives the attributes of each quantity's datasets: ``length`` goes on positions
    and box edges, ``velocity`` on velocities, ``time`` on every ``time`` dataset, and an
    observable's name on its values. ``parameters`` become attributes of ``/parameters``.
    """

    def __init__(self, path: str | Path, n_atoms: int, box: np.ndarray, *,
                 author: str | None = None, dtype: Any = np.float64,
                 resume_step: int | None = None, units: UnitAttrs | None = None,
                 parameters: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.n_atoms = n_atoms
        self.box = np.asarray(box, dtype=np.float64)
        self.dtype = np.dtype(dtype)
        self.units: UnitAttrs = units or {}
        self._floor = -1  # entries at or before this step are already in the file
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is not None and self.path.exists() and self._continue(int(resume_step)):
            return
        self._create(author, parameters)

    def _create(self, author: str | None, parameters: Mapping[str, Any] | None) -> None:
        n_atoms = self.n_atoms
        self.file = h5py.File(self.path, "w")
        h5 = self.file.create_group("h5md")
        h5.attrs["version"] = np.array([1, 1], dtype=np.int32)
        h5.create_group("author").attrs.create("name", author or _user(), dtype=_VLEN_STR)
        creator = h5.create_group("creator")
        creator.attrs.create("name", "simsplit", dtype=_VLEN_STR)
        creator.attrs.create("version", _creator_version(), dtype=_VLEN_STR)
        if parameters:
            params = self.file.create_group("parameters")
            for key, value in parameters.items():
                params.attrs[key] = value
        part = self.file.create_group(f"particles/{PARTICLE_GROUP}")
        box_g = part.create_group("box")
        box_g.attrs["dimension"] = np.int32(3)
        box_g.attrs.create("boundary", ["periodic"] * 3, dtype=h5py.string_dtype("ascii", 8))
        self._edges = self._element(box_g, "edges", (3,), np.float64, "length")
        self._pos = self._element(part, "position", (n_atoms, 3), self.dtype, "length")
        self._vel = self._element(part, "velocity", (n_atoms, 3), self.dtype, "velocity")
        self._img = self._element(part, "image", (n_atoms, 3), np.int32)
        part.create_dataset("id", data=np.arange(n_atoms, dtype=np.int64))
        self._obs_root = self.file.create_group("observables")
        self._obs: dict[str, h5py.Group] = {}

    def _continue(self, step: int) -> bool:
        """Continue the existing file from ``step``; False when it was damaged and moved."""
        try:
            self._resume(step)
            return True
        except (OSError, KeyError) as exc:
            if getattr(self, "file", None) is not None and self.file.id.valid:
                self.file.close()
            aside = self.path.with_name(self.path.name + ".damaged")
            os.replace(self.path, aside)
            warnings.warn(f"{self.path}: unreadable ({exc}); moved to {aside.name}, and a new "
                          f"trajectory starts at step {step}", stacklevel=3)
            return False

    def _resume(self, step: int) -> None:
        self.file = h5py.File(self.path, "a")
        part = self.file.get(f"particles/{PARTICLE_GROUP}")
        if part is None:
            self.file.close()
            raise ValueError(f"{self.path}: has no /particles/{PARTICLE_GROUP} (written by an "
                             "older simsplit?); move the old trajectory away or start afresh")
        n_file = part["id"].shape[0]
        if n_file != self.n_atoms or part["position/value"].dtype != self.dtype:
            self.file.close()
            raise ValueError(f"{self.path}: holds {n_file} atoms of "
                             f"{part['position/value'].dtype}, this run has {self.n_atoms} of "
                             f"{self.dtype}; move the old trajectory away or start afresh")
        self._edges, self._pos = part["box/edges"], part["position"]
        self._vel, self._img = part["velocity"], part["image"]
        self._obs_root = self.file["observables"]
        self._obs = dict(self._obs_root.items())
        for g in (self._edges, self._pos, self._vel, self._img, *self._obs.values()):
            keep = _entries_up_to(g, step)
            for name in ("step", "time", "value"):
                g[name].resize(keep, axis=0)
        self._floor = step
        self.file.flush()

    def _element(self, parent: h5py.Group, name: str, shape: tuple[int, ...], dtype: Any,
                 quantity: str | None = None) -> h5py.Group:
        """An appendable time-dependent element; ``quantity`` names its value's units."""
        g = parent.create_group(name)
        g.create_dataset("step", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(256,))
        time = g.create_dataset("time", shape=(0,), maxshape=(None,), dtype=np.float64,
                                chunks=(256,))
        chunk = (1,) + shape if shape else (256,)
        value = g.create_dataset("value", shape=(0,) + shape, maxshape=(None,) + shape,
                                 dtype=dtype, chunks=chunk)
        self._label(time, "time")
        if quantity is not None:
            self._label(value, quantity)
        return g

    def _label(self, dataset: h5py.Dataset, quantity: str) -> None:
        for key, text in self.units.get(quantity, {}).items():
            dataset.attrs.create(key, text, dtype=_VLEN_STR)

    @staticmethod
    def _append(g: h5py.Group, step: int, time: float, value: Any) -> None:
        n = g["step"].shape[0]
        for name in ("step", "time", "value"):
            g[name].resize(n + 1, axis=0)
        g["step"][n] = step
        g["time"][n] = time
        g["value"][n] = value

    def write_frame(self, step: int, time: float, positions: np.ndarray,
                    velocities: np.ndarray, images: np.ndarray | None = None) -> None:
        """Append one frame; arrays are ``(N, 3)`` in atom-id order, positions wrapped."""
        if step <= self._floor:
            return
        self._append(self._edges, step, time, self.box)
        self._append(self._pos, step, time, positions)
        self._append(self._vel, step, time, velocities)
        img = np.zeros((self.n_atoms, 3), np.int32) if images is None else images
        self._append(self._img, step, time, img)

    def write_observables(self, step: int, time: float, values: Mapping[str, float]) -> None:
        """Append scalar observables (one group per name, created on first use)."""
        if step <= self._floor:
            return
        for name, val in values.items():
            g = self._obs.get(name)
            if g is None:
                g = self._element(self._obs_root, name, (), np.float64, name)
                self._obs[name] = g
            self._append(g, step, time, val)

    def flush(self) -> None:
        """Put everything written so far on disk: a run killed later leaves a readable file."""
        self.file.flush()

    def close(self) -> None:
        if self.file.id.valid:
            self.file.close()

    def __enter__(self) -> H5MDWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_species(path: str | Path, typeid: np.ndarray, names: list[str]) -> None:
    """Add the atom types to a closed trajectory: ``/particles/trajectory/species`` (H5MD's
    time-independent integer species, 0-based type ids in atom-id order) with the type names
    in its ``names`` attribute. A file that has them already is left as it is."""
    with h5py.File(path, "a") as f:
        part = f[f"particles/{PARTICLE_GROUP}"]
        if "species" in part:
            return
        ds = part.create_dataset("species", data=np.asarray(typeid, dtype=np.int32))
        ds.attrs.create("names", [str(n) for n in names], dtype=_VLEN_STR)


def read_species(path: str | Path) -> tuple[np.ndarray, list[str]] | None:
    """Type ids and names written by :func:`write_species` (None when the file has none)."""
    with h5py.File(path, "r") as f:
        ds = f.get(f"particles/{PARTICLE_GROUP}/species")
        if ds is None:
            return None
        ids = np.asarray(ds[()], dtype=np.int32)
        names = [n.decode() if isinstance(n, bytes) else str(n)
                 for n in ds.attrs.get("names", [])]
    if not names:
        names = [str(t + 1) for t in range(int(ids.max()) + 1 if ids.size else 1)]
    return ids, names


def _entries_up_to(element: h5py.Group, step: int) -> int:
    """How many leading entries of an element are complete and at or before ``step``: a run
    killed inside an append may leave the step, time and value datasets of different lengths,
    or a step that was allocated but not written."""
    steps = element["step"][...]
    unordered = np.flatnonzero(np.diff(steps) <= 0)
    if unordered.size:
        steps = steps[: unordered[0] + 1]
    keep = int(np.searchsorted(steps, step, side="right"))
    return min(keep, element["time"].shape[0], element["value"].shape[0])


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in containers
        return "simsplit"
