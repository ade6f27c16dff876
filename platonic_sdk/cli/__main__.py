"""`python -m platonic_sdk.cli`: the `platonic` command."""

import sys

from .main import main

sys.exit(main())
