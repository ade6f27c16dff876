"""The main job's stage profile: `platonic demo` fresh in a temporary folder, then rerun on the finished folder.

Each run is a subprocess (`python -m platonic_sdk.cli demo --out TMP --quiet`, no feature cache unless
`--cache`: then one fresh cache folder for both runs, so the rerun may hit it); the script prints the
seconds of each stage as the run recorded them (report.json "timings"), the start-up (wall time less
the runner's total), the wall time and the CPU seconds of the process, fresh and rerun side by side
(on a shared machine the CPU seconds, worker processes included, are the steadier figure), the peak resident
memory of the largest run so far, and the load average before and after. With `--before DIR` it runs that
checkout first and prints before and after side by side.

    python benchmarks/bench_demo.py                       # image world
    python benchmarks/bench_demo.py --world audio
    python benchmarks/bench_demo.py --root /tmp/base      # another checkout (e.g. `git worktree add /tmp/base <commit>`)
    python benchmarks/bench_demo.py --before /tmp/base --cache   # before and after, side by side
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT

# runs the CLI of the checkout at ROOT, mapping its adapters/ folder as pyproject's package-dir does
BOOT = ("import sys; sys.path.insert(0, {root!r}); import platonic_sdk; platonic_sdk.__path__.append({root!r}); "
        "from platonic_sdk.cli import main; main = getattr(main, 'main', main); sys.exit(main(sys.argv[1:]))")  # cli.py or cli/main.py


def run_demo(root: Path, out: Path, world: str, cache: Path | None, threads: int) -> dict[str, Any]:
    """One `platonic demo` run: its wall and CPU seconds and the stage seconds it recorded."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
    args = ["demo", "--out", str(out), "--world", world, "--quiet", *(["--cache-dir", str(cache)] if cache else ["--no-cache"])]
    started, cpu = time.perf_counter(), _child_cpu()
    subprocess.run([sys.executable, "-c", BOOT.format(root=str(root)), *args], env=env, check=True, stdout=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - started, _child_cpu() - cpu
    summary = json.loads((out / "report.json").read_text())
    timings = summary["timings"]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux; the largest child so far
    return {"wall": round(wall, 2), "cpu": round(cpu, 2), "peak RSS MiB": round(peak), "start-up": round(wall - timings["total"], 2), **timings,
            "resumed": f"{summary['cells']['resumed']}/{summary['cells']['passes']}"}


def _child_cpu() -> float:
    """User + system CPU seconds of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def profile(root: Path, work: Path, world: str, cache: bool, threads: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fresh, rerun) of the demo of the checkout at `root`, in work/demo (cache: a fresh work/cache)."""
    out, folder = work / "demo", (work / "cache" if cache else None)
    return run_demo(root.resolve(), out, world, folder, threads), run_demo(root.resolve(), out, world, folder, threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", default="image")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose demo runs (default: this one)")
    parser.add_argument("--before", type=Path, default=None, metavar="DIR", help="a checkout to run first and show beside --root")
    parser.add_argument("--cache", action="store_true", help="use a fresh feature cache folder (default: --no-cache)")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the runs (default 1)")
    parser.add_argument("--json", default=None, metavar="PATH")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR", help="run in DIR (a new folder) and keep it")
    args = parser.parse_args()
    load = [os.getloadavg()[0]]
    runs: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        for name, root in (("before", args.before), ("after", args.root)):
            if root is not None:
                runs[name] = profile(root, work / name, args.world, args.cache, args.threads)
    load.append(os.getloadavg()[0])
    columns = [(f"{name} {kind}", run) for kind, i in (("fresh", 0), ("rerun", 1)) for name, pair in runs.items() for run in [pair[i]]]
    stages = list(dict.fromkeys(k for _, run in columns for k in run))
    print(f"platonic demo --world {args.world} ({'fresh cache folder' if args.cache else '--no-cache'}, OMP_NUM_THREADS={args.threads}); "
          f"{', '.join(f'{n}: {r}' for n, r in (('before', args.before), ('after', args.root)) if r is not None)}; "
          f"load average {load[0]:.1f} before, {load[1]:.1f} after")
    print(f"{'stage':<20}" + "".join(f"{title:>15}" for title, _ in columns))
    for stage in stages:
        print(f"{stage:<20}" + "".join(f"{str(run.get(stage, '-')):>15}" for _, run in columns))
    if args.json:
        Path(args.json).write_text(json.dumps({"world": args.world, "cache": args.cache, "load": load,
                                               **{name: {"fresh": f, "rerun": r} for name, (f, r) in runs.items()}}, indent=2))


if __name__ == "__main__":
    main()
