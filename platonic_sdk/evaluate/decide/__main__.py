"""`python -m platonic_sdk.evaluate.decide PROTOCOL.json [--seeds development|confirmation|all]`: the decision
runner (runner.py) from the command line; prints its markdown report and writes `--json` / `--markdown`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from ...atomic import write_json, write_text
from ...errors import PlatonicError
from .runner import STAGES, decide, markdown


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m platonic_sdk.evaluate.decide",
                                     description="The decision protocol's runner (docs/method.md sec. 15.1): measure (or --read) "
                                                 "a protocol file's seeds, judge them and print the report.")
    parser.add_argument("protocol", help="the protocol file (JSON; docs/method.md sec. 15.1)")
    parser.add_argument("--seeds", choices=STAGES, default="development",
                        help="which of the protocol's seeds: development (default), confirmation (from a committed, unchanged "
                             "protocol file only) or all")
    parser.add_argument("--read", nargs="+", metavar="PATH", default=(), help="judge earlier --json outputs instead of measuring")
    parser.add_argument("--json", metavar="PATH", help="write the output here: records, figures, verdicts, outcome, provenance")
    parser.add_argument("--markdown", metavar="PATH", help="write the printed report here too")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a download while measuring
    try:
        if not args.read:
            import torch

            torch.set_num_threads(args.threads)
        output = decide(args.protocol, args.seeds, read=args.read, progress=args.progress)
    except PlatonicError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    report = markdown(output)
    print(report)
    if args.json:
        write_json(args.json, output)
    if args.markdown:
        write_text(args.markdown, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
