"""``simsplit analyze``: g(r) of an ideal gas is 1 within its counting noise, an fcc crystal has
its shells at the right distances with 12 nearest neighbours from integrating g(r), the MSD of
ballistic motion is v^2 t^2 to round-off (also across box faces and with uneven frame spacing),
g(r) agrees with MDAnalysis' InterRDF on the same trajectory, and bad input is one line with
exit code 2."""

from __future__ import annotations

import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest

from simsplit.analysis.msd import mean_squared_displacement
from simsplit.analysis.rdf import radial_distribution
from simsplit.analysis.report import analyze
from simsplit.io.h5md import H5MDWriter, write_species
from simsplit.io.trajectory import open_trajectory
from simsplit.md.lattice import fcc_lattice, wrap_into_box
from simsplit.run.simulation import Simulation
from tests.conftest import ROOT


def _h5md(path: Path, box: np.ndarray, frames: list[tuple[int, np.ndarray]], dt: float = 0.005,
          typeid: np.ndarray | None = None, names: list[str] | None = None) -> Path:
    """A trajectory of unwrapped positions, written wrapped with image counts."""
    n = frames[0][1].shape[0]
    with H5MDWriter(path, n, box) as w:
        for step, unwrapped in frames:
            x, img = wrap_into_box(unwrapped.copy(), box)
            w.write_frame(step, step * dt, x, np.zeros_like(x), img.astype(np.int32))
    if typeid is not None:
        write_species(path, typeid, names or ["A", "B"])
    return path


def test_ideal_gas_rdf_is_one_within_counting_noise(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    box = np.array([10.0, 11.0, 12.0])
    n, nframes = 1500, 4
    typeid = (np.arange(n) % 3 == 0).astype(np.int32)  # 500 B, 1000 A
    path = _h5md(tmp_path / "gas.h5md", box,
                 [(k, rng.uniform(0, 1, (n, 3)) * box) for k in range(nframes)],
                 typeid=typeid)
    with open_trajectory(path) as traj:
        rdf = radial_distribution(traj, list(range(nframes)), r_max=5.0, bins=50)
    assert rdf.pairs() == [(0, 0), (0, 1), (1, 1)]
    keep = rdf.r > 0.5  # enough pairs per bin for a normal approximation
    shell = 4 / 3 * np.pi * (rdf.edges[1:] ** 3 - rdf.edges[:-1] ** 3)
    volume = float(np.prod(box))
    for a, b in rdf.pairs():
        partners = rdf.counts[b] - (a == b)
        expected = nframes * rdf.counts[a] * partners / volume * shell  # ordered pairs
        # a != b: each pair (i in a, j in b) once; a == b: each pair twice (both orders)
        sigma = 1 / np.sqrt(expected if a != b else expected / 2)
        z = (rdf.g[a, b] - 1) / sigma
        chi2 = float(np.mean(z[keep] ** 2))
        print(f"\ng {rdf.type_names[a]}-{rdf.type_names[b]}: mean {rdf.g[a, b][keep].mean():.5f}"
              f", max |z| {np.abs(z[keep]).max():.2f}, mean z^2 {chi2:.3f} over {keep.sum()} bins")
        assert np.abs(z[keep]).max() < 4.5
        assert 0.6 < chi2 < 1.5
        assert abs(rdf.g[a, b][keep].mean() - 1) < 0.01


def test_pair_search_with_each_cell_stencil_counts_what_brute_force_counts() -> None:
    from simsplit.analysis.rdf import _bin_pairs, _cells

    rng = np.random.default_rng(11)
    box = np.array([9.0, 10.0, 11.0])
    x = rng.uniform(0, 1, (400, 3)) * box
    typeid = rng.integers(0, 3, 400)
    r_max, bins = 2.0, 40
    d = x[None, :, :] - x[:, None, :]
    d -= box * np.rint(d / box)
    r = np.sqrt((d ** 2).sum(axis=2))
    i, j = np.triu_indices(400, 1)
    want = np.zeros((3, 3, bins), np.int64)
    for a in range(3):
        for b in range(3):
            sel = (typeid[i] == a) & (typeid[j] == b) | (typeid[i] == b) & (typeid[j] == a)
            want[a, b] = np.histogram(r[i, j][sel], bins=bins, range=(0, r_max))[0]
    want[np.arange(3), np.arange(3)] *= 2  # a == b: both orders
    fine, reach = _cells(box, r_max)
    assert reach == 2 and fine.tolist() == [9, 10, 11]
    for cells, reach in [(fine, 2), ((box // r_max).astype(np.int64), 1),
                         (np.ones(3, np.int64), 0)]:
        hist = np.zeros((3, 3, bins), np.int64)
        _bin_pairs(x, box, typeid, r_max, bins, cells, reach, hist)
        np.testing.assert_array_equal(hist, want, err_msg=f"reach {reach}")
    assert want.sum() > 1000


def test_fcc_shells_and_twelve_nearest_neighbours(tmp_path: Path) -> None:
    gsd_hoomd = pytest.importorskip("gsd.hoomd")
    from simsplit.io.gsd_trajectory import GSDWriter

    pos, box = fcc_lattice(0.8442, (6, 6, 6))  # 864 atoms, a = 1.6796
    a = (4 / 0.8442) ** (1 / 3)
    path = tmp_path / "fcc.gsd"
    w = GSDWriter(path, box, np.zeros(len(pos), np.int32), ["Ar"])
    w.write_frame(0, 0.0, pos, np.zeros_like(pos), np.zeros(pos.shape, np.int32))
    w.close()
    assert len(gsd_hoomd.open(path)) == 1
    result = analyze(path, tmp_path / "ana", r_max=4.9, bins=490, plots=False)
    rdf = result.rdf
    g, n = rdf.g[0, 0], rdf.coordination[0, 0]
    # the shells seen from atom 0 (every atom of a perfect crystal sees the same), by brute force
    d = pos - pos[0]
    d -= box * np.rint(d / box)
    r = np.sqrt((d ** 2).sum(axis=1))
    shells, sizes = np.unique(np.round(r[(r > 0) & (r < 4.9)], 9), return_counts=True)
    assert sizes[:4].tolist() == [12, 6, 24, 12]  # fcc: 12 nearest neighbours at a / sqrt 2
    assert shells[0] == pytest.approx(a / np.sqrt(2), rel=1e-9)
    occupied = np.flatnonzero(g > 0)
    want = np.unique(np.floor(shells / (4.9 / 490)).astype(int))
    print(f"\nfcc a = {a:.5f}: g > 0 in bins at r = {np.round(rdf.r[occupied], 3).tolist()}")
    assert occupied.tolist() == want.tolist()
    # integrating g(r) up to between the shells gives the running neighbour count: 12 first
    between = 0.5 * (shells[:-1] + shells[1:])
    at = [n[int(x / (4.9 / 490))] for x in between]
    print("coordination between shells:", np.round(at, 10).tolist())
    np.testing.assert_allclose(at, np.cumsum(sizes)[:-1], rtol=1e-12)
    assert at[0] == pytest.approx(12, rel=1e-12)
    # the peaks hold all of each shell: g there is its count over rho 4 pi r^2 dr (bin volume)
    dr = 4.9 / 490
    first = want[0]
    shell_volume = 4 / 3 * np.pi * ((first + 1) ** 3 - first ** 3) * dr ** 3
    # (GSD stores the box in float32: the volume differs from the float64 one by ~1e-7)
    assert g[first] == pytest.approx(12 / (863 / np.prod(box) * shell_volume), rel=1e-6)


def _ballistic(n: int, steps: list[int], dt: float, seed: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    box = np.array([6.0, 7.0, 8.0])
    x0 = rng.uniform(0, 1, (n, 3)) * box
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    speed = np.where(np.arange(n) % 2 == 0, 1.0, 2.0)  # type A speed 1, type B speed 2
    v = direction * speed[:, None]
    frames = [(s, x0 + v * (s * dt)) for s in steps]
    return box, frames, (np.arange(n) % 2).astype(np.int32)


@pytest.mark.parametrize("steps", [list(range(0, 401, 20)), [0, 10, 30, 60, 100, 150, 400]])
def test_ballistic_msd_is_v2_t2(tmp_path: Path, steps: list[int]) -> None:
    dt = 0.05  # type B travels 40 lengths: image counts carry the atoms across many boxes
    box, frames, typeid = _ballistic(300, steps, dt)
    path = _h5md(tmp_path / "ballistic.h5md", box, frames, dt=dt, typeid=typeid)
    with open_trajectory(path) as traj:
        assert traj.images(len(steps) - 1).max() >= 3
        msd = mean_squared_displacement(traj, list(range(len(steps))))
    lags = sorted({b - a for i, a in enumerate(steps) for b in steps[i + 1:]})
    assert msd.lag_steps.tolist() == lags
    t = np.asarray(lags) * dt
    np.testing.assert_allclose(msd.lag_time, t, rtol=1e-14)
    err_a = np.abs(msd.msd[0] / t ** 2 - 1).max()
    err_b = np.abs(msd.msd[1] / (4 * t ** 2) - 1).max()
    err = np.abs(msd.msd_all / (2.5 * t ** 2) - 1).max()
    print(f"\nballistic MSD, {len(lags)} lags: max relative error A {err_a:.1e}, B {err_b:.1e}, "
          f"all {err:.1e}")
    assert max(err_a, err_b, err) < 1e-12


def test_rdf_agrees_with_mdanalysis_interrdf(tmp_path: Path) -> None:
    mda = pytest.importorskip("MDAnalysis")
    from MDAnalysis.analysis.rdf import InterRDF

    case = {"physics": "md",
            "md": {"init_file": str(ROOT / "tests" / "data" / "lammps" / "data.onetype"),
                   "potential": {"shift": True}},
            "run": {"backend": "cpu", "steps": 40},
            "output": {"dir": str(tmp_path / "run"), "every": 4, "plots": False}}
    Simulation(case).run()
    path = tmp_path / "run" / "trajectory.h5md"
    result = analyze(path, tmp_path / "ana", r_max=4.0, bins=80, plots=False)
    ours = result.rdf.g[0, 0]
    n = int(result.rdf.counts[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = mda.Universe(str(path))
        theirs = InterRDF(u.atoms, u.atoms, nbins=80, range=(0.0, 4.0)).run()
    assert u.trajectory.n_frames == result.rdf.frames == 11
    np.testing.assert_allclose(theirs.results.bins, result.rdf.r, rtol=1e-6)
    # InterRDF divides by N^2 (self pairs land in its first bin), we by N (N - 1)
    scaled = ours * (n - 1) / n
    diff = np.abs(theirs.results.rdf[1:] - scaled[1:])
    peak = int(np.argmax(ours))
    print(f"\nInterRDF vs simsplit, 80 bins to r = 4, 11 frames: max |dg| {diff.max():.2e}, "
          f"first peak {theirs.results.rdf[peak]:.6f} vs {scaled[peak]:.6f} at r = "
          f"{result.rdf.r[peak]:.3f}")
    # MDAnalysis computes distances from float32 positions: a pair within ~1e-6 of a bin edge
    # may fall on the other side, which moves g by about 1 / (pairs per bin); nothing else
    assert diff.max() < 5e-3
    with h5py.File(tmp_path / "ana" / "analysis.h5") as h5:
        np.testing.assert_array_equal(h5["rdf/1-1/g"][()], ours)
        assert h5["msd/lag_steps"][()].tolist() == list(range(4, 41, 4))


def test_cli_writes_h5_and_plots_and_refuses_bad_input(tmp_path: Path, run_cli) -> None:
    rng = np.random.default_rng(1)
    box = np.array([8.0, 8.0, 8.0])
    _h5md(tmp_path / "t.h5md", box, [(s, rng.uniform(0, 8, (200, 3))) for s in (0, 5, 10)])
    res = run_cli("analyze", "t.h5md")
    assert res.returncode == 0, res.stderr
    assert "3 frames, 200 atoms" in res.stdout
    for name in ("analysis.h5", "rdf.png", "msd.png"):
        assert (tmp_path / "analysis" / name).stat().st_size > 0
    (tmp_path / "x.xyz").write_text("1\n\nAr 0 0 0\n")
    for args, message in [
        (["missing.gsd"], "missing.gsd: no such trajectory file"),
        (["x.xyz"], "unknown trajectory type '.xyz'"),
        (["t.h5md", "--rmax", "4.5"], "--rmax: 4.5 must be > 0 and at most half the shortest "
                                      "box edge (4)"),
        (["t.h5md", "--frames", "1:x"], "--frames: '1:x' is not a frame or START:STOP[:STEP]"),
        (["t.h5md", "--frames", "7"], "--frames: '7' is not a frame"),
        (["t.h5md", "--rmax", "-1"], "argument --rmax: '-1': expected a positive number"),
    ]:
        res = run_cli("analyze", *args)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
        assert message in res.stderr, res.stderr
