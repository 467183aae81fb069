"""GPU monitoring during a run: utilisation, memory, temperature, power and clocks through NVML.

A :class:`GpuMonitor` samples every used GPU at a fixed interval in a background thread through
a :class:`Sampler` (:class:`NvmlSampler` reads NVML via ``pynvml`` from ``nvidia-ml-py``; tests
pass a fake NVML module). At the end it summarises each GPU (mean and max of every quantity, the
temperature spread between cards) and writes the full series to ``monitor.h5`` and
``monitor.png``. ``simsplit run --monitor`` switches it on; on the cpu backend it is a no-op.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from simsplit.gpu import devices

#: sampled quantities: (name, unit)
QUANTITIES: tuple[tuple[str, str], ...] = (
    ("utilization", "%"), ("memory_used", "GiB"), ("temperature", "C"), ("power", "W"),
    ("sm_clock", "MHz"), ("memory_clock", "MHz"),
)
CPU_NOTE = "--monitor: the cpu backend has no GPU to sample; monitoring is off"


class Sampler(Protocol):
    """Reads the current state of one GPU (``device`` is a CUDA device id of this process)."""

    def name(self, device: int) -> str: ...

    def sample(self, device: int) -> dict[str, float]:
        """One value per :data:`QUANTITIES` name (NaN where the GPU does not report it)."""

    def close(self) -> None: ...


def nvml_handle(nvml: Any, device: int, env: Mapping[str, str] | None = None,
                pci_bus_id: str | None = None) -> Any:
    """NVML handle of CUDA device ``device``.

    NVML numbers every GPU of the machine and ignores ``CUDA_VISIBLE_DEVICES``, CUDA numbers
    only the visible ones: the PCI bus id (when known) or the visible list maps one to the other.
    """
    if pci_bus_id:
        return nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
    entry = devices.visible_entry(device, env)
    if entry is None:
        return nvml.nvmlDeviceGetHandleByIndex(device)
    if entry.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(entry))
    return nvml.nvmlDeviceGetHandleByUUID(entry)


class NvmlSampler:
    """:class:`Sampler` on NVML (``pynvml``, or an object with the same functions for tests)."""

    def __init__(self, nvml: Any = None, pci_bus_id: Callable[[int], str | None] | None = None
                 ) -> None:
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError as exc:
                raise RuntimeError("--monitor needs NVML bindings: pip install nvidia-ml-py "
                                   f"(part of simsplit[gpu]): {exc}") from None
        self.nvml = nvml
        self._bus_id = pci_bus_id or devices.pci_bus_id
        nvml.nvmlInit()
        self._handles: dict[int, Any] = {}

    def _handle(self, device: int) -> Any:
        if device not in self._handles:
            self._handles[device] = nvml_handle(self.nvml, device, pci_bus_id=self._bus_id(device))
        return self._handles[device]

    def name(self, device: int) -> str:
        name = self.nvml.nvmlDeviceGetName(self._handle(device))
        return name.decode() if isinstance(name, bytes) else str(name)

    def _read(self, fn: Callable[[], float]) -> float:
        try:
            return float(fn())
        except Exception:  # a quantity this GPU (or MIG slice) does not report
            return float("nan")

    def sample(self, device: int) -> dict[str, float]:
        n, h = self.nvml, self._handle(device)
        return {
            "utilization": self._read(lambda: n.nvmlDeviceGetUtilizationRates(h).gpu),
            "memory_used": self._read(lambda: n.nvmlDeviceGetMemoryInfo(h).used / 2**30),
            "temperature": self._read(
                lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            "power": self._read(lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0),  # mW -> W
            "sm_clock": self._read(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            "memory_clock": self._read(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
        }

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # already shut down: nothing to release
            pass


@dataclass
class GpuStats:
    device: int
    name: str
    samples: int
    mean: dict[str, float]
    max: dict[str, float]


class GpuMonitor:
    """Samples ``devices`` every ``interval`` seconds in a daemon thread between start and stop."""

    def __init__(self, sampler: Sampler, devices: Sequence[int], interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if interval <= 0:
            raise ValueError(f"monitor interval must be positive, not {interval}")
        self.sampler, self.devices, self.interval = sampler, list(devices), float(interval)
        self._clock = clock
        self.names = {d: sampler.name(d) for d in self.devices}
        self.times: list[float] = []
        self.values: dict[int, list[dict[str, float]]] = {d: [] for d in self.devices}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self._t0 = self._clock()
        self._thread = threading.Thread(target=self._loop, name="simsplit-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (one last sample is taken so short runs still have two)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample_once()

    def sample_once(self) -> None:
        try:
            row = {d: self.sampler.sample(d) for d in self.devices}
        except Exception as exc:  # NVML hiccup: note it, keep the run going
            if len(self.errors) < 10:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return
        self.times.append(self._clock() - self._t0)
        for d, values in row.items():
            self.values[d].append(values)

    def _loop(self) -> None:
        while True:
            self.sample_once()
            if self._stop.wait(self.interval):
                return

    # --- results -----------------------------------------------------------------------------
    def series(self, device: int) -> dict[str, np.ndarray]:
        rows = self.values[device]
        return {q: np.array([r.get(q, np.nan) for r in rows], dtype=np.float64)
                for q, _ in QUANTITIES}

    def stats(self) -> list[GpuStats]:
        out = []
        for d in self.devices:
            s = self.series(d)
            mean = {q: _nan_stat(np.nanmean, v) for q, v in s.items()}
            peak = {q: _nan_stat(np.nanmax, v) for q, v in s.items()}
            out.append(GpuStats(d, self.names[d], len(self.values[d]), mean, peak))
        return out

    def summary(self) -> dict[str, Any]:
        """Per GPU mean/max of every quantity, and the spread of mean and peak temperatures."""
        stats = self.stats()
        means = [s.mean["temperature"] for s in stats if np.isfinite(s.mean["temperature"])]
        peaks = [s.max["temperature"] for s in stats if np.isfinite(s.max["temperature"])]
        return {
            "interval_s": self.interval,
            "samples": len(self.times),
            "gpus": [{"device": s.device, "name": s.name, "samples": s.samples,
                      "mean": s.mean, "max": s.max} for s in stats],
            "temperature_spread_mean": (max(means) - min(means)) if means else float("nan"),
            "temperature_spread_max": (max(peaks) - min(peaks)) if peaks else float("nan"),
            "errors": list(self.errors),
        }

    def write_h5(self, path: Path) -> Path:
        """Full series: ``/time`` (s) and ``/gpu<id>/<quantity>``, names and units as attributes."""
        import h5py

        path = Path(path)
        with h5py.File(path, "w") as f:
            f.attrs["interval_s"] = self.interval
            f.create_dataset("time", data=np.asarray(self.times, np.float64))
            for d in self.devices:
                g = f.create_group(f"gpu{d}")
                g.attrs["device"], g.attrs["name"] = d, self.names[d]
                for q, unit in QUANTITIES:
                    ds = g.create_dataset(q, data=self.series(d)[q])
                    ds.attrs["unit"] = unit
        return path

    def write_png(self, path: Path) -> Path | None:
        """The series of every GPU, one panel per quantity (None with fewer than two samples)."""
        if len(self.times) < 2:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(3, 2, figsize=(11, 8), sharex=True)
        t = np.asarray(self.times)
        for ax, (q, unit) in zip(axes.flat, QUANTITIES, strict=True):
            for d in self.devices:
                ax.plot(t, self.series(d)[q], label=f"GPU {d}")
            ax.set(ylabel=f"{q.replace('_', ' ')} [{unit}]")
            ax.grid(alpha=0.3)
        for ax in axes[-1]:
            ax.set(xlabel="time [s]")
        axes[0, 0].legend()
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return Path(path)


def _nan_stat(fn: Callable[[np.ndarray], Any], values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(fn(finite)) if finite.size else float("nan")


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """Lines for the run summary: one per GPU, then the temperature spread."""
    lines = []
    for g in summary["gpus"]:
        m, x = g["mean"], g["max"]
        lines.append(
            f"monitor      GPU {g['device']} ({g['name']}): util {m['utilization']:.0f}% mean / "
            f"{x['utilization']:.0f}% max, memory {x['memory_used']:.1f} GiB max, "
            f"{m['temperature']:.0f} C mean / {x['temperature']:.0f} C max, "
            f"power {m['power']:.0f} W mean / {x['power']:.0f} W max, "
            f"SM {m['sm_clock']:.0f} MHz, mem {m['memory_clock']:.0f} MHz")
    if len(summary["gpus"]) > 1:
        lines.append(f"monitor      temperature spread between cards: "
                     f"{summary['temperature_spread_mean']:.1f} C (means), "
                     f"{summary['temperature_spread_max']:.1f} C (peaks)")
    for err in summary.get("errors", [])[:3]:
        lines.append(f"monitor      sampling error: {err}")
    return lines


def merge_summaries(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    gpus = [dict(g, rank=r) for r, p in enumerate(parts) for g in p["gpus"]]
    means = [g["mean"]["temperature"] for g in gpus if np.isfinite(g["mean"]["temperature"])]
    peaks = [g["max"]["temperature"] for g in gpus if np.isfinite(g["max"]["temperature"])]
    return {"interval_s": parts[0]["interval_s"], "samples": max(p["samples"] for p in parts),
            "gpus": gpus,
            "temperature_spread_mean": (max(means) - min(means)) if means else float("nan"),
            "temperature_spread_max": (max(peaks) - min(peaks)) if peaks else float("nan"),
            "errors": [e for p in parts for e in p["errors"]]}


def device_lines(devices: Sequence[int],
                 properties: Callable[[int], Mapping[str, Any] | None],
                 env: Mapping[str, str] | None = None) -> list[str]:
    """One line per used GPU: id, model and memory (models may differ between cards).

    ``properties(d)`` is :meth:`Backend.device_properties` of the backend on GPU ``d``: None
    means the backend simulates the GPU on the host (Numba's CUDA simulator).
    """
    env = os.environ if env is None else env
    lines = []
    for d in devices:
        p = properties(d)
        if p is None:
            lines.append(f"GPU {d}: simulated on the host (Numba's CUDA simulator)")
            continue
        lines.append(f"GPU {d}: {p['name']}, {p['total_memory'] / 2**30:.1f} GiB, "
                     f"compute capability {p['compute_capability']}")
    if "CUDA_VISIBLE_DEVICES" in env:
        lines.append(f"(GPU ids count the visible devices: CUDA_VISIBLE_DEVICES="
                     f"{env['CUDA_VISIBLE_DEVICES']})")
    return lines
