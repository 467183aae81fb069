"""An animated GIF of a 2D field over a run (vorticity of the snapshots), written with Pillow:
each cell one pixel or more (nearest, so small grids stay sharp), solid cells grey, one colour
scale for every frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: frames no wider than this (pixels): a wide grid is shown at one pixel per cell, cropped never
MAX_WIDTH = 1200


def vorticity(velocity: np.ndarray) -> np.ndarray:
    """dv/dx - du/dy of a 2D velocity ``(ny, nx, 2)`` (cells, lattice units; central
    differences inside, one-sided at the edges)."""
    u = np.asarray(velocity, dtype=np.float64)
    return np.gradient(u[..., 1], axis=1) - np.gradient(u[..., 0], axis=0)


def write_gif(frames: list[np.ndarray], path: Path, solid: np.ndarray | None = None,
              seconds_per_frame: float = 0.1, cmap: str = "RdBu_r") -> Path:
    """Frames (2D arrays in array order, row 0 at the bottom) as an endlessly looping GIF; the
    colour scale is symmetric about 0, its limit the 99th percentile of |value| over the
    frames after the first tenth (a start's transient would wash the rest out)."""
    from matplotlib import colormaps
    from PIL import Image

    if not frames:
        raise ValueError("no frames to animate")
    tail = frames[len(frames) // 10:] or frames
    limit = float(np.nanpercentile(np.abs(np.stack(tail)), 99)) or 1.0
    ny, nx = frames[0].shape
    scale = max(1, min(8, MAX_WIDTH // nx))
    colours = colormaps[cmap]
    images = []
    for frame in frames:
        rgba = colours(np.clip(0.5 + 0.5 * frame / limit, 0, 1), bytes=True)
        if solid is not None:
            rgba[solid] = (110, 110, 110, 255)
        rgb = np.ascontiguousarray(rgba[::-1, :, :3])  # image rows run top-down
        img = Image.fromarray(rgb).resize((nx * scale, ny * scale), Image.NEAREST)
        images.append(img.convert("P", palette=Image.ADAPTIVE, colors=255))
    path = Path(path)
    images[0].save(path, save_all=True, append_images=images[1:], loop=0,
                   duration=int(1000 * seconds_per_frame), optimize=False)
    return path
