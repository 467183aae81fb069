"""``python -m simsplit``: the command line."""

from simsplit.cli.commands import entry

entry()
