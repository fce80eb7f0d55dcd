"""``python -m rlpace.bench`` is the same program as ``rlpace-bench``."""

import sys

from rlpace.bench.cli import main

sys.exit(main())
