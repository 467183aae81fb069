"""Cell flags: one byte per cell tells a kernel whether a pull source is fluid or a wall."""

FLUID = 0
WALL = 1  #: resting wall: halfway bounce-back
LID = 2  #: wall moving in +x at the lid velocity: bounce-back with momentum transfer
