"""``python -m simsplit``: the command line."""

import sys

from simsplit.cli import main

sys.exit(main())
