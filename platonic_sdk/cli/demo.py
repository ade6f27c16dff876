"""`platonic demo`: the whole method on a world's shipped zoo, offline, in minutes: the demo preset
(evaluate/plan/presets/demo.json, `Experiment.demo`) with the world's tuned settings. Writes run.json, cells.jsonl,
report.json, report.md and figures/ into --out; a finished run's rerun prints its report without loading a model.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .grid import flag
from .values import kind_options


def demo_settings(args: argparse.Namespace):
    """The demo's --world, --paper / --preset and method flags as GridSettings (checked: canonical names, nothing loaded)."""
    from ..evaluate.plan.grid_settings import GridSettings

    return GridSettings(world=args.world, preset=args.preset, families=args.families, space=args.space, strength_rule=args.strength_rule,
                        keep=args.keep, addition_budget=args.addition_budget, negation_budget=args.negation_budget,
                        confidence=args.confidence, **kind_options(args)).checked(flag)


def check_demo(args: argparse.Namespace) -> None:
    """Every check of the demo's options that needs no model: the world (its optional packages too) and the method."""
    args.world = demo_settings(args).world



# options that change how the demo runs, not what it computes (left out of the finished run's stamp)
HOW = ("func", "command", "quiet", "threads", "workers", "cache_dir", "no_cache", "debug", "config", "out")


def main(args: argparse.Namespace) -> int:
    """Entry point of `platonic demo` (options parsed by cli.py). A rerun of a finished demo with the same options,
    code, zoos and packages (runfolder.inputs_stamp; one process, no plugins) prints its report without loading a model."""
    from ..encoding import distributed
    from ..evaluate.report.render import table
    from ..evaluate.run.experiment import Experiment
    from ..evaluate.run.ranks import rank_folder
    from ..evaluate.run.runfolder import RunFolder, inputs_stamp

    t0 = time.perf_counter()
    with rank_folder(args.out) as folder:  # locked before any model loads (on rank 0)
        alone = isinstance(folder, RunFolder) and distributed.rank_and_world()[1] == 1 and not args.plugin
        stamp = inputs_stamp({k: v for k, v in vars(args).items() if k not in HOW}) if alone else None
        summary = folder.finished(stamp) if stamp else None
        if summary is None:
            if stamp:
                folder.unfinished()
            settings = demo_settings(args)
            experiment = Experiment.demo(settings.world, args.seed, families=args.families, device=args.device, batch_size=args.batch_size,
                                         lora_cells=args.lora_cells, weight_space_cells=args.weight_space_cells,
                                         orthoreg_tasks=args.orthoreg_tasks, method=settings.preset, settings=settings.method_settings())
            summary = experiment.run(folder, progress=not args.quiet, describe={"command": "platonic demo"}, workers=args.workers)
            if stamp:
                folder.mark_finished(stamp)
    if summary is None:  # another rank: rank 0 writes and prints the report
        return 0
    print(table(["figure", "value"], [[k, v] for k, v in summary["checks"].items()]))
    print(f"\nreport: {Path(args.out) / 'report.md'} (figures in {Path(args.out) / 'figures'}); wall time {time.perf_counter() - t0:.1f} s")
    return 0
