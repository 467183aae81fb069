"""The time-loop breakdown: phases accumulate, the summary carries it, it prints and serialises."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from simsplit.case import load_case
from simsplit.gpu.timing import PHASES, PhaseTimer, TimingBreakdown
from simsplit.run.simulation import Simulation

CASE = Path(__file__).resolve().parents[1] / "cases" / "cavity.yaml"


@pytest.fixture(autouse=True)
def _one_numba_thread():
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


def test_phases_accumulate_and_sync_runs_at_each_phase_end():
    syncs = []
    timer = PhaseTimer(sync=lambda: syncs.append(1))
    for _ in range(3):
        with timer.phase("compute"):
            time.sleep(0.002)
    with timer.phase("wait"):
        pass
    assert timer.seconds["compute"] >= 0.006 and len(syncs) == 4 and timer.synchronised
    out = timer.breakdown(wall=1.0)
    assert out["other"] == pytest.approx(1.0 - sum(out[p] for p in PHASES[:-1]))
    timer.reset()
    assert all(v == 0.0 for v in timer.seconds.values())


def test_a_failing_phase_is_still_charged():
    timer = PhaseTimer()
    with pytest.raises(ValueError), timer.phase("exchange"):
        time.sleep(0.001)
        raise ValueError
    assert timer.seconds["exchange"] > 0 and not timer.synchronised


def test_breakdown_uses_the_slowest_rank_and_prints_one_line():
    timer = PhaseTimer()
    timer.seconds["compute"] = 1.0
    out = timer.breakdown(wall=2.0, reduce_max=lambda x: 2 * x, ranks=3)
    assert out["compute"] == 2.0 and out["wall"] == 4.0 and out["ranks"] == 3
    text = str(out)
    assert text.startswith("compute 2.000 s (50%)") and "\n" not in text and "host timers" in text
    assert json.loads(json.dumps(out.to_dict()))["compute"] == 2.0


@pytest.mark.parametrize("overlap", [True, False])
def test_run_summary_carries_the_timing_breakdown(overlap):
    case = load_case(CASE, ["run.backend=cpu", "domain.shape=[16,16]", "output.dir=null",
                            "run.steps=40", "run.check_every=20", "decomposition.subdomains=2",
                            f"run.overlap={str(overlap).lower()}", "run.timing=true"])
    summary = Simulation(case).run(output=False)
    timing = summary.extra["timing"]
    assert isinstance(timing, TimingBreakdown) and set(PHASES) <= set(timing)
    assert timing["compute"] > 0 and timing["pack"] > 0 and timing["synchronised"]
    assert sum(timing[p] for p in PHASES) == pytest.approx(summary.wall_seconds, rel=1e-6)


class _FakeClock:
    """Timestamps are host times; counts the records and the waits."""

    def __init__(self, skew: float = 0.0) -> None:
        self.records = 0
        self.skew = skew

    def record(self) -> float:
        self.records += 1
        return time.perf_counter()

    def elapsed(self, start: float, end: float) -> float:
        return end - start + self.skew


def test_device_clocks_time_each_phase_without_synchronising():
    syncs = []
    fast, slow = _FakeClock(), _FakeClock(skew=0.5)
    timer = PhaseTimer(clocks=[fast, slow])
    for _ in range(2):
        with timer.phase("compute"):
            time.sleep(0.002)
    with timer.phase("wait"):
        syncs.append(1)
    assert fast.records == slow.records == 6 and not timer.synchronised
    dev = timer.device_seconds()
    assert dev["compute"] == pytest.approx(1.0 + timer.seconds["compute"], abs=1e-3)  # slowest
    assert dev["wait"] == pytest.approx(0.5, abs=1e-3) and dev["pack"] == 0.0
    out = timer.breakdown(wall=3.0)
    assert out["clock"] == "device" and out["compute"] == dev["compute"]
    assert out["host"]["compute"] == pytest.approx(timer.seconds["compute"])
    assert "device events" in str(out)
    timer.reset()
    assert timer.device_seconds()["compute"] == 0.0


def test_device_timing_on_the_cpu_backend_falls_back_to_synchronised_host_timers():
    case = load_case(CASE, ["run.backend=cpu", "domain.shape=[16,16]", "output.dir=null",
                            "run.steps=20", "run.check_every=20", "decomposition.subdomains=2",
                            "run.timing=device"])
    timing = Simulation(case).run(output=False).extra["timing"]
    assert timing["synchronised"] and "clock" not in timing and timing["compute"] > 0
