"""The whole GPU benchmark set in one run (about 6 minutes on one H200, 7.5 at most), figures written to one JSON file.

Steps run as subprocesses with their own time limits, so a slow step (e.g. an inductor compile) loses
only its own figures; the JSON is rewritten after every step. --tiny runs every step at toy sizes on
the CPU, to check the suite end to end where there is no GPU.

    python benchmarks/gpu_suite.py --out gpu_figures.json          # on the H200
    python benchmarks/gpu_suite.py --tiny --out /tmp/tiny.json     # anywhere
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def steps(tiny: bool) -> list[tuple[str, list[str], int]]:
    """(name, argv after the interpreter, time limit in seconds) of each step."""
    py = [sys.executable]
    if tiny:
        device, size, backend = ["--device", "cpu", "--threads", "1"], "tiny", "aot_eager"
        bank = ["--targets", "1", "--tasks", "EuroSAT,MNIST", "--sources", "2"]
    else:
        device, size, backend = ["--device", "cuda"], "large", "inductor"
        bank = ["--max-seconds", "20"]
    tests = ["tests/test_ridge_methods.py", "tests/test_accel.py"]  # the CUDA tests (no open_clip needed)
    return [
        ("tests", py + ["-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], 60),
        ("bank", py + [str(HERE / "bench_bank.py"), *device, *bank], 90),
        ("extract_eager", py + [str(HERE / "bench_extract.py"), *device, "--size", size,
                                "--modes", "fp32_eager,bf16_autocast,bf16_autocast_workers"], 75),
        ("extract_compiled", py + [str(HERE / "bench_extract.py"), *device, "--size", size,
                                   "--modes", "bf16_autocast,bf16_compiled", "--compile-backend", backend], 150),
        ("cached_eval", py + [str(HERE / "bench_cached_eval.py"), *device, "--size", size], 75),
    ]


def run_step(name: str, argv: list[str], limit: int, scratch: Path) -> dict:
    """Run one step; its figures come back through a --json file (pytest reports by its exit code)."""
    out_file = scratch / f"{name}.json"
    if name != "tests":
        argv = argv + ["--json", str(out_file)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
        status, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        status, tail = "timeout", ((exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace"))[-3000:]
    record = {"status": status, "seconds": round(time.perf_counter() - start, 1)}
    if out_file.is_file():
        record["figures"] = json.loads(out_file.read_text())
    if status != 0 or name == "tests":
        record["log_tail"] = tail
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="toy sizes on the CPU (checks the suite runs)")
    parser.add_argument("--out", default="gpu_figures.json")
    args = parser.parse_args(argv)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, step_argv, limit in steps(args.tiny):
            print(f"[gpu_suite] {name} (limit {limit} s) ...", flush=True)
            results[name] = run_step(name, step_argv, limit, Path(tmp))
            print(f"[gpu_suite] {name}: {results[name]['status']} in {results[name]['seconds']} s", flush=True)
            Path(args.out).write_text(json.dumps(results, indent=2))
    failed = [n for n, r in results.items() if r["status"] != 0]
    print(f"[gpu_suite] wrote {args.out}; failed steps: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
