"""`platonic grid` and `platonic demo` as library calls: the grid's flags become `GridSettings`, then
`Experiment.from_config` builds the experiment, `Experiment.run` runs it and `dry_run` counts it; this module
only translates the flags and prints."""

from __future__ import annotations

import argparse
import time

from ..errors import PlatonicError
from .values import kind_options, parse_method_cells, parse_models, recipe_options

# the grid's settings that other flags spell differently (the rest: --key-with-dashes)
FLAGS = {"tasks": "--task", "preset": "--preset", "templates": "--template", "checkpoints": "--model", "models": "[grid.models] in --config",
         "finetuned": "[[grid.finetuned]] in --config", "similarity": "--no-similarity", "recipe": "the fine-tuning recipe options",
         "lora": "--lora-lr / --lora-epochs / --lora-steps"}
# GridSettings keys that are the grid's option names
SAME = ("world", "preset", "families", "tasks", "controls", "held_out", "benchmark", "data_root", "finetunes", "out", "test_fraction",
        "seed", "world_seed", "train_per_class", "test_per_class", "per_class", "grid_seed", "batch_size", "device",
        "ridge_a", "ridge_b", "kinds", "groups", "pairing", "max_cells", "methods", "addition_strength", "negation_strength",
        "weight_space_strength", "strength_rule", "space", "addition_budget", "negation_budget", "confidence", "sweep_strengths",
        "sweep_cells", "similarity_probes")



def flag(key: str) -> str:
    """A grid setting's key as the command line spells it."""
    return FLAGS.get(key, "--" + key.replace("_", "-"))


def grid_settings(args: argparse.Namespace):
    """The GridSettings of `platonic grid`'s options (checked: canonical names, nothing loaded)."""
    from ..evaluate.plan.grid_settings import GridSettings

    lora = {k: v for k, v in (("lr", args.lora_lr), ("epochs", args.lora_epochs), ("max_steps", args.lora_steps)) if v is not None}
    return GridSettings(
        **{k: getattr(args, k) for k in SAME}, models=args.models, finetuned=args.finetuned, checkpoints=parse_models(args.model or []),
        recipe=recipe_options(args), templates=args.template, method_cells=dict(parse_method_cells(args.method_cells or [])),
        lora=lora, similarity=not args.no_similarity, keep=args.keep, **kind_options(args),
    ).checked(flag)


def check_grid(args: argparse.Namespace) -> None:
    """Every check of the grid's options that needs no model and no dataset."""
    grid_settings(args)
    if not args.out:
        raise PlatonicError("--out is required")


def cmd_grid(args: argparse.Namespace) -> int:
    from ..evaluate.report.render import plural
    from ..evaluate.run.experiment import Experiment, dry_run
    from ..evaluate.run.ranks import rank_folder

    settings = grid_settings(args)
    title = "platonic grid" + (f" --benchmark {settings.benchmark}" if settings.benchmark else "")
    if args.dry_run:  # every dataset and model checked; no run folder, no fine-tunes, no cache entries
        print("\n".join(dry_run(Experiment.from_config(settings, dry=True, progress=not args.quiet, say=flag), title=title).lines()))
        return 0
    with rank_folder(args.out) as folder:  # locked before any model loads (on rank 0)
        started = time.perf_counter()
        experiment = Experiment.from_config(settings, progress=not args.quiet, say=flag)
        describe = {"command": "platonic grid", **({"models": f"from {args.config}"} if settings.models else {})}
        summary = experiment.run(folder, progress=not args.quiet, title=title, describe=describe, workers=args.workers)
    if summary is not None:  # rank 0 (or the only process)
        wall = time.perf_counter() - started
        print(f"{plural(summary['cells']['records'], 'cell')}; report {folder.path / 'report.md'}; wall time {wall:.1f} s "
              f"(run stages {summary['timings']['total']:.1f} s)")
    return 0
