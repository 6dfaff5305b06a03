"""``python -m experiments.adbench``: the same as ``python -m experiments adbench``."""

import sys

from . import main

sys.exit(main())
