"""Cell flags: one byte per cell tells a kernel what a cell is and whether it borders a wall.

Solid kinds are bits of ``SOLID``; a fluid cell with at least one solid pull source carries
``NEAR_WALL`` so kernels read neighbour flags only there: interior cells cost one flag byte.
Open faces are ghost cells flagged ``INLET``, ``OUTLET`` or ``SLIP``: like walls they are
never updated and their populations never streamed, so ``BOUNDARY`` (every kind a pull source
may not be read from) is what kernels and ``NEAR_WALL`` test; ``SOLID`` stays the wall kinds.
"""

FLUID = 0
WALL = 1  #: resting wall (and every body): halfway bounce-back
LID = 2  #: wall moving in +x at the lid velocity: bounce-back with momentum transfer
SOLID = WALL | LID  #: mask of the solid kinds
NEAR_WALL = 4  #: fluid cell next to a pull source in BOUNDARY (never set on boundary cells)
INLET = 8  #: ghost cell of a velocity inlet: bounce-back with the inlet's velocity (Ladd)
OUTLET = 16  #: ghost cell of an outlet: its rule is domain.outlet.kind (params.outlet_kind)
#: ghost cell of a free-slip wall: specular reflection; which axes the wall is normal to, a
#: kernel reads from the flags beside the pulling cell (simsplit/numerics/lattice.py
#: specular_table, docs/bodies.md), so one flag serves every face, edge and slab split
SLIP = 64
BOUNDARY = SOLID | INLET | OUTLET | SLIP  #: every kind whose populations are not streamed
#: fluid cell with a link to a body that interpolated bounce-back (Bouzidi) treats: the kernel
#: reads that link's weight (simsplit/fluid/geometry/links.py) instead of bouncing halfway
CURVED = 32
#: the flags whose rules a box (walls and a lid only) never needs: GPU kernels compiled without
#: them run faster (their code sits in the near-wall branch), so blocks say whether they hold any
OPEN_RULES = INLET | OUTLET | SLIP | CURVED
#: the ghost kinds of open faces (a bodies kernel compiled without their rules never sees them)
OPEN_FACES = INLET | OUTLET | SLIP
