"""PNG plots: files are valid images and plotting leaves matplotlib's global state alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import matplotlib.image as mpimg
import numpy as np
import pytest

import simsplit.io.plots
from simsplit.fluid.reference import compare_to_ghia, ghia_u_centreline
from simsplit.io.plots import _cavity_figure, plot_cavity, plot_series

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _vortex(ny: int, nx: int) -> np.ndarray:
    """Divergence-free single vortex plus a lid-like shear layer, shape (ny, nx, 2)."""
    x = (np.arange(nx) + 0.5) / nx
    y = (np.arange(ny) + 0.5) / ny
    xx, yy = np.meshgrid(x, y)
    u = 0.3 * np.sin(np.pi * xx) ** 2 * np.sin(2 * np.pi * yy) + yy**12
    v = -0.3 * np.sin(2 * np.pi * xx) * np.sin(np.pi * yy) ** 2
    return np.stack([u, v], axis=-1)


def _check_png(path, min_side=300, max_side=4000):
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    image = mpimg.imread(path)
    height, width = image.shape[:2]
    assert image.ndim == 3 and image.shape[2] in (3, 4)
    assert min_side <= height <= max_side and min_side <= width <= max_side
    # not a blank canvas
    assert np.ptp(image[..., :3]) > 0.5
    return image


@pytest.mark.parametrize("shape", [(64, 64), (33, 48)])
def test_plot_cavity_writes_png(tmp_path, shape):
    backend = matplotlib.get_backend()
    path = plot_cavity(
        _vortex(*shape),
        tmp_path / "sub" / "cavity.png",
        reynolds=100,
        reference=ghia_u_centreline(100),
        title="test cavity",
    )
    assert path == tmp_path / "sub" / "cavity.png"
    image = _check_png(path)
    assert image.shape[1] > image.shape[0]  # two panels side by side
    assert matplotlib.get_backend() == backend


def test_cavity_legend_reports_deviation_from_reference():
    velocity = _vortex(40, 40)
    fig = _cavity_figure(velocity, 1000, ghia_u_centreline(1000), "")
    legend_texts = [
        t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts
    ]
    expected = compare_to_ghia(velocity, 1000)["max_abs_error"]
    assert any("Ghia et al. (1982)" in t and f"{expected:.4f}" in t for t in legend_texts)
    assert fig._suptitle.get_text() == "Re = 1000"


def test_plot_cavity_without_reference_and_with_nan(tmp_path):
    velocity = _vortex(32, 32)
    velocity[5, 7] = np.nan
    _check_png(plot_cavity(velocity, tmp_path / "nan.png", reynolds=None))
    _check_png(plot_cavity(np.zeros((16, 16, 2)), tmp_path / "rest.png", reynolds=1000))


def test_plot_cavity_rejects_3d_velocity(tmp_path):
    with pytest.raises(ValueError):
        plot_cavity(np.zeros((4, 4, 4, 3)), tmp_path / "x.png", reynolds=None)


def test_plot_series(tmp_path):
    x = np.arange(50)
    path = plot_series(
        x,
        {"kinetic": np.sin(x / 5.0) + 2, "potential": np.cos(x / 5.0) + 2},
        tmp_path / "series.png",
        xlabel="step",
        ylabel="energy",
        title="thermo",
        logy=True,
    )
    _check_png(path)
    with pytest.raises(ValueError):
        plot_series(x, {"bad": x[:-1]}, tmp_path / "bad.png", "x", "y", "t")
    with pytest.raises(ValueError):
        plot_series(x, {}, tmp_path / "empty.png", "x", "y", "t")


def test_import_does_not_touch_matplotlib():
    code = (
        "import sys, simsplit.io, simsplit.io.plots, simsplit.fluid.reference\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported at import time'\n"
        "from simsplit.io import plot_cavity\n"
        "assert callable(plot_cavity)\n"
    )
    repo = Path(simsplit.io.plots.__file__).resolve().parents[2]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _titles(fig) -> list[str]:
    return [fig._suptitle.get_text()] + [ax.get_title() for ax in fig.axes]


def test_3d_midplane_plot_names_its_plane():
    from simsplit.io.plots import MIDPLANE, _midplane_figure

    velocity = np.zeros((8, 6, 10, 3))
    velocity[..., 0] = np.linspace(0.0, 1.0, 8)[:, None, None]
    fig = _midplane_figure(velocity, 100, None, "D3Q19 TRT, 10x6x8, step 5")
    titles = _titles(fig)
    assert MIDPLANE == "mid-plane y = 0.5"
    assert MIDPLANE in titles[0] and MIDPLANE in titles[1]  # figure and map
    assert "x = y = 0.5" in " ".join(titles)
    assert fig.axes[0].get_ylabel() == "z"
    flat = _titles(_cavity_figure(_vortex(16, 16), 100, None, "D2Q9"))
    assert not any("mid-plane" in t for t in flat)


def test_channel_profile_plot_reports_l2_error(tmp_path):
    from simsplit.io.plots import plot_channel_profile

    s = np.arange(16) + 0.5
    exact = 1e-3 * s * (16 - s)
    measured = exact * 1.01
    path = plot_channel_profile(s, measured, exact, tmp_path / "profile.png", ("x", "y"))
    _check_png(path)
    nan = plot_channel_profile(s, np.full(16, np.nan), exact, tmp_path / "nan.png")
    assert nan.stat().st_size > 0  # a diverged run is still plotted


def test_3d_plot_overlays_the_cube_reference_on_both_centrelines():
    from simsplit.fluid.reference import compare_to_cube, cube_centrelines
    from simsplit.io.plots import _midplane_figure

    velocity = np.zeros((12, 12, 12, 3))
    fig = _midplane_figure(velocity, 1000, cube_centrelines(1000), "D3Q19 TRT, 12x12x12")
    _, vertical, horizontal = fig.axes[:3]
    assert vertical.get_title() == "vertical centreline x = y = 0.5"
    assert horizontal.get_title() == "horizontal centreline y = z = 0.5"
    deviations = compare_to_cube(velocity, 1000)
    assert deviations["horizontal"]["max_abs_error"] == pytest.approx(0.43423)  # at rest
    for ax, line in ((vertical, "vertical"), (horizontal, "horizontal")):
        (legend,) = [t.get_text() for t in ax.get_legend().get_texts()
                     if "Albensoeder" in t.get_text()]
        assert legend.endswith(f"max |Δu| = {deviations[line]['max_abs_error']:.4f}"), legend
    without = _midplane_figure(velocity, 100, None, "D3Q19 TRT, 12x12x12")
    assert not any("Albensoeder" in t.get_text() for ax in without.axes[1:3]
                   for t in ax.get_legend().get_texts())


@pytest.mark.filterwarnings("ignore:fluid.reynolds")  # tau near 0.5 on a 16^3 grid
def test_3d_cube_run_at_re_1000_plots_and_reports_the_reference(tmp_path):
    """A closed cube at Re = 1000 through the output pipeline: velocity.png, and the summary
    names Albensoeder & Kuhlmann; at Re = 100 (no table) it names nobody."""
    from simsplit.run.report import summary_lines
    from simsplit.run.simulation import Simulation
    from tests.conftest import fluid_case

    walls = {"x": "wall", "y": "wall", "z": "wall", "lid": True}
    for reynolds in (1000, 100):
        out = tmp_path / f"re{reynolds}"
        case = fluid_case(domain__shape=[16, 16, 16], domain__boundaries=walls,
                          fluid__reynolds=reynolds, fluid__lid_velocity=0.05,
                          run__steps=20, output__dir=str(out))
        sim = Simulation(case)
        lines = summary_lines(sim, sim.run())
        _check_png(out / "velocity.png")
        cube = [line for line in lines if line.startswith("A&K 2005")]
        if reynolds == 1000:
            assert len(cube) == 1 and "(Re = 1000)" in cube[0], lines
        else:
            assert not cube and not any("Ghia" in line for line in lines), lines
