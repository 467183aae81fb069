"""``python -m simsplit``: the command line."""

from simsplit.cli import entry

entry()
