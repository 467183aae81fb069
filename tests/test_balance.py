"""Load balance: the pure weight arithmetic, the probe schedule, and balanced runs (one process
and ``mpiexec -n 2``) that pick a ~2:1 split for a 2x throttled slab and stay bitwise identical
to unbalanced runs. Wall-clock throughput is not asserted here (see scripts/bench_balance.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simsplit.case import CaseError, load_case
from simsplit.decomp.balance import (
    BalanceError,
    BalanceSchedule,
    BalanceSettings,
    balanced_weights,
    plan_balance,
    slab_speeds,
    step_time,
)
from simsplit.decomp.balancer import LoadBalancer
from simsplit.run.simulation import Simulation
from tests.conftest import fluid_case, mpirun, needs_mpiexec

ROOT = Path(__file__).resolve().parents[1]
#: slab 1 made 2x slower; its balanced weight relative to slab 0 should be near 1/2
THROTTLE = {"slab": 1, "factor": 2.0}
BALANCE = {"probe_steps": 12, "skip_steps": 2}
RATIO_TOLERANCE = 0.15  #: |w1 / w0 - 0.5| allowed (timings on a shared machine are noisy)


# --- pure arithmetic -------------------------------------------------------------------------
def test_weights_are_proportional_to_speed():
    assert balanced_weights([2.0, 1.0]) == pytest.approx([4 / 3, 2 / 3])
    assert balanced_weights([5.0, 5.0, 5.0]) == [1.0, 1.0, 1.0]
    with pytest.raises(BalanceError):
        balanced_weights([1.0, 0.0])


def test_speeds_are_cells_per_second_and_need_a_time():
    assert slab_speeds([100, 50], [2.0, 0.5], steps=4) == [200.0, 400.0]
    with pytest.raises(BalanceError, match="slab 1: no update time"):
        slab_speeds([100, 50], [1.0, 0.0], steps=4)


def test_step_time_models():
    assert step_time([10, 10], [10.0, 5.0], concurrent=True) == 2.0
    assert step_time([10, 10], [10.0, 5.0], concurrent=False) == 3.0


def test_plan_moves_layers_to_the_faster_slab():
    # slab 1 took twice as long for the same layers: it gets half as many
    plan = plan_balance(90, 10, [45, 45], [1.0, 2.0], steps=3, step=7, concurrent=True)
    assert plan.applied and plan.layers == [60, 30] and plan.layers_before == [45, 45]
    assert plan.weights == pytest.approx([4 / 3, 2 / 3])
    assert plan.predicted_gain == pytest.approx(2.0 / (60 / 45))
    assert plan.speeds == pytest.approx([3 * 450 / 1.0, 3 * 450 / 2.0])
    report = plan.to_dict()
    assert report["ideal_mlups"] == pytest.approx(sum(plan.speeds) / 1e6)
    assert report["step"] == 7 and report["layers"] == [60, 30]


def test_plan_keeps_split_below_min_gain_or_when_equal():
    same = plan_balance(90, 10, [45, 45], [1.0, 1.0], steps=3, step=0, concurrent=True)
    assert not same.applied and same.layers == [45, 45]
    small = plan_balance(90, 10, [45, 45], [1.0, 2.0], steps=3, step=0, concurrent=True,
                         min_gain=0.6)  # predicted 1.5 < 1.6
    assert not small.applied and small.layers == [45, 45]


def test_plan_respects_min_size_and_sequential_model():
    plan = plan_balance(20, 4, [10, 10], [1.0, 1000.0], steps=1, step=0, concurrent=False,
                        min_size=2)
    assert plan.layers == [18, 2] and plan.applied
    assert plan.predicted_gain > 1 and plan.ideal_cells_per_second == max(plan.speeds)


def test_settings_from_case():
    assert BalanceSettings.from_case(None) is None
    assert BalanceSettings.from_case({"probe_steps": 0}) is None
    s = BalanceSettings.from_case({"probe_steps": 5, "every": 10, "min_gain": 0.1})
    assert (s.probe_steps, s.skip_steps, s.every, s.min_gain) == (5, 2, 10, 0.1)
    with pytest.raises(BalanceError, match=r"decomposition.balance.every: 9 .* \(10\)"):
        BalanceSettings.from_case({"probe_steps": 5, "every": 9})


def test_schedule_once_and_repeated():
    once = BalanceSchedule(BalanceSettings(5, skip_steps=2), start=10)
    assert [once.events_at(s) for s in (12, 17, 22)] == [
        ["probe_start"], ["probe_end"], ["measure_end"]]
    assert once.events_at(13) == [] and once.next_event(10) == 12
    assert once.next_event(12) == 17 and once.next_event(22) is None
    again = BalanceSchedule(BalanceSettings(5, skip_steps=0, every=10), start=0)
    assert again.events_at(0) == ["probe_start"]
    assert again.events_at(10) == ["measure_end", "probe_start"]
    assert again.events_at(25) == ["probe_end"] and again.next_event(25) == 30


class FakeSolver:
    """A Balanceable whose slab 1 takes twice as long per layer as slab 0."""

    def __init__(self, fits: bool = True) -> None:
        self.layers, self.resplits, self.clock, self.fits = [20, 20], [], False, fits

    def slab_layers(self) -> list[int]:
        return list(self.layers)

    def layer_cells(self) -> int:
        return 8

    def balance_limits(self) -> tuple[int, int, bool]:
        return 40, 2, True

    def set_slab_clock(self, on: bool) -> None:
        self.clock = on

    def slab_step_seconds(self) -> list[float]:
        return [0.01 * self.layers[0], 0.02 * self.layers[1]]

    def reduce_max(self, value: float) -> float:
        return value

    def barrier(self) -> None:
        pass

    def split_fits(self, weights: list[float]) -> bool:
        return self.fits

    def resplit(self, weights: list[float]) -> None:
        self.resplits.append(weights)
        total = sum(weights)
        self.layers = [round(40 * w / total) for w in weights]


def test_balancer_drives_probe_resplit_and_measurement():
    bal, fake = LoadBalancer(BalanceSettings(4, skip_steps=1)), FakeSolver()
    step, chunks = 0, []
    while step < 12:
        bal.update(step, fake)
        n = bal.chunk(step, 12 - step)
        chunks.append(n)
        step += n
    bal.update(step, fake)
    assert chunks == [1, 4, 4, 3] and not fake.clock
    assert len(fake.resplits) == 1 and fake.layers == [27, 13]
    report = bal.report()
    assert report["applied"] and report["layers"] == [27, 13] and report["rebalances"] == 1
    assert set(report["measured"]) == {"mlups_before", "mlups_after", "gain", "resplit_seconds"}


def test_balancer_keeps_a_split_that_does_not_fit():
    bal, fake = LoadBalancer(BalanceSettings(4, skip_steps=0)), FakeSolver(fits=False)
    for step in (0, 4):
        bal.update(step, fake)
    report = bal.report()
    assert not fake.resplits and not report["applied"] and report["layers"] == [20, 20]
    assert "would not fit" in report["note"] and report["predicted_gain"] > 1


# --- runs ------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def one_numba_thread():
    """Time slabs on one thread: on a loaded machine, waking a parallel worker after the
    throttled slab's wait would be charged to whichever slab runs next."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


def _run(steps: int = 40, overlap: bool = True, **over: Any) -> Simulation:
    case = fluid_case(96, 128, over.pop("subdomains", 2), run__steps=steps,
                      run__overlap=overlap, **over)
    sim = Simulation(case)
    sim.run(output=False)
    return sim


def _assert_same_fields(a: Simulation, b: Simulation) -> None:
    assert np.array_equal(a.solver.populations(), b.solver.populations())
    assert np.array_equal(a.velocity(), b.velocity())
    assert np.array_equal(a.density(), b.density())


def _assert_near_two_to_one(report: dict[str, Any]) -> None:
    w0, w1 = report["weights"]
    assert abs(w1 / w0 - 0.5) < RATIO_TOLERANCE, report
    assert report["applied"] and report["layers"][1] < report["layers"][0]
    assert sum(report["layers"]) == 128


@pytest.mark.parametrize("overlap", [True, False])
def test_throttled_slab_gets_half_the_layers_and_results_do_not_change(overlap):
    plain = _run(overlap=overlap, subdomains=1)
    sim = _run(overlap=overlap, decomposition__balance=BALANCE, run__debug_throttle=THROTTLE)
    report = sim.solver.balance_report()
    _assert_near_two_to_one(report)
    assert sim.solver.slab_layers() == report["layers"]
    assert [b.layers for b in sim.solver.blocks.values()] == report["layers"]
    assert not report["concurrent"]  # one process: the slabs take turns on the CPU
    assert report["measured"]["mlups_after"] > 0
    _assert_same_fields(sim, plain)
    assert np.abs(plain.velocity()).max() > 0


def test_repeated_balancing_keeps_results():
    plain = _run(steps=60, subdomains=1)
    sim = _run(steps=60, decomposition__balance={"probe_steps": 6, "skip_steps": 1,
                                                  "every": 20},
               run__debug_throttle=THROTTLE)
    report = sim.solver.balance_report()
    assert len(report["history"]) == 2  # probes at steps 1, 21 and 41
    _assert_same_fields(sim, plain)


def test_unthrottled_balance_reports_without_changing_results():
    plain = _run(subdomains=3)
    sim = _run(subdomains=3, decomposition__balance={"probe_steps": 5, "skip_steps": 1,
                                                      "min_gain": 10.0})
    report = sim.solver.balance_report()
    assert not report["applied"] and report["layers"] == report["layers_before"]
    assert len(report["speeds_mlups"]) == 3 and min(report["speeds_mlups"]) > 0
    _assert_same_fields(sim, plain)


def test_run_ending_before_the_measurement_reports_the_split():
    from simsplit.run.report import balance_lines

    sim = _run(steps=20, decomposition__balance=BALANCE, run__debug_throttle=THROTTLE)
    report = sim.solver.balance_report()
    assert report["applied"] and set(report["measured"]) == {"resplit_seconds"}
    lines = balance_lines(report)
    assert len(lines) == 2 and lines[0].startswith("balance      re-split at step 14")


def test_cli_reports_the_split(tmp_path, capsys):
    from simsplit.cli.commands import main

    out = tmp_path / "out"
    args = ["run", str(ROOT / "cases" / "cavity.yaml"), "--quiet", "--backend", "cpu",
            "--set", "domain.shape=[48,64]", "--steps", "30", "--subdomains", "2",
            "--set", "output.plots=false", "--output", str(out),
            "--set", "decomposition.balance={probe_steps: 6, skip_steps: 1}",
            "--set", "run.debug_throttle={slab: 1, factor: 2}"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "balance      re-split at step 7: layers 32:32 -> " in text
    assert "slab speeds" in text and "measured" in text
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["balance"]["layers"][1] < manifest["balance"]["layers"][0]


@pytest.mark.parametrize(("over", "message"), [
    ({"run__debug_throttle": {"slab": 2}},
     "run.debug_throttle.slab: 2 is not allowed: expected a slab index below 2"),
    ({"decomposition__balance": {"probe_steps": 10, "every": 5}},
     "decomposition.balance.every: 5 is not allowed"),
])
def test_bad_settings_give_one_line_errors(over, message):
    with pytest.raises(CaseError, match=message.replace(".", r"\.")) as err:
        Simulation(fluid_case(16, 16, 2, **over))
    assert "\n" not in str(err.value)


def test_schema_checks_the_sections():
    with pytest.raises(CaseError, match="run.debug_throttle.factor: 0.5 is not allowed"):
        Simulation(fluid_case(16, 16, 2, run__debug_throttle={"slab": 0, "factor": 0.5}))
    with pytest.raises(CaseError, match="decomposition.balance.probe_step"):
        Simulation(fluid_case(16, 16, 2, decomposition__balance={"probe_step": 3}))


def test_md_refuses_balance():
    case = load_case(ROOT / "cases" / "lj_tiny.yaml",
                     {"decomposition.balance": {"probe_steps": 4}, "run.backend": "cpu"})
    with pytest.raises(CaseError, match="decomposition.balance: is not allowed for physics 'md'"):
        Simulation(case)


# --- mpiexec -n 2 ----------------------------------------------------------------------------
DRIVER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from simsplit.run.simulation import Simulation
    from tests.conftest import fluid_case

    case = fluid_case(96, 128, 2, run__steps=40, decomposition__balance=json.loads(sys.argv[1]),
                      run__debug_throttle=json.loads(sys.argv[2]))
    sim = Simulation(case)
    sim.run(output=False)
    report = sim.solver.balance_report()
    mine = {k: report[k] for k in ("weights", "layers", "layers_before", "applied",
                                   "concurrent", "step")}
    mine["blocks"] = [b.layers for b in sim.solver.blocks.values()]
    with open(f"{sys.argv[3]}.rank{sim.context.rank}.json", "w") as fh:  # ranks share stdout
        json.dump(mine, fh)
    pop, u, rho = sim.solver.populations(), sim.velocity(), sim.density()
    if sim.context.rank == 0:
        np.savez(sys.argv[3], populations=pop, velocity=u, density=rho)
""")


#: the ranks are two processes beside the other test worker on CI's two cores: one rank can be
#: slowed for the whole probe (a 1.45x slower rank 0 gave 0.73 for the 2x throttle's 0.5 on the
#: project's CI), so this test throttles 4x and asks only that the split move clearly towards
#: the fast rank; the 2:1 accuracy is asserted in one process, where both slabs share one core
MPI_THROTTLE = {"slab": 1, "factor": 4.0}
MPI_MAX_RATIO = 0.75  #: w1 / w0 below this (4x throttle: 0.25 ideally; 1.0 is no balancing)


@needs_mpiexec
def test_mpi_ranks_agree_on_the_balanced_split(tmp_path):
    script, out = tmp_path / "driver.py", tmp_path / "fields.npz"
    script.write_text(DRIVER)
    proc = mpirun(2, [str(script), json.dumps(BALANCE), json.dumps(MPI_THROTTLE), str(out)])
    assert proc.returncode == 0, proc.stderr
    reports = [json.loads(Path(f"{out}.rank{r}.json").read_text()) for r in (0, 1)]
    blocks = [r.pop("blocks") for r in reports]
    assert reports[0] == reports[1]  # every rank chose bitwise the same split
    report = reports[0]
    assert report["concurrent"] and report["layers_before"] == [64, 64]
    w0, w1 = report["weights"]
    assert w1 / w0 < MPI_MAX_RATIO, report
    assert report["applied"] and report["layers"][1] < report["layers"][0]
    assert sum(report["layers"]) == 128
    assert blocks == [[report["layers"][0]], [report["layers"][1]]]  # one slab per rank
    got, plain = np.load(out), _run(subdomains=1)
    assert np.array_equal(got["populations"], plain.solver.populations())
    assert np.array_equal(got["velocity"], plain.velocity())
    assert np.array_equal(got["density"], plain.density())
