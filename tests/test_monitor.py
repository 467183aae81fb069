"""GPU monitor against a fake NVML: sampling thread, summary, HDF5 series, PNG, cpu no-op."""

from __future__ import annotations

import time
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from simsplit.gpu import monitor as mon
from tests.conftest import fluid_case


class FakeNVML:
    """The few ``pynvml`` functions the sampler calls; GPU ``i`` runs at 40 + 10 i degrees."""

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2

    def __init__(self, names: list[str]) -> None:
        self.names, self.calls, self.inited = names, 0, 0
        self.by_uuid = {f"GPU-{i:04d}": i for i in range(len(names))}

    def nvmlInit(self) -> None:
        self.inited += 1

    def nvmlShutdown(self) -> None:
        self.inited -= 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return self.by_uuid[uuid]

    def nvmlDeviceGetHandleByPciBusId(self, bus: str) -> int:
        return int(bus.split(":")[1], 16)

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return self.names[h].encode()

    def nvmlDeviceGetUtilizationRates(self, h: int):
        self.calls += 1
        return SimpleNamespace(gpu=90 + h, memory=50)

    def nvmlDeviceGetMemoryInfo(self, h: int):
        return SimpleNamespace(used=(h + 1) * 2**30, total=80 * 2**30)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 40 + 10 * h

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 300_000 + 1000 * h  # milliwatts

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        if h == 1 and clock == self.NVML_CLOCK_MEM:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 1980 if clock == self.NVML_CLOCK_SM else 2619


def _sampler(n: int = 2) -> mon.NvmlSampler:
    return mon.NvmlSampler(FakeNVML(["NVIDIA H200", "NVIDIA H100 80GB HBM3"][:n]),
                           pci_bus_id=lambda d: None)


def _monitor(tmp_path=None) -> mon.GpuMonitor:
    m = mon.GpuMonitor(_sampler(), [0, 1], interval=0.01)
    m.start()
    assert m.running
    time.sleep(0.15)
    m.stop()
    assert not m.running
    return m


def test_thread_samples_and_stops() -> None:
    m = _monitor()
    n = len(m.times)
    assert n >= 3 and all(len(v) == n for v in m.values.values())
    assert np.all(np.diff(m.times) >= 0)
    time.sleep(0.05)
    assert len(m.times) == n  # nothing after stop


def test_summary_numbers_and_temperature_spread() -> None:
    s = _monitor().summary()
    g0, g1 = s["gpus"]
    assert (g0["name"], g1["name"]) == ("NVIDIA H200", "NVIDIA H100 80GB HBM3")  # mixed models
    assert g0["mean"]["utilization"] == 90 and g1["max"]["utilization"] == 91
    assert g1["max"]["memory_used"] == pytest.approx(2.0)
    assert g0["mean"]["power"] == pytest.approx(300.0)
    assert g0["mean"]["memory_clock"] == 2619 and np.isnan(g1["mean"]["memory_clock"])
    assert s["temperature_spread_mean"] == pytest.approx(10.0)
    assert s["temperature_spread_max"] == pytest.approx(10.0)
    lines = mon.summary_lines(s)
    assert len(lines) == 3 and "GPU 1 (NVIDIA H100 80GB HBM3)" in lines[1]
    assert "temperature spread between cards: 10.0 C" in lines[2]


def test_hdf5_round_trip_and_png(tmp_path) -> None:
    m = _monitor()
    m.write_h5(tmp_path / "monitor.h5")
    with h5py.File(tmp_path / "monitor.h5") as f:
        np.testing.assert_array_equal(f["time"][...], m.times)
        assert f["gpu1"].attrs["name"] == "NVIDIA H100 80GB HBM3"
        assert f["gpu1/temperature"].attrs["unit"] == "C"
        for q, _ in mon.QUANTITIES:
            np.testing.assert_array_equal(f[f"gpu0/{q}"][...], m.series(0)[q])
    png = m.write_png(tmp_path / "monitor.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cuda_ids_map_to_nvml_handles() -> None:
    nvml = FakeNVML(["a", "b", "c", "d"])
    assert mon.nvml_handle(nvml, 1, env={}) == 1
    assert mon.nvml_handle(nvml, 1, env={"CUDA_VISIBLE_DEVICES": "3,2"}) == 2
    assert mon.nvml_handle(nvml, 0, env={"CUDA_VISIBLE_DEVICES": "GPU-0003"}) == 3
    assert mon.nvml_handle(nvml, 0, env={}, pci_bus_id="00000000:1B:00.0") == 0x1B


def test_device_lines_mixed_models() -> None:
    props = {0: {"name": "NVIDIA H200", "total_memory": 141 * 2**30, "compute_capability": "9.0"},
             1: {"name": "NVIDIA L4", "total_memory": 24 * 2**30, "compute_capability": "8.9"},
             2: None}
    lines = mon.device_lines([0, 1, 2], props.__getitem__, env={"CUDA_VISIBLE_DEVICES": "4,5"})
    assert lines[0] == "GPU 0: NVIDIA H200, 141.0 GiB, compute capability 9.0"
    assert lines[1].startswith("GPU 1: NVIDIA L4, 24.0 GiB")
    assert lines[2] == "GPU 2: simulated on the host (Numba's CUDA simulator)"
    assert "CUDA_VISIBLE_DEVICES=4,5" in lines[3]


def test_cpu_backend_is_a_noop_with_one_note(capsys) -> None:
    from simsplit.run.simulation import Simulation

    sim = Simulation(fluid_case(16, 16, run__steps=4))
    assert sim.enable_monitor(0.01) is None
    sim.run(output=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"simsplit: note: {mon.CPU_NOTE}"]
    assert sim.monitor_summary is None


def test_attached_to_a_run_writes_files(tmp_path) -> None:
    """With a GPU context (faked), the run's end stops the thread and writes the series."""
    from simsplit.run.simulation import Simulation

    sim = Simulation(fluid_case(16, 16, 2, run__steps=40, output__dir=str(tmp_path / "out"),
                                output__plots=False))
    sim.context.backend_name = "cupy"  # pretend: only the monitor looks at it from here on
    sim.context.devices = [0, 1]
    m = sim.enable_monitor(0.005, _sampler())
    assert m is not None and m.running and m.devices == [0, 1]
    sim.context.backend_name = "cpu"
    sim.run(output=False)
    assert not m.running and m.sampler.nvml.inited == 0
    assert sim.monitor_summary is not None and len(sim.monitor_summary["gpus"]) == 2
    assert (tmp_path / "out" / "monitor.h5").is_file()
