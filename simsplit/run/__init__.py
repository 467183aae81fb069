"""The run around a solver: the :class:`Simulation` front door and what it attaches (output
writers, plots, checkpoints, the run manifest, progress, the summary, the memory preflight)."""
