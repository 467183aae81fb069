"""What an MD run shows: global arrays in atom-id order gathered from the slabs, thermo records
(the console table and ``thermo.csv``), the H5MD trajectory, counters, and the checkpointable
state (and restoring it).

A part of :class:`~simsplit.md.solver.MDSolver` (which inherits it); gathers are collective
under MPI, printing and files are rank 0's.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from simsplit.md.lattice import wrap_into_box
from simsplit.md.thermo import (
    columns,
    csv_row,
    format_row,
    header,
    thermo_record,
    thermo_record_from_sums,
)
from simsplit.numerics import exact

TRAJECTORY_NAME = "trajectory.h5md"
THERMO_NAME = "thermo.csv"

#: output.every null: about this many frames over the run ...
DEFAULT_FRAMES = 100
#: ... and fewer where they would take more bytes than this
DEFAULT_TRAJECTORY_BYTES = 512 * 2**20

#: H5MD observables (one value per frame) and the thermo keys they hold
FRAME_OBSERVABLES = {"temperature": "temp", "potential_energy": "pe",
                     "kinetic_energy": "ke", "total_energy": "etotal", "pressure": "press"}

#: Attributes of the trajectory's datasets. Values are in reduced LJ units (``lj_unit``).
#: MDAnalysis' H5MD reader refuses a file without ``unit`` attributes it knows (by default it
#: converts to Angstrom and ps, and knows no reduced units), so ``unit`` names its own base
#: units: it then converts nothing and reads the numbers as written (1 sigma as 1 Angstrom).
#: The file's /parameters say the same; see simsplit/md/NOTES.md.
LJ_UNITS = {
    "length": {"unit": "A", "lj_unit": "sigma"},
    "velocity": {"unit": "A ps-1", "lj_unit": "sigma tau-1"},
    "time": {"unit": "ps", "lj_unit": "tau"},
    "temperature": {"lj_unit": "epsilon k_B-1"},
    "potential_energy": {"lj_unit": "epsilon per atom"},
    "kinetic_energy": {"lj_unit": "epsilon per atom"},
    "total_energy": {"lj_unit": "epsilon per atom"},
    "pressure": {"lj_unit": "epsilon sigma-3"},
}
UNITS_NOTE = ("reduced Lennard-Jones units: length sigma, time tau = sigma sqrt(m / epsilon), "
              "energy epsilon; the 'unit' attributes (A, ps) are MDAnalysis' base units, so "
              "that it reads these numbers unchanged; they do not mean that sigma is 1 A")


def default_frame_interval(steps: int, frame_bytes: int) -> int:
    """Steps between frames when ``output.every`` is null: the smallest 1, 2 or 5 x 10^k that
    gives at most :data:`DEFAULT_FRAMES` intervals over ``steps`` and a trajectory of at
    most :data:`DEFAULT_TRAJECTORY_BYTES`."""
    frames = max(1, min(DEFAULT_FRAMES, DEFAULT_TRAJECTORY_BYTES // max(frame_bytes, 1)))
    least = max(1, math.ceil(steps / frames))
    decade = 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * decade >= least:
                return mantissa * decade
        decade *= 10


class Observables:
    """Gathers, thermo, trajectory frames, statistics and state of an MD solver."""

    #: record keys shown after the standard thermo columns (NPT: volume and density)
    _thermo_extra: tuple[str, ...] = ()

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

    def _thermo_now(self) -> dict[str, Any]:
        """The thermo record of the current state (collective under MPI)."""
        sums = self._device_sums()
        if sums is not None:
            return thermo_record_from_sums(self.steps_done, self.n_atoms, *sums, self.volume,
                                           self.tail)
        pe = self._gather([s.pe for s in self.slabs])
        vir = self._gather([s.vir for s in self.slabs])
        mv2 = self._mv2_by_id()
        return thermo_record(self.steps_done, pe, vir, mv2, self.volume, self.tail)

    def _kinetic_total(self) -> float:
        """Sum of m v^2 over all atoms, correctly rounded (collective under MPI)."""
        sums = self._device_sums()
        if sums is not None:
            return sums[0]
        return math.fsum(self._mv2_by_id())

    def _device_sums(self) -> tuple[float, float, float] | None:
        """Totals of ``m v^2``, energy and virial summed exactly on the GPUs of this process
        (a few hundred integers read per kernel set instead of every atom), or None where
        that does not apply (CPU, MPI, a non-finite value: the fsum path decides)."""
        if not all(getattr(k, "thermo_sums", None) for k in self.kernel_sets):
            return None  # the same answer on every rank: one backend for all
        totals: list[int] | None = [0, 0, 0]
        for s in self.slabs:
            got = s.kernels.thermo_sums(s.v, s.pe, s.vir, s.n_own, self.mass,
                                        **self._row_masses(s))
            if got is None:
                totals = None
                break
            totals = [a + b for a, b in zip(totals, got, strict=True)]
        if self._comm is not None:  # exact integers: the rank order cannot change the sum
            parts = self._comm.allgather(totals)
            if any(p is None for p in parts):
                return None
            totals = [sum(col) for col in zip(*parts, strict=True)]
        if totals is None:
            return None
        two_ke, pe, w = (exact.to_float(t) for t in totals)
        if two_ke is None or pe is None or w is None:
            return None
        return two_ke, pe, w

    def _record_thermo(self) -> None:
        rec = self._thermo_now()
        if self.thermostat is not None:  # the conserved quantity, per atom
            rec["econserve"] = rec["etotal"] + self.thermostat.energy() / self.n_atoms
        self._thermo.append(rec)
        rate = self._interval_rate(rec["step"])
        if self._thermo_log is not None:  # before it opens, records wait in self._thermo
            self._thermo_log.write(csv_row(rec, rate, self._thermo_extra))
        if self._echo:
            print(format_row(rec, rate, self._thermo_extra))
            sys.stdout.flush()

    def _interval_rate(self, step: int) -> float | None:
        """Atom-steps per second since the previous thermo row of this run (None: no
        interval yet, e.g. the first row, or a solver whose run has not started)."""
        if self._rate_mark is None:
            return None
        now = time.perf_counter()
        (since, then), self._rate_mark = self._rate_mark, (step, now)
        if step <= since or now <= then:
            return None
        return (step - since) * self.n_atoms / (now - then)

    def start_thermo(self, echo: bool) -> bool:
        """Begin a run's thermo table: rates count from now, and with ``echo`` rank 0 prints
        the header and each row as it comes (this step's row first, if it has one). Returns
        whether this process prints."""
        self._rate_mark = (self.steps_done, time.perf_counter())
        self._echo = echo and self.rank == 0
        if self._echo:
            print(header(self._thermo_extra))
            if self._thermo and self._thermo[-1]["step"] == self.steps_done:
                print(format_row(self._thermo[-1], extra=self._thermo_extra))
            sys.stdout.flush()
        return self._echo

    def stop_thermo(self) -> None:
        """End the printing that :meth:`start_thermo` began."""
        self._echo = False

    def _open_outputs(self) -> None:
        """At the first step of a run, never at construction (a refused run must leave its
        output directory untouched): thermo.csv with the rows recorded so far, and this
        step's frame when one is due."""
        if self.output_dir is None:
            return
        if self.rank == 0 and self._thermo_log is None:
            from simsplit.io.csv_log import CSVLog

            self._thermo_log = CSVLog(self.output_dir / THERMO_NAME,
                                      columns(self._thermo_extra),
                                      resume_step=self._resume_step)
            for rec in self._thermo:
                self._thermo_log.write(csv_row(rec, extra=self._thermo_extra))
        if self.output_every > 0 and self.steps_done % self.output_every == 0:
            self._write_frame()

    def _open_writer(self) -> Any:
        if self._writer is None:
            from simsplit.io.h5md import H5MDWriter

            assert self.output_dir is not None
            self._writer = H5MDWriter(self.output_dir / TRAJECTORY_NAME, self.n_atoms,
                                      self.box, dtype=self.dtype,
                                      resume_step=self._resume_step, units=LJ_UNITS,
                                      parameters=self._model_parameters())
        return self._writer

    def _model_parameters(self) -> dict[str, Any]:
        md = self.case["md"]
        pot = md["potential"]
        return {"unit_system": "lj", "units": UNITS_NOTE, "epsilon": float(pot["epsilon"]),
                "sigma": float(pot["sigma"]), "cutoff": float(pot["cutoff"]),
                "mass": self.type_mass.copy() if self.multi_mass else float(md["mass"]),
                "timestep": float(md["timestep"])}

    def _write_frame(self) -> None:
        """This step's positions, velocities and images, and its thermo values as H5MD
        observables: one per frame, which is how MDAnalysis reads observables."""
        if self._last_frame == self.steps_done:
            return
        self._last_frame = self.steps_done
        last = self._thermo[-1] if self._thermo else None
        rec = last if last is not None and last["step"] == self.steps_done \
            else self._thermo_now()
        x, v, img = self.positions(), self.velocities(), self.images()  # collective
        if self.rank != 0:
            return
        writer = self._open_writer()
        t = self.steps_done * self.dt
        writer.write_frame(self.steps_done, t, x, v, img.astype(np.int32))
        writer.write_observables(self.steps_done, t, {
            name: rec[key] for name, key in FRAME_OBSERVABLES.items()})
        writer.flush()  # a run killed later (SIGKILL, node failure) keeps a readable file

    def _frame_interval(self, every: int | None) -> int:
        """``output.every``, or its default where it is null (see
        :func:`default_frame_interval`)."""
        if every is not None:
            return int(every)
        md, run = self.case["md"], self.case["run"]
        steps = int(md["steps"] if md.get("steps") is not None else run["steps"])
        frame_bytes = self.n_atoms * 3 * (2 * np.dtype(self.dtype).itemsize + 4)
        return default_frame_interval(steps, frame_bytes)

    def open_output(self, directory: Path, out: dict[str, Any]) -> Callable[[], None]:
        """Hook for :func:`simsplit.run.output.attach_output`: frames go to
        ``<dir>/trajectory.h5md`` and thermo rows to ``<dir>/thermo.csv`` from :meth:`step`;
        returns what the run calls at its end (the final frame, then closing the files)."""
        self.output_dir = Path(directory)
        self.output_every = self._frame_interval(out.get("every"))

        def finish() -> None:
            self._write_frame()
            self.close()

        return finish

    def close(self) -> None:
        """Close the trajectory and thermo files, if open (call once, at the very end)."""
        if self._thermo_log is None and self._writer is None:
            return
        for f in (self._thermo_log, self._writer):
            if f is not None:
                f.close()
        self._thermo_log = self._writer = None
        self._resume_step = self.steps_done  # a later run continues the same files

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
        if self.arena is not None:
            out["atoms_per_slab"] = self.arena.atoms_per_slab()
            out["ghosts_per_slab"] = self.arena.ghosts_per_slab()
            if hasattr(self.arena, "interior"):  # this rank's rows whose lists hold no ghost
                out["interior_rows"] = int(np.diff(self.arena.interior)[0])
                out["message_rounds"] = self.arena.rounds  # per rebuild (rank_rounds)
                out["relayed_ghosts"] = self.arena.relayed
                out["rebuild_phase_seconds"] = dict(self.arena.phase_seconds)
                #: the per-step ghosts went device to device (rank_links), in batches
                out["device_links"] = self.arena.device_links is not None
        if self._comm is not None:
            out["migrations"] = int(self._comm.allreduce(int(out["migrations"])))
            out["ghosts"] = int(self._comm.allreduce(int(out["ghosts"])))
            if "relayed_ghosts" in out:
                out["relayed_ghosts"] = int(self._comm.allreduce(out["relayed_ghosts"]))
            out["atoms_per_slab"] = [n for part in self._comm.allgather(out["atoms_per_slab"])
                                     for n in part]
        out["slab_edges"] = self.layout.edges.tolist()
        #: how this process refreshes ghosts between rebuilds on GPUs (see GhostLink.mode)
        out["ghost_transfer"] = ([self.arena.transfer] if self.arena is not None else
                                 sorted({link.mode for link in self._links.values()}))
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
            **({} if self.thermostat is None else {"thermostat": self.thermostat.state()}),
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
        if self.thermostat is not None and "thermostat" in state:
            self.thermostat.load(state["thermostat"])
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
        self._outputs_pending = True  # this step's frame, if due and not in the file already
