"""``python -m priority_kafka``: the same as the ``priority-kafka`` console script."""

import sys

from priority_kafka.cli import main

sys.exit(main())
