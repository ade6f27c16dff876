"""The feature cache across run folders: the same small grid twice, into two new folders, with one cache folder.

For each world: `platonic grid` into folder A with a fresh `--cache-dir`, then `platonic grid --dry-run`
(what it says the cache holds), then the same grid into a new folder B. Prints each run's CPU seconds
(user + system of the process) and wall seconds side by side, and the ratio second / first: the second run
reads every unedited encoding (pretrained and fine-tuned models) from the cache, so what is left is start-up
(imports, the world's items, loading the models), the solves, the studies and the figures: with a few items
per class those are all there is (a second run then costs about what the first did), so the grid keeps the
world's item counts.

    python benchmarks/bench_cache.py                      # image, audio and real worlds
    python benchmarks/bench_cache.py --worlds image --root /tmp/before
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT

BOOT = ("import sys; sys.path.insert(0, {root!r}); import platonic_sdk; platonic_sdk.__path__.append({root!r}); "
        "from platonic_sdk.cli import main; sys.exit(main(sys.argv[1:]))")
SMALL = {  # two families, two transfer tasks, the world's item counts: the encodings are most of a first run's work
    "image": ["--families", "clip", "siglip", "--task", "amber_shapes", "--task", "teal_shapes"],
    "audio": ["--families", "clap-general", "clap-music", "--task", "bright_noises", "--task", "raised_notes"],
    "real": ["--families", "lit_s", "lit_m", "--task", "fashion_rotated_left", "--task", "card_suits"],
}
COMMON = ["--methods", "closed_form", "--sweep-cells", "1", "--no-similarity", "--quiet"]


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(root: Path, args: list[str]) -> tuple[float, float, str]:
    """(CPU s, wall s, stdout) of one `platonic` command of the checkout at `root`."""
    started, cpu = time.perf_counter(), _child_cpu()
    done = subprocess.run([sys.executable, "-c", BOOT.format(root=str(root)), *args], env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          check=True, capture_output=True, text=True)
    return _child_cpu() - cpu, time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", nargs="+", default=list(SMALL), choices=list(SMALL))
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout that runs (default: this one)")
    args = parser.parse_args()
    rows = []
    for world in args.worlds:
        with tempfile.TemporaryDirectory() as tmp:
            grid = ["grid", "--world", world, *SMALL[world], *COMMON, "--cache-dir", f"{tmp}/cache"]
            first = run(args.root, [*grid, "--out", f"{tmp}/a"])
            dry = [line for line in run(args.root, [*grid, "--out", f"{tmp}/b", "--dry-run"])[2].splitlines() if "feature cache" in line]
            second = run(args.root, [*grid, "--out", f"{tmp}/b"])
        rows.append((world, first, second, dry))
    print(f"platonic grid twice into new folders, one fresh cache folder ({args.root})")
    print(f"{'world':<8}{'first CPU s':>13}{'second CPU s':>14}{'ratio':>8}{'first wall s':>14}{'second wall s':>15}")
    for world, first, second, _ in rows:
        print(f"{world:<8}{first[0]:>13.1f}{second[0]:>14.1f}{second[0] / first[0]:>8.2f}{first[1]:>14.1f}{second[1]:>15.1f}")
    for world, _, _, dry in rows:
        print(f"{world} dry run before the second grid:", *dry, sep="\n  ")


if __name__ == "__main__":
    main()
