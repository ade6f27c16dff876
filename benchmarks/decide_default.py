"""The default's decision protocol (docs/method.md sec. 15.1): the runner of platonic_sdk/evaluate/decide/ on a
protocol file, as `python -m platonic_sdk.evaluate.decide` runs it. Round 3's protocol is
benchmarks/protocols/round_3.json (its seeds have all run):

    python benchmarks/decide_default.py benchmarks/protocols/round_3.json --threads 2 --json DEV3   # development: the choice
    python benchmarks/decide_default.py PROTOCOL.json --seeds confirmation     # a committed, unchanged protocol only
"""

from __future__ import annotations

import sys

from platonic_sdk.evaluate.decide.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
