"""The time-loop breakdown: phases accumulate, the summary carries it, it prints and serialises."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from simsplit.case import load_case
from simsplit.simulation import Simulation
from simsplit.timing import PHASES, PhaseTimer, TimingBreakdown

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
