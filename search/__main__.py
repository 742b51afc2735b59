"""`python -m search ...` (see search/cli.py); imports no Django."""

from __future__ import annotations

import sys

from search.cli import main

if __name__ == "__main__":
    sys.exit(main())
