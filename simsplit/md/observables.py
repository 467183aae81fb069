"""What an MD run shows: global arrays in atom-id order gathered from the slabs, thermo records,
the H5MD trajectory, counters, and the checkpointable state (and restoring it).

A part of :class:`~simsplit.md.solver.MDSolver` (which inherits it); gathers are collective
under MPI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from simsplit.md.lattice import wrap_into_box
from simsplit.md.thermo import format_row, thermo_record

TRAJECTORY_NAME = "trajectory.h5md"


class Observables:
    """Gathers, thermo, trajectory frames, statistics and state of an MD solver."""

    # --- observation ------------------------------------------------------------------------
    def _gather(self, per_slab: list[np.ndarray], width: int = 0) -> np.ndarray:
        """Global array in atom-id order from per-slab rows (collective under MPI)."""
        shape = (self.n_atoms, width) if width else (self.n_atoms,)
        per_slab = [np.asarray(s.kernels.to_host(a))
                    for s, a in zip(self.slabs, per_slab, strict=True)]
        out = np.empty(shape, dtype=per_slab[0].dtype if per_slab else np.float64)
        if self._comm is not None:
            ids = np.concatenate([self.slab_ids(s)[: s.n_own] for s in self.slabs])
            vals = np.concatenate([a[: s.n_own] for s, a in zip(self.slabs, per_slab,
                                                                 strict=True)])
            all_ids, all_vals = self.exchange.allgather_rows(ids, vals)  # type: ignore[union-attr]
            out[all_ids] = all_vals
            return out
        for s, arr in zip(self.slabs, per_slab, strict=True):
            out[self.slab_ids(s)[: s.n_own]] = arr[: s.n_own]
        return out

    def _record_thermo(self) -> None:
        pe = self._gather([s.pe for s in self.slabs])
        vir = self._gather([s.vir for s in self.slabs])
        mv2 = self._gather([s.kernels.kinetic_per_atom(s.v, s.n_own, self.mass)
                            for s in self.slabs])
        rec = thermo_record(self.steps_done, pe, vir, mv2, self.volume)
        self._thermo.append(rec)
        if self._writer is not None:  # before the file opens, records wait in self._thermo
            self._write_observables(rec)
        if self._echo:
            print(format_row(rec))
            sys.stdout.flush()

    def _write_observables(self, rec: dict[str, Any]) -> None:
        self._writer.write_observables(rec["step"], rec["step"] * self.dt, {
            "temperature": rec["temp"], "potential_energy": rec["pe"],
            "kinetic_energy": rec["ke"], "total_energy": rec["etotal"],
            "pressure": rec["press"]})

    def _open_writer(self) -> Any:
        # opened at the first write of a run, never at construction: a refused run must leave
        # its output directory untouched
        if self._writer is None:
            from simsplit.io.h5md import H5MDWriter

            assert self.output_dir is not None
            self._writer = H5MDWriter(self.output_dir / TRAJECTORY_NAME, self.n_atoms,
                                      self.box, dtype=self.dtype,
                                      resume_step=self._resume_step)
            for rec in self._thermo:  # recorded before the file existed (step 0 at least)
                self._write_observables(rec)
        return self._writer

    def _write_frame(self) -> None:
        if self._last_frame == self.steps_done:
            return
        self._last_frame = self.steps_done
        x, v, img = self.positions(), self.velocities(), self.images()  # collective
        if self.rank != 0:
            return
        self._open_writer().write_frame(self.steps_done, self.steps_done * self.dt, x, v,
                                        img.astype(np.int32))

    def open_output(self, directory: Path, out: dict[str, Any]) -> Callable[[], None]:
        """Hook for :func:`simsplit.run.output.attach_output`: frames and thermo go to
        ``<dir>/trajectory.h5md`` from :meth:`step`; returns what the run calls at its end
        (the final frame, then closing the file)."""
        self.output_dir = Path(directory)
        self.output_every = int(out.get("every") or 0)

        def finish() -> None:
            self._write_frame()
            self.close()

        return finish

    def close(self) -> None:
        """Close the trajectory file, if one is open (call once, at the very end)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._resume_step = self.steps_done  # a later run continues the same file

    def thermo(self) -> list[dict[str, Any]]:
        """Thermo records so far: dicts with step, temp, pe, ke, etotal, press (per atom)."""
        return [dict(r) for r in self._thermo]

    def positions(self) -> np.ndarray:
        """Wrapped positions ``(N, 3)`` in atom-id order."""
        return self._gather([s.x for s in self.slabs], 3)

    def velocities(self) -> np.ndarray:
        """Velocities ``(N, 3)`` in atom-id order."""
        return self._gather([s.v for s in self.slabs], 3)

    def forces(self) -> np.ndarray:
        """Forces of the current step ``(N, 3)`` in atom-id order (Langevin terms included)."""
        return self._gather([s.f for s in self.slabs], 3)

    def images(self) -> np.ndarray:
        """Periodic image counts ``(N, 3)``: unwrapped = positions + images * box."""
        return self._gather([s.img for s in self.slabs], 3)

    def per_atom_energy(self) -> np.ndarray:
        """Potential energy of each atom (half of each of its pairs), atom-id order."""
        return self._gather([s.pe for s in self.slabs])

    def per_atom_virial(self) -> np.ndarray:
        """Half of ``r . f`` of each of the atom's pairs, atom-id order."""
        return self._gather([s.vir for s in self.slabs])

    def stats(self) -> dict[str, Any]:
        """Counters: neighbour rebuilds, migrated atoms, capacity growths, current layout
        (collective under MPI: migrations, ghosts and atoms per slab are over all ranks;
        messages and phase times are this rank's)."""
        out: dict[str, Any] = dict(self._stats)
        out["neighbor_capacity"] = self.capacity
        out["ghosts"] = sum(s.n_ghost for s in self.slabs)
        out["atoms_per_slab"] = [s.n_own for s in self.slabs]
        if self._comm is not None:
            out["migrations"] = int(self._comm.allreduce(int(out["migrations"])))
            out["ghosts"] = int(self._comm.allreduce(int(out["ghosts"])))
            out["atoms_per_slab"] = [n for part in self._comm.allgather(out["atoms_per_slab"])
                                     for n in part]
        out["slab_edges"] = self.layout.edges.tolist()
        #: how this process refreshes ghosts between rebuilds on GPUs (see GhostLink.mode)
        out["ghost_transfer"] = sorted({link.mode for link in self._links.values()})
        out["messages"] = self.exchange.messages
        out.update(self._last_run)
        out.update({f"time_{k}": v for k, v in self._timers.items()})
        return out

    # --- checkpointing ----------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """Everything needed to continue bit for bit, as NumPy arrays in atom-id order
        (collective under MPI: every rank gets the global arrays)."""
        return {
            "ids": np.arange(self.n_atoms, dtype=np.int64),
            "positions": self.positions(),
            "velocities": self.velocities(),
            "forces": self.forces(),
            "images": self.images(),
            # positions at the last list build: lists are in cell order at that build, so a
            # restart must rebuild from them (and keep the rebuild schedule) to continue bitwise
            "build_positions": self._gather([s.x0 for s in self.slabs], 3),
            "box": self.box.copy(),
            "step": np.array(self.steps_done, dtype=np.int64),
            "time": np.array(self.steps_done * self.dt),
            # the Langevin noise is a pure function of (noise_seed, step, atom id)
            "noise_seed": np.array(self.noise_seed, dtype=np.int64),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Replace the atoms by a :meth:`state` snapshot (any split may have written it)."""
        pos = np.asarray(state["positions"])
        if pos.shape != (self.n_atoms, 3):
            raise ValueError(f"state has positions of shape {pos.shape}, this case has "
                             f"({self.n_atoms}, 3)")
        ids = np.asarray(state.get("ids", np.arange(self.n_atoms)), dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        if not np.array_equal(ids[order], np.arange(self.n_atoms)):
            raise ValueError("state ids must be a permutation of 0 .. N-1")
        if "box" in state and not np.array_equal(np.asarray(state["box"]), self.box):
            raise ValueError(f"state box {np.asarray(state['box']).tolist()} differs from "
                             f"the case box {self.box.tolist()}")
        x = pos[order]
        v = np.asarray(state["velocities"])[order]
        img = np.asarray(state.get("images", np.zeros((self.n_atoms, 3))))[order]
        if "noise_seed" in state:
            self.noise_seed = int(state["noise_seed"])
        self.steps_done = int(state["step"])
        self._built_at = self.steps_done  # lists are rebuilt from the state below
        self._resume_step = self.steps_done  # a trajectory file already there continues
        self._thermo = [r for r in self._thermo if r["step"] < self.steps_done]
        # a no-op on state() output (already wrapped); wraps hand-made snapshots
        x, shift = wrap_into_box(np.asarray(x, dtype=np.float64), self.box)
        built = None
        if "build_positions" in state:
            built = np.asarray(state["build_positions"], dtype=np.float64)[order]
            if built.shape != pos.shape:
                raise ValueError(f"state has build_positions of shape {built.shape}, "
                                 f"expected {pos.shape}")
        self._distribute(x, v, np.asarray(img, np.int64) + shift, built)
        self._compute_forces(self.steps_done)
        if "forces" in state:
            f = np.asarray(state["forces"])[order]
            for s in self.slabs:
                s.f = s.kernels.to_device(f[self.slab_ids(s)[: s.n_own]].astype(self.dtype))
        if self.steps_done % self.thermo_every == 0:
            self._record_thermo()
        self._frame_pending = True  # this step's frame, if due and not in the file already
