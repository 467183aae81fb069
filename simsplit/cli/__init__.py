"""The command line (``simsplit run | validate | bench | devices``): the top layer, which nothing
else in the package imports. :mod:`.main` parses and dispatches, :mod:`.bench` measures."""

from simsplit.cli.commands import entry, main

__all__ = ["entry", "main"]
