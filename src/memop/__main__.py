"""``python -m memop``: the ``memop`` command line (:func:`memop.cli.main.main`)."""

import sys

from memop.cli.main import main

sys.exit(main())
