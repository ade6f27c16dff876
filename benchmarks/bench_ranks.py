"""`platonic grid` in one process vs across torchrun's ranks (gloo on the CPU, nccl on GPUs): wall time
of each command (imports and zoo loading included) and of the run's stages, side by side, and whether
the two run folders hold the same results (`evaluate.runfolder.run_differences`).

    python benchmarks/bench_ranks.py --ranks 2 --max-cells 24            # the image world's zoo on the CPU
    python benchmarks/bench_ranks.py --ranks 2 --device cuda -- --world audio
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

from common import ROOT, report

from platonic_sdk.evaluate.run.runfolder import run_differences


def run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and all its processes) of a command; its output shown only when it fails."""
    cpu = lambda: (lambda u: u.ru_utime + u.ru_stime)(resource.getrusage(resource.RUSAGE_CHILDREN))  # noqa: E731
    start, cpu_start = time.perf_counter(), cpu()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return time.perf_counter() - start, cpu() - cpu_start


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (nccl, one GPU per rank)")
    parser.add_argument("--max-cells", type=int, default=24, help="cells per kind and group")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per process (the grid's default: 1)")
    parser.add_argument("--json", default=None, metavar="PATH")
    parser.add_argument("grid", nargs="*", help="more `platonic grid` options (after --)")
    args = parser.parse_args(argv)

    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    grid = ["-m", "platonic_sdk.cli", "grid", "--max-cells", str(args.max_cells), "--device", args.device,
            "--threads", str(args.threads), "--no-cache", "--quiet", *args.grid]
    load = os.getloadavg()[0]  # other work on the machine: wall times mean little when it exceeds the cores
    with tempfile.TemporaryDirectory(prefix="bench-ranks-") as tmp:
        one, many = Path(tmp) / "one", Path(tmp) / "ranks"
        seconds_one, cpu_one = run([sys.executable, *grid, "--out", str(one)], env)
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.ranks)]
        seconds_many, cpu_many = run([*torchrun, *grid, "--out", str(many)], env)
        stages = [json.loads((p / "report.json").read_text())["timings"] for p in (one, many)]
        differences = run_differences(one, many)
        cells = json.loads((one / "report.json").read_text())["cells"]["records"]
    results = {
        "cells": cells,
        "command, 1 process (s)": round(seconds_one, 2),
        f"command, {args.ranks} ranks (s)": round(seconds_many, 2),
        "speed-up, command": round(seconds_one / seconds_many, 3),
        "CPU, 1 process (s)": round(cpu_one, 2),
        f"CPU, launcher + {args.ranks} ranks (s)": round(cpu_many, 2),
        "load average at the start (1 min)": round(load, 2),
    }
    for stage in sorted(stages[0].keys() | stages[1].keys()):
        results[f"stage {stage}: 1 process / {args.ranks} ranks (s)"] = f"{stages[0].get(stage, 0.0):.2f} / {stages[1].get(stage, 0.0):.2f}"
    results["same results"] = not differences
    results["differences"] = differences[:5]
    return report(f"platonic grid: 1 process vs {args.ranks} ranks on {args.device} ({os.cpu_count()} cores)", results, args.json)


if __name__ == "__main__":
    main()
