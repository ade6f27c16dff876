"""A small benchmark grid from Python, without the command line.

`Experiment.from_config` takes the settings `platonic grid` takes, as a mapping (the keys of
`GridSettings`), and builds the workspace and the experiment; `dry_run` counts what a run would encode;
`Experiment.run` runs the cells and studies into a run folder and writes report.md. The same calls serve
a registered benchmark on its datasets (`--benchmark paper-image --data-root DIR`) and a world's shipped zoo.

    python examples/benchmark_grid.py                 # two families of the image world's zoo, a few cells (a minute)
    python examples/benchmark_grid.py --ci            # smaller still: seconds
    python examples/benchmark_grid.py --benchmark paper-image --data-root DIR   # the paper's datasets
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from platonic_sdk.evaluate.run.experiment import Experiment, dry_run  # noqa: E402


def settings(args: argparse.Namespace) -> dict:
    """The grid's settings: a few cells of each kind, the closed form against its baselines."""
    cells = {"max_cells": 2, "methods": ["random_utd", "closed_form", "oracle"], "sweep_strengths": [0.0, 0.5, 1.0],
             "sweep_cells": 1, "similarity": False, "out": args.out}
    if args.benchmark:
        return {**cells, "benchmark": args.benchmark, "data_root": args.data_root}
    small = {"train_per_class": 4, "test_per_class": 3, "per_class": 2} if args.ci else {"per_class": 10}
    return {**cells, **small, "world": "image", "families": ["clip", "siglip"], "tasks": ["amber_shapes", "amber_glyphs", "teal_shapes"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="tiny draws of the image world (seconds)")
    parser.add_argument("--out", default="out/benchmark_grid", help="run folder (report.md, figures/)")
    parser.add_argument("--benchmark", help="a registered benchmark, e.g. paper-image (with --data-root)")
    parser.add_argument("--data-root", help="the benchmark's datasets")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # the cells are many small products

    experiment = Experiment.from_config(settings(args))
    print("\n".join(dry_run(experiment, store=None).lines()))
    summary = experiment.run(args.out)
    print(f"{summary['cells']['records']} cells over {', '.join(experiment.workspace.families)}; report: {args.out}/report.md")
    for key in ("addition_gain_task_a", "addition_gain_task_b", "negation_removed_drop", "held_out_gain"):
        if key in summary["checks"]:
            print(f"{key}: {summary['checks'][key]:+.2f}")


if __name__ == "__main__":
    main()
