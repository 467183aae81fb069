"""D2Q9 lattice Boltzmann on a slab decomposition: set-up from a case, time loop, global fields.

The solver owns the blocks of this process and drives them through a transport; it does not
know which device or transport it runs on, and the blocks do not know there are others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simsplit.decomp.slabs import HIGH, LOW, DecompositionError, SlabDecomposition
from simsplit.fluid.block import D2Q9Block, Face
from simsplit.fluid.params import D2Q9Params, check_stability, relaxation_rates
from simsplit.parallel import ParallelContext

#: smallest slab: the overlap scheme updates the two face rows apart from the interior
MIN_SLAB_ROWS = 2
#: physical bounds in lattice units: density near 1, speed below the lattice speed of sound
RHO_BOUNDS = (0.5, 1.5)
MAX_SPEED = 3**-0.5


class DivergenceError(RuntimeError):
    """The run produced non-finite or unphysical values."""

    def __init__(self, step: int, slab: int, detail: str) -> None:
        super().__init__(f"run diverged at step {step} in subdomain {slab}: {detail}")
        self.step, self.slab, self.detail = step, slab, detail


@dataclass
class FluidSetup:
    nx: int
    ny: int
    params: D2Q9Params
    lid: bool
    periodic_y: bool
    dtype: np.dtype

    @property
    def velocity_scale(self) -> float:
        """Velocities are reported in units of the lid speed (lattice units without a lid)."""
        return self.params.lid_velocity if self.lid and self.params.lid_velocity else 1.0


def setup_from_case(case: dict[str, Any]) -> FluidSetup:
    fluid, domain = case["fluid"], case["domain"]
    nx, ny = domain["shape"]
    bounds = domain["boundaries"]
    lid = bool(bounds["lid"])
    u_lid = float(fluid["lid_velocity"]) if lid else 0.0
    if fluid.get("viscosity") is not None:
        nu = float(fluid["viscosity"])
    else:
        nu = u_lid * nx / float(fluid["reynolds"])
    om_p, om_m = relaxation_rates(nu, fluid["collision"], float(fluid["trt_magic"]))
    check_stability(1.0 / om_p, u_lid)
    fx, fy = (float(v) for v in fluid["body_force"])
    params = D2Q9Params(om_p, om_m, u_lid, fx, fy, bounds["x"] == "periodic")
    dtype = np.dtype(case["run"]["precision"])
    return FluidSetup(nx, ny, params, lid, bounds["y"] == "periodic", dtype)


class FluidSolver:
    """All slabs of one D2Q9 run that live in this process, and their time loop."""

    def __init__(self, case: dict[str, Any], context: ParallelContext) -> None:
        self.case, self.context = case, context
        self.setup = s = setup_from_case(case)
        dec = case["decomposition"]
        try:
            self.decomposition = SlabDecomposition(
                s.ny, int(dec["subdomains"]), dec.get("weights"), s.periodic_y, MIN_SLAB_ROWS
            )
        except DecompositionError as exc:
            raise DecompositionError(f"decomposition.subdomains: {exc}") from None
        n = len(self.decomposition)
        self.transport = context.transport(self.decomposition.links(), n)
        self.blocks: dict[int, D2Q9Block] = {}
        for k in context.local_slabs(n):
            slab = self.decomposition.slabs[k]
            faces = tuple(self._face_kind(slab.neighbours[f], f) for f in (LOW, HIGH))
            self.blocks[k] = D2Q9Block(
                context.backend_for(k), s.nx, slab.size, slab.start, faces, s.params, s.dtype
            )
        self.steps_done = 0
        self._u_prev: dict[int, tuple[Any, Any]] | None = None

    def _face_kind(self, neighbour: int | None, face: int) -> Face:
        if neighbour is not None:
            return Face.HALO
        return Face.LID if (face == HIGH and self.setup.lid) else Face.WALL

    # --- time loop ------------------------------------------------------------------------------
    def exchange_halos(self) -> None:
        send, recv = {}, {}
        for k, blk in self.blocks.items():
            for face in blk.halo_faces():
                send[(k, face)] = blk.pack(face)
                recv[(k, face)] = blk.recv[face]
        self.transport.exchange(send, recv)
        for blk in self.blocks.values():
            for face in blk.halo_faces():
                blk.unpack(face)

    def step(self, n: int = 1) -> None:
        """Advance ``n`` time steps; macroscopic fields are stored on the last one."""
        for s in range(n):
            self.exchange_halos()
            last = s == n - 1
            for blk in self.blocks.values():
                blk.stream_collide(store_macro=last)
                blk.swap()
            self.steps_done += 1

    def synchronize(self) -> None:
        for blk in self.blocks.values():
            blk.backend.synchronize()

    # --- convergence and health ----------------------------------------------------------------------
    def residual(self) -> float:
        """Relative change of velocity since the previous call: max|u - u_prev| / max|u|.

        Max-norms are exact under any reduction order, so every split stops on the same step.
        """
        diff = umax = 0.0
        prev = self._u_prev or {}
        new_prev = {}
        for k, blk in self.blocks.items():
            be = blk.backend
            umax = max(umax, be.max_abs(blk.ux), be.max_abs(blk.uy))
            if k in prev:
                diff = max(diff, be.max_abs_diff(blk.ux, prev[k][0]),
                           be.max_abs_diff(blk.uy, prev[k][1]))
            new_prev[k] = (blk.ux.copy(), blk.uy.copy())
        first = self._u_prev is None
        self._u_prev = new_prev
        diff = self.transport.allreduce_max(diff)
        umax = self.transport.allreduce_max(umax)
        if first:
            return float("inf")
        return diff / umax if umax > 0 else (0.0 if diff == 0 else float("inf"))

    def check_health(self) -> None:
        """Raise :class:`DivergenceError` naming the step, slab and cell of the first bad value."""
        for k, blk in self.blocks.items():
            be = blk.backend
            if all(be.all_finite(a) for a in (blk.rho, blk.ux, blk.uy)):
                rho_lo, rho_hi = be.minmax(blk.rho)
                speed = max(be.max_abs(blk.ux), be.max_abs(blk.uy))
                if RHO_BOUNDS[0] < rho_lo and rho_hi < RHO_BOUNDS[1] and speed < MAX_SPEED:
                    continue
            self._raise_divergence(k, blk)

    def _raise_divergence(self, k: int, blk: D2Q9Block) -> None:
        rho, ux, uy = (blk.backend.to_host(a) for a in (blk.rho, blk.ux, blk.uy))
        bad = ~np.isfinite(rho) | ~np.isfinite(ux) | ~np.isfinite(uy)
        bad |= (rho <= RHO_BOUNDS[0]) | (rho >= RHO_BOUNDS[1])
        bad |= (np.abs(ux) >= MAX_SPEED) | (np.abs(uy) >= MAX_SPEED)
        j, i = np.argwhere(bad)[0]
        raise DivergenceError(
            self.steps_done, k,
            f"cell (i={i}, j={j + blk.row0}) has density {rho[j, i]:.4g}, "
            f"velocity ({ux[j, i]:.4g}, {uy[j, i]:.4g}) in lattice units",
        )

    # --- global fields ----------------------------------------------------------------------------------
    def _gather(self, pick) -> np.ndarray:
        pieces = {k: pick(blk) for k, blk in self.blocks.items()}
        allp = self.transport.gather(pieces)
        return np.concatenate([allp[k] for k in range(len(self.decomposition))], axis=0)

    def density(self) -> np.ndarray:
        return self._gather(lambda b: b.backend.to_host(b.rho))

    def velocity(self) -> np.ndarray:
        """Global velocity ``(ny, nx, 2)`` in units of the lid speed."""
        scale = self.setup.velocity_scale
        return self._gather(
            lambda b: np.stack([b.backend.to_host(b.ux), b.backend.to_host(b.uy)], axis=-1) / scale
        )

    def populations(self) -> np.ndarray:
        """Global post-collision populations ``(9, ny, nx)`` (for checkpoints)."""
        return np.concatenate(
            [p for _, p in sorted(self.transport.gather(
                {k: b.populations().transpose(1, 0, 2) for k, b in self.blocks.items()}
            ).items())], axis=0).transpose(1, 0, 2)

    def mlups_cells(self) -> int:
        return self.setup.nx * self.setup.ny
