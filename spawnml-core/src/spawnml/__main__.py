"""``python -m spawnml``: the same as the ``spawnml`` command."""

import sys

from .cli import main

sys.exit(main())
