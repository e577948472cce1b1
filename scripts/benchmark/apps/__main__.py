"""`python -m benchmark.apps`: the application rows (apps/bench.py)."""

import sys

from .bench import main

sys.exit(main())
