"""``python -m benches``: see :mod:`benches.run`."""

from __future__ import annotations

import sys

from .run import main

sys.exit(main())
