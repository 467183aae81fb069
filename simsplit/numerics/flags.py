"""Cell flags: one byte per cell tells a kernel what a cell is and whether it borders a wall.

Solid kinds are bits of ``SOLID``; a fluid cell with at least one solid pull source carries
``NEAR_WALL`` so kernels read neighbour flags only there: interior cells cost one flag byte.
"""

FLUID = 0
WALL = 1  #: resting wall: halfway bounce-back
LID = 2  #: wall moving in +x at the lid velocity: bounce-back with momentum transfer
SOLID = WALL | LID  #: mask of the solid kinds
NEAR_WALL = 4  #: fluid cell next to a solid pull source (never set on solid cells)
