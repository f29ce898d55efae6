"""``python -m memop``: the operator process."""

import sys

from memop.cli.main import main

sys.exit(main())
