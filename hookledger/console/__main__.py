"""`python -m hookledger.console [--host H] [--port P] [--token T]` (what `make run` starts)."""

import sys

from hookledger.cli import main

sys.exit(main(["console", *sys.argv[1:]]))
