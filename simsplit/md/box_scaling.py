"""The solver's side of NPT (``md.ensemble: npt``): a box that changes every step.

A part of :class:`~simsplit.md.solver.MDSolver` (which inherits it, before
:class:`~simsplit.md.rebuilds.NeighbourRebuilds`). The barostat
(:class:`~simsplit.md.npt.NoseHooverNPT`) scales the box and every owned position by one factor
per step (about the origin, so wrapped positions stay wrapped; ghosts are refreshed from their
owners afterwards as every step). What must follow the box:

* **Rebuild decision.** Lists, cells, ghosts and slab edges are those of the last build, made
  in the box of that build (``_build_box``). With s = L / L_build (per axis) and u the
  displacement from the *scaled* build position, a pair within rc now was within
  (rc + 2 max|u|) / s at the build, so the lists stay valid while
  2 max|u| <= s (rc + skin) - rc. The advance kernels measure d = x - x_build (minimum image),
  and |u| <= |d| + |1 - s| |L_build|, so a rebuild is asked for when
  max|d| > (s_min (rc + skin) - rc) / 2 - max|1 - s| |L_build|: the usual skin / 2 when the
  box has not changed, fewer steps between builds while it drifts (no kernel changes, and the
  decision is a pure function of exact numbers, hence the same on every split). Ghost slabs
  follow by the same argument (every partner within rc now was within rc + skin of the
  owner's build position, which lay in the owner's slab).
* **At a rebuild** the slab edges (the same weighted split of the new Lz), the cell grid
  (cells of at least (rc + skin) / 2 of the new box) and the tail correction follow the box.
  A box that shrank below 2 (rc + skin), or slabs thinner than rc + skin, stop the run with a
  ``ValueError`` naming ``md.barostat``.
* **Restart.** The state carries the box and the build box; lists are rebuilt from the build
  positions in the build box, then the atoms move to their positions in the current box.
* Several slabs on one GPU run without the arena (which keeps one layout), through the host
  migration path.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from simsplit.md import slabs as sl
from simsplit.md.npt import NoseHooverNPT

#: neighbour-search cells per cutoff + skin (the solver's grid rule)
CELL_DIVISIONS = 2


def cell_grid(box: np.ndarray, reach: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """Cells of at least ``reach / CELL_DIVISIONS`` per axis and the stencil offsets scanned
    around a cell (an axis with too few cells for the stencil is scanned whole)."""
    ncell = np.maximum((np.asarray(box) * CELL_DIVISIONS // reach).astype(np.int64), 1)
    span = 2 * CELL_DIVISIONS + 1
    offsets = [np.arange(-CELL_DIVISIONS, CELL_DIVISIONS + 1, dtype=np.int64)
               if n >= span else np.arange(n, dtype=np.int64) for n in ncell]
    return ncell, offsets


class BoxScaling:
    """Box, slab edges, cells and rebuild limits of a solver whose box the barostat scales."""

    barostat: NoseHooverNPT | None = None

    def _init_box_scaling(self) -> None:
        """After the thermostat is made: hook the NPT integrator to this solver."""
        self.barostat = self.thermostat if isinstance(self.thermostat, NoseHooverNPT) else None
        #: the drift's time step (the barostat stretches it by exp(dt/2 omega_dot))
        self._drift_dt = self.dt
        self._build_box = self.box.copy()
        self._restart_build_box: np.ndarray | None = None
        self._type_counts = np.bincount(self.atom_type, minlength=self.pairs.ntypes)
        if self.barostat is not None:
            self._thermo_extra = ("vol", "density")
            self.barostat.attach(self._pressure_sums, lambda: self.volume, self._scale_box)

    def _pressure_sums(self) -> tuple[float, float]:
        """2K and the pair virial over all atoms, correctly rounded (one device reduction for
        both where it applies), the virial plus the tail virial (collective under MPI)."""
        sums = self._device_sums()
        if sums is not None:
            return sums[0], sums[2] + self.tail[1]
        pair = math.fsum(self._gather([s.vir for s in self.slabs]))
        return math.fsum(self._mv2_by_id()), pair + self.tail[1]

    def _set_box(self, box: np.ndarray) -> None:
        self.box = np.asarray(box, dtype=np.float64)
        self.volume = float(np.prod(self.box))
        if self.case["md"]["potential"]["tail"]:
            self.tail = self.pairs.tail(self._type_counts, self.volume)

    def _scale_box(self, half: float) -> None:
        """Box and owned positions times ``half``^2; the drift of this step takes dt * half."""
        factor = half * half
        for s in self.slabs:
            s.kernels.scale_rows(s.x, s.n_own, factor)
        self._set_box(self.box * factor)
        self._drift_dt = self.dt * half

    def _npt_limits2(self) -> tuple[float, float]:
        """Squared displacement limits (rebuild, jump) while the box differs from the build
        box (see the module docstring); a negative rebuild limit forces a rebuild."""
        ratio = self.box / self._build_box
        slack = float(np.max(np.abs(1.0 - ratio))) * float(np.sqrt(np.sum(self._build_box ** 2)))
        limit = 0.5 * (float(np.min(ratio)) * self.reach - self.cutoff) - slack
        jump = 1.5 * self.skin + slack
        return (limit * limit if limit > 0.0 else -1.0), jump * jump

    def _rebuild(self, then: Callable[[], None] | None = None) -> None:
        if self.barostat is None:
            super()._rebuild(then)  # type: ignore[misc]
            return
        box = self.box
        if self._restart_build_box is not None:  # lists of the interrupted run's build box
            self.box, self._restart_build_box = self._restart_build_box, None
        try:
            if not np.array_equal(self.box, self.layout.box):
                self._fit_to_box()
            super()._rebuild()  # type: ignore[misc]
            self._build_box = self.box.copy()
        finally:
            self.box = box
        if then is not None:  # on the current box, which the build swapped out
            then()

    def _fit_to_box(self) -> None:
        """Slab edges and cell grid of the current box (at a rebuild)."""
        dec = self.case["decomposition"]
        try:
            self.layout = sl.SlabLayout(self.box, int(dec["subdomains"]), dec.get("weights"),
                                        self.reach)
        except ValueError as err:
            raise ValueError(f"md.barostat: the box shrank to {self.box.tolist()}: {err}"
                             ) from None
        self.ncell, self._offsets = cell_grid(self.box, self.reach)

    def _thermo_now(self) -> dict[str, Any]:
        rec = super()._thermo_now()  # type: ignore[misc]
        if self.barostat is not None:
            rec["vol"] = self.volume
            rec["density"] = self.n_atoms / self.volume
        return rec

    def _write_frame(self) -> None:
        if self._writer is not None:  # the trajectory's box is the box of each frame
            self._writer.box = self.box
        super()._write_frame()  # type: ignore[misc]

    def state(self) -> dict[str, Any]:
        out = super().state()  # type: ignore[misc]
        if self.barostat is not None:
            out["build_box"] = self._build_box.copy()
        return out

    def load_state(self, state: dict[str, Any]) -> None:
        if self.barostat is not None and "box" in state:
            self._set_box(np.asarray(state["box"], dtype=np.float64))
            if "build_box" in state:
                self._restart_build_box = np.asarray(state["build_box"], dtype=np.float64)
        super().load_state(state)  # type: ignore[misc]
