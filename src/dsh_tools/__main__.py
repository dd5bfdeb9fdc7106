"""``python -m dsh_tools``: see :mod:`dsh_tools.cli`."""

import sys

from .cli import main

sys.exit(main())
