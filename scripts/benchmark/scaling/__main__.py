"""python -m benchmark.scaling: the scaling part (bench.py)."""

import sys

from .bench import main

sys.exit(main())
