"""``simsplit analyze``: RDF and MSD of a trajectory, written to ``analysis.h5`` and plotted as
``rdf.png`` and ``msd.png``.

Layout of ``analysis.h5``::

    /          attrs: source (the trajectory), frames (indices used), steps (their steps)
    /rdf       edges (bins + 1,), r (bin centres); attrs: r_max, bins, frames, density, counts
    /rdf/<A>-<B>/g, /rdf/<A>-<B>/coordination    (bins,) for each type pair A <= B
    /msd       lag_steps (L,), lag_time (L,) if the file has times, pairs (frame pairs per lag),
               all (L,) and <A> (L,) per type
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from simsplit.analysis.msd import MSD, mean_squared_displacement
from simsplit.analysis.rdf import RDF, radial_distribution
from simsplit.errors import InputFileError
from simsplit.io.trajectory import Trajectory, open_trajectory


@dataclass
class Analysis:
    """What :func:`analyze` computed and where it wrote it."""

    rdf: RDF
    msd: MSD | None
    files: list[Path]


def select_frames(n_frames: int, spec: str | None) -> list[int]:
    """Frame indices from ``START:STOP[:STEP]`` (Python slice syntax; None: all frames)."""
    if spec is None:
        return list(range(n_frames))
    parts = spec.split(":")
    try:
        if len(parts) == 1:
            k = int(parts[0])
            return [range(n_frames)[k]]
        if len(parts) > 3:
            raise ValueError
        values = [int(p) if p.strip() else None for p in parts]
        return list(range(n_frames))[slice(*values)]
    except (ValueError, IndexError):
        raise InputFileError(f"--frames: '{spec}' is not a frame or START:STOP[:STEP] of "
                             f"{n_frames} frames") from None


def analyze(path: str | Path, output: str | Path | None = None, frames: str | None = None,
            r_max: float | None = None, bins: int = 200, plots: bool = True) -> Analysis:
    """RDF and MSD of the trajectory at ``path``, written to ``output`` (default: a directory
    ``analysis`` beside the trajectory)."""
    out = Path(path).parent / "analysis" if output is None else Path(output)
    with open_trajectory(path) as traj:
        chosen = select_frames(traj.n_frames, frames)
        if not chosen:
            raise InputFileError(f"--frames: '{frames}' selects none of {traj.n_frames} frames")
        rdf = radial_distribution(traj, chosen, r_max, bins)
        msd = mean_squared_displacement(traj, chosen) if len(chosen) > 1 else None
        out.mkdir(parents=True, exist_ok=True)
        files = [write_h5(out / "analysis.h5", traj, chosen, rdf, msd)]
    if plots:
        from simsplit.io.plots import plot_msd, plot_rdf

        title = Path(path).name
        files.append(plot_rdf(rdf.r, {f"{rdf.type_names[a]}-{rdf.type_names[b]}": rdf.g[a, b]
                                      for a, b in rdf.pairs()}, out / "rdf.png", title))
        if msd is not None:
            x = msd.lag_time if msd.lag_time is not None else msd.lag_steps.astype(float)
            curves = {"all": msd.msd_all}
            if len(msd.type_names) > 1:
                curves.update({n: msd.msd[t] for t, n in enumerate(msd.type_names)
                               if np.all(np.isfinite(msd.msd[t]))})
            files.append(plot_msd(x, curves, out / "msd.png", title,
                                  "lag time" if msd.lag_time is not None else "lag (steps)"))
    return Analysis(rdf, msd, files)


def write_h5(path: Path, traj: Trajectory, frames: list[int], rdf: RDF,
             msd: MSD | None) -> Path:
    """Write ``analysis.h5`` (layout in the module docstring)."""
    with h5py.File(path, "w") as h5:
        h5.attrs["source"] = str(traj.path)
        h5.attrs["frames"] = np.asarray(frames, np.int64)
        h5.attrs["steps"] = traj.steps[frames]
        g = h5.create_group("rdf")
        g["edges"], g["r"] = rdf.edges, rdf.r
        g.attrs.update({"r_max": rdf.edges[-1], "bins": rdf.r.size, "frames": rdf.frames,
                        "density": rdf.density, "counts": rdf.counts,
                        "type_names": rdf.type_names})
        for a, b in rdf.pairs():
            sub = g.create_group(f"{rdf.type_names[a]}-{rdf.type_names[b]}")
            sub["g"], sub["coordination"] = rdf.g[a, b], rdf.coordination[a, b]
        if msd is not None:
            m = h5.create_group("msd")
            m["lag_steps"], m["pairs"], m["all"] = msd.lag_steps, msd.pairs, msd.msd_all
            if msd.lag_time is not None:
                m["lag_time"] = msd.lag_time
            for t, name in enumerate(msd.type_names):
                if rdf.counts[t]:
                    m[name] = msd.msd[t]
    return path
