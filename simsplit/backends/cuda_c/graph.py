"""Recording a sequence of launches once and replaying it: CUDA graphs, or plain calls.

``backend.capture(fn)`` returns a :class:`Replay`. Contract for ``fn``, whatever the backend:

* capture enqueues nothing: the work ``fn`` queues is done only by each ``replay()``;
* ``fn`` must leave Python-side state as it found it (an even number of buffer swaps), because
  a CUDA graph runs the Python code once, at capture, and a :class:`DirectReplay` at every
  replay;
* ``fn`` may not allocate, read device data back to the host or synchronise, and (CUDA graphs)
  must launch on the capturing backend's device only.

This module imports CuPy only inside :func:`capture_graph`.
"""

from __future__ import annotations

from typing import Any, Callable


class CudaGraphReplay:
    """A captured CUDA graph, launched on the current stream of its device."""

    def __init__(self, graph: Any, device: int) -> None:
        self.graph, self.device = graph, device

    def replay(self) -> None:
        import cupy

        with cupy.cuda.Device(self.device):
            self.graph.launch()


_capturing: list[int] = []  #: device whose stream is being captured (at most one)


def check_launch_device(device: int) -> None:
    """Refuse work on another device during a capture: it would run at once, unrecorded."""
    if _capturing and _capturing[0] != device:
        raise RuntimeError(
            f"graph capture on GPU {_capturing[0]} met work for GPU {device}: a captured "
            "sequence must stay on one device (replay such steps without capture)"
        )


def capture_graph(device: int, fn: Callable[[], object]) -> CudaGraphReplay:
    """Record everything ``fn`` queues on ``device``'s current stream into a CUDA graph."""
    import cupy

    if _capturing:
        raise RuntimeError("graph captures cannot nest")
    with cupy.cuda.Device(device):
        # capture needs a stream other than the legacy default one, which cannot be captured
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            _capturing.append(device)
            try:
                fn()
            except BaseException:
                try:
                    stream.end_capture()
                except Exception:  # the capture is already invalid; report fn's error
                    pass
                raise
            finally:
                _capturing.clear()
            graph = stream.end_capture()
    return CudaGraphReplay(graph, device)
