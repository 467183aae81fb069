"""GPU monitoring attached to a run: :func:`attach_monitor` samples the GPUs a simulation uses
(through :mod:`simsplit.gpu.monitor`) from its start to its end and writes the series."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from simsplit.gpu.monitor import CPU_NOTE, GpuMonitor, NvmlSampler, Sampler, merge_summaries
from simsplit.run.operations import RunningSimulation


def attach_monitor(sim: RunningSimulation, interval: float = 1.0,
                   sampler: Sampler | None = None) -> GpuMonitor | None:
    """Sample the GPUs ``sim`` runs on while it runs; None (and a note) on the cpu backend.

    The thread starts now and stops when the run ends; the summary lands in
    ``sim.monitor_summary`` and, with ``output.dir``, the series in ``monitor.h5`` and
    ``monitor.png`` (``monitor-rank<R>.*`` per rank under MPI).
    """
    ctx = sim.context
    if not ctx.on_gpu:
        if ctx.rank == 0:
            print(f"simsplit: note: {CPU_NOTE}", file=sys.stderr)
        return None
    n = int(sim.case["decomposition"]["subdomains"])
    devices = sorted({ctx.device_of(k) for k in ctx.local_slabs(n)})
    try:
        monitor = GpuMonitor(sampler or NvmlSampler(), devices, interval)
    except Exception as exc:  # no NVML here: the run itself must not fail for it
        print(f"simsplit: note: --monitor is off: {exc}", file=sys.stderr)
        return None
    sim.monitor = monitor
    out_dir = sim.case["output"]["dir"]
    stem = "monitor" if ctx.size == 1 else f"monitor-rank{ctx.rank}"

    def finish(status: str, _info: dict[str, Any]) -> None:
        monitor.stop()
        monitor.sampler.close()
        summary = monitor.summary()
        comm = getattr(ctx, "comm", None)
        if comm is not None and status == "completed":  # every rank is here: gather to rank 0
            parts = comm.gather(summary, root=0)
            if ctx.rank == 0:
                summary = merge_summaries(parts)
        sim.monitor_summary = summary
        if out_dir:
            directory = Path(out_dir)
            directory.mkdir(parents=True, exist_ok=True)
            monitor.write_h5(directory / f"{stem}.h5")
            monitor.write_png(directory / f"{stem}.png")

    sim.on_finish.append(finish)
    monitor.start()
    return monitor
