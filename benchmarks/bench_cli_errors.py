"""How long the command line takes to refuse a file of the wrong model or a damaged file, this checkout beside another
(issue 35: a SigLIP edit evaluated on CLIP took 46 s, a fine-tune of another family 35 s, a damaged .safetensors
11-15 s, each after its model had loaded). Each case runs `platonic ...` in a fresh process (wall seconds, best of
--repeats) in each checkout, on the shipped zoo and on files written here; each must exit 2 with a one-line error.
The load average is printed before and after: on a shared machine the ratio is the steadier figure.

    git archive a12d3f9 | tar -x -C /tmp/before          # a checkout from before the checks (no .git needed)
    python benchmarks/bench_cli_errors.py --before /tmp/before [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import ROOT

from platonic_sdk.edits.edit import OperatorEdit
from platonic_sdk.protocol.binding import Target

# runs the CLI of the checkout at ROOT, mapping its adapters/ folder as pyproject's package-dir does (cli.py or cli/main.py)
BOOT = ("import sys; sys.path.insert(0, {root!r}); import platonic_sdk; platonic_sdk.__path__.append({root!r}); "
        "from platonic_sdk.cli import main; main = getattr(main, 'main', main); sys.exit(main(sys.argv[1:]))")


def cases(zoo: Path, work: Path) -> dict[str, list[str]]:
    """The refusals: an edit made for SigLIP on CLIP, SigLIP's fine-tune given to CLIP, a damaged edit and fine-tune file."""
    siglip = Target({"head.weight": (4, 4)}, "f" * 64, "siglip", str(zoo / "siglip"), 4)
    OperatorEdit(torch.zeros(4, 4), 0.5, "residual_head", {"target_family": "siglip"}, siglip).save(work / "sig.safetensors")
    fine_tune = zoo / "finetunes" / "siglip" / "amber_shapes.safetensors"
    (work / "damaged.safetensors").write_bytes(fine_tune.read_bytes()[:4000])
    world = ["--task", "amber_shapes", "--quiet", "--no-cache"]  # the world's own sizes, as a new user runs it
    evaluate = ["evaluate", "--family", "clip", "--checkpoint", str(zoo / "clip"), *world, "--edit"]
    utd = ["utd", "--family", "clip", "--checkpoint", str(zoo / "clip"), *world, "-o", str(work / "u.safetensors"), "--ft-checkpoint"]
    return {"siglip edit on clip": evaluate + [str(work / "sig.safetensors")],
            "siglip fine-tune on clip": utd + [str(fine_tune)],
            "damaged edit file": evaluate + [str(work / "damaged.safetensors")],
            "damaged fine-tune file": utd + [str(work / "damaged.safetensors")]}


def refusal(root: Path, argv: list[str], repeats: int) -> tuple[float, str]:
    """(best wall seconds, the error) of `platonic argv` run by the checkout at `root`; it must exit 2 in one line."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    best, err = float("inf"), ""
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", BOOT.format(root=str(root)), *argv], env=env, capture_output=True, text=True)
        best, err = min(best, time.perf_counter() - start), done.stderr.strip()
        assert done.returncode == 2, (root, argv, done.stderr[-2000:])
    return best, err


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout (e.g. one from `git archive`)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in cases(ROOT / "platonic_sdk" / "worlds" / "zoo", Path(tmp)).items():
            (before, _), (after, said) = refusal(args.before.resolve(), argv, args.repeats), refusal(ROOT, argv, args.repeats)
            assert "\n" not in said, said
            rows[name] = {"before_s": before, "after_s": after, "ratio": before / after, "error": said}
            print(f"{name:<26} before {before:7.2f} s   after {after:6.2f} s   {before / after:6.1f}x   {said[:110]}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
