"""``python -m memop``: the operator process."""

import sys

from memop.cli import main

sys.exit(main())
