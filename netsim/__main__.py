"""Allow ``python -m netsim``."""

import sys

from netsim.cli import main

sys.exit(main())
