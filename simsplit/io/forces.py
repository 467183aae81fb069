"""Forces on bodies over a run: ``forces.h5`` (one group per body) and ``forces.png`` (drag
and lift coefficients against time)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simsplit.io.plots import _new_figure, _save


def write_forces(path: Path, steps: np.ndarray, series: Mapping[str, Mapping[str, np.ndarray]],
                 attrs: Mapping[str, Mapping[str, Any]], file_attrs: Mapping[str, Any]) -> Path:
    """``/step`` and, per body, ``/<name>/force_x``, ``force_y``, ``drag_coefficient``,
    ``lift_coefficient`` (NaN where no reference velocity defines them), with the body's
    ``attrs`` (reference length and velocity) on its group. Written to a temporary file and
    renamed, so a reader never sees half a file."""
    import h5py

    path = Path(path)
    tmp = path.with_suffix(".h5.tmp")
    with h5py.File(tmp, "w") as h5:
        h5.attrs.update({k: v for k, v in file_attrs.items() if v is not None})
        h5["step"] = np.asarray(steps, dtype=np.int64)
        for name, data in series.items():
            group = h5.create_group(name)
            for key, values in data.items():
                group[key] = np.asarray(values, dtype=np.float64)
            group.attrs.update({k: v for k, v in attrs[name].items() if v is not None})
    tmp.replace(path)
    return path


def plot_force_coefficients(steps: np.ndarray, drag: Mapping[str, np.ndarray],
                            lift: Mapping[str, np.ndarray], path: Path, xlabel: str = "step",
                            title: str = "") -> Path:
    """Two panels, drag and lift coefficient of each body against ``steps``; the last value
    in each legend."""
    fig = _new_figure((8.0, 6.0))
    axes = fig.subplots(2, 1, sharex=True)
    x = np.asarray(steps)
    late = x >= x[0] + (x[-1] - x[0]) / 4 if len(x) else x  # the start's transient aside
    for ax, series, label in ((axes[0], drag, "drag coefficient"),
                              (axes[1], lift, "lift coefficient")):
        spans = []
        for name, values in series.items():
            y = np.asarray(values, dtype=np.float64)
            last = f" (last {y[-1]:.5g})" if len(y) else ""
            ax.plot(x, y, label=f"{name}{last}")
            tail = y[late][np.isfinite(y[late])] if len(y) else y
            if len(tail):
                spans.append((tail.min(), tail.max()))
        if spans and len(x) > 4:  # scale to the last three quarters (an impulsive start's
            lo, hi = min(a for a, _ in spans), max(b for _, b in spans)  # spike would hide
            pad = max(0.15 * (hi - lo), 0.02 * max(abs(lo), abs(hi)), 1e-6)  # the rest)
            ax.set_ylim(lo - pad, hi + pad)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(loc="best")
    axes[1].set_xlabel(xlabel)
    if title:
        axes[0].set_title(title)
    return _save(fig, path)
