"""The errors every layer may raise: bad input, a missing device library, a diverging run;
and the warning about a case that runs but may go wrong.

A leaf module (it imports nothing of simsplit), so that physics, backends and the run around
them can all raise these without importing each other; the command line maps them to exit codes.
"""

from __future__ import annotations


class CaseError(ValueError):
    """A case file or override that cannot be run; the message is one line."""


class InputFileError(ValueError):
    """A data or trajectory file that cannot be read or used as asked (a malformed LAMMPS data
    file, a trajectory without the frames or fields an analysis needs); the message is one line
    naming the file and, where there is one, its line."""


class CaseWarning(UserWarning):
    """A case that runs but may be inaccurate or unstable; the message is one line naming the
    key."""


class BackendUnavailable(RuntimeError):
    """The backend's library or device is missing on this machine."""


#: how a user gets the GPU backends' libraries (CuPy, NVML) in one step
GPU_INSTALL_HINT = 'pip install "simsplit[gpu]"'


class DivergenceError(RuntimeError):
    """The run produced non-finite or unphysical values at ``step`` in subdomain ``slab``."""

    def __init__(self, step: int, slab: int, detail: str) -> None:
        super().__init__(f"run diverged at step {step} in subdomain {slab}: {detail}")
        self.step, self.slab, self.detail = step, slab, detail
