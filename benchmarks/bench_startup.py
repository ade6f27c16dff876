"""Start-up costs side by side: bare python, `import torch`, `import platonic_sdk`, the public API, `platonic
--help`, `platonic bank --help`, `platonic families` (read from the adapters' catalog), usage errors (each
with no --checkpoint: a file or option check must answer before the family's hub default would load), and
`platonic evaluate` up to its first model load; each as wall and CPU seconds (best of --repeats fresh
processes) and its ratio to `import torch` and to `platonic --help`.

    python benchmarks/bench_startup.py [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from subprocess import DEVNULL, run

ROOT = Path(__file__).resolve().parent.parent
PLATONIC = [sys.executable, "-m", "platonic_sdk.cli"]
# platonic evaluate until its first model load: the load is replaced by an exit
UNTIL_FIRST_LOAD = ("import sys; from platonic_sdk.cli import commands, main as cli\n"
                    "commands.load_model = lambda *a, **k: sys.exit(0)\n"
                    "cli.main(['evaluate', '--family', 'clip', '--task', 'images:{folder}'])")


def commands(folder: str) -> dict[str, list[str]]:
    return {
        "bare python": [sys.executable, "-c", "pass"],
        "import torch": [sys.executable, "-c", "import torch"],
        "import platonic_sdk": [sys.executable, "-c", "import platonic_sdk"],
        "from platonic_sdk import UTD, OperatorBank, load": [sys.executable, "-c", "from platonic_sdk import UTD, OperatorBank, load"],
        "platonic --help": [*PLATONIC, "--help"],
        "platonic bank --help": [*PLATONIC, "bank", "--help"],
        "platonic families": [*PLATONIC, "families"],
        "usage error (platonic utd --family clipp)": [*PLATONIC, "utd", "--family", "clipp", "--task", "t"],
        "usage error (evaluate --edit nofile.safetensors)": [*PLATONIC, "evaluate", "--family", "clip", "--task", "amber_shapes",
                                                            "--edit", "nofile.safetensors"],
        "usage error (edit --add nothere.safetensors)": [*PLATONIC, "edit", "--family", "siglip", "--add", "nothere.safetensors",
                                                        "-o", "e.safetensors"],
        "usage error (grid --benchmark paper-image --dry-run)": [*PLATONIC, "grid", "--benchmark", "paper-image", "--dry-run"],
        "usage error (evaluate --task amber_shapez)": [*PLATONIC, "evaluate", "--family", "clip", "--task", "amber_shapez"],
        "platonic evaluate, up to its first model load": [sys.executable, "-c", UNTIL_FIRST_LOAD.format(folder=folder)],
    }


def measure(argv: list[str], repeats: int) -> tuple[float, float]:
    """(best wall seconds, CPU seconds of that run) over `repeats` fresh processes."""
    best = (float("inf"), 0.0)
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        run(argv, stdout=DEVNULL, stderr=DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, (wall, cpu))
    return best


def image_folder(root: Path) -> str:
    """A two-class folder of tiny PNGs (the evaluate command reads its task before loading the model)."""
    from PIL import Image

    for cls, colour in (("red", (220, 30, 30)), ("blue", (30, 30, 220))):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), colour).save(root / cls / f"{i}.png")
    return str(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = {name: measure(argv, args.repeats) for name, argv in commands(image_folder(Path(tmp) / "shapes")).items()}
    torch_wall, help_wall = figures["import torch"][0], figures["platonic --help"][0]
    width = max(map(len, figures))
    print(f"{'step':<{width}}  {'wall s':>7}  {'CPU s':>6}  {'/ import torch':>14}  {'/ --help':>8}")
    for name, (wall, cpu) in figures.items():
        print(f"{name:<{width}}  {wall:7.3f}  {cpu:6.3f}  {wall / torch_wall:13.2f}x  {wall / help_wall:7.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({k: {"wall": w, "cpu": c, "ratio": w / torch_wall, "ratio_help": w / help_wall}
                                               for k, (w, c) in figures.items()}, indent=1))


if __name__ == "__main__":
    main()
