"""What the command line says on stderr besides errors: warnings, each once per run, and a
notice while Numba compiles the CPU kernels for the first time.

Lines go through ``tqdm.write`` so that a progress bar on stderr is redrawn below them instead
of being cut in two.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from simsplit.errors import CaseWarning

COMPILE_NOTICE = "simsplit: compiling kernels (first run only, cached afterwards)"


def say(line: str) -> None:
    """One line on stderr, above the progress bar if one is showing."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def print_warnings_once(rank: int = 0) -> None:
    """Show warnings as ``simsplit: warning: TEXT`` (no source line), each text once.

    The case is validated more than once per run (loading it, building the simulation, once
    more under mpiexec), and each pass warns again. Under mpiexec every rank reads the same
    case, so its warnings (:class:`~simsplit.errors.CaseWarning`) come from rank 0 alone.
    """
    shown: set[str] = set()

    def show(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = str(message)
        if text in shown or (rank != 0 and issubclass(category, CaseWarning)):
            return
        shown.add(text)
        say(f"simsplit: warning: {text}")

    warnings.showwarning = show


def announce_kernel_compiles(enabled: bool) -> None:
    """Print :data:`COMPILE_NOTICE` once, when a CPU kernel is about to be compiled (not
    loaded from Numba's cache); ``enabled`` False (``--quiet``, ranks other than 0) says
    nothing."""
    from simsplit.backends.cpu.jit_cache import on_first_compile

    on_first_compile((lambda: say(COMPILE_NOTICE)) if enabled else None)
