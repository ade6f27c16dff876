"""The checks of each `platonic` command that need no model and no dataset: the family's name, the options a
command requires and how they combine, the files it reads. `cli.main` runs `check(args)` before the command,
so a usage error answers before any model library loads."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import PlatonicError
from ..spaces import check_space
from ..strength import AUTO
from .demo import check_demo
from .files import check_files, header
from .grid import check_grid
from .values import parse_terms


def check(args: argparse.Namespace) -> None:
    """The cheapest and most basic facts first, before any model library loads: the family's name (its
    canonical spelling), then the options the command requires and how they combine, then what the files it reads
    record (`cli.files`)."""
    from ..data.specs import check_task_spec
    from ..registry import family_name

    if getattr(args, "family", None):
        args.family = family_name(args.family)
    _local(getattr(args, "checkpoint", None), "--checkpoint")
    CHECKS.get(args.command, lambda a: None)(args)
    check_files(args)
    if args.command == "edit":  # after the files: what they record says which tasks the edit transfers
        _check_keep(args)
    keeps = ("keep",) if args.command == "edit" else ()  # edit's --keep names tasks; grid's and demo's say probes or labels
    for spec in (s for key in ("task", "tasks", "controls", *keeps) for s in getattr(args, key, None) or ()):
        check_task_spec(spec)


def _require(value: Any, option: str) -> Any:
    if value in (None, [], ()):
        raise PlatonicError(f"{option} is required")
    return value


def _one_task(args: argparse.Namespace) -> str:
    specs = _require(args.task, "--task")
    if len(specs) != 1:
        raise PlatonicError(f"{args.command} takes one --task, got {len(specs)}")
    return specs[0]


def _require_all(args: argparse.Namespace, *options: str) -> None:
    """Each of `options` (e.g. "--family") is given."""
    for option in options:
        _require(getattr(args, option.lstrip("-").replace("-", "_")), option)


def _local(path: str | None, option: str) -> None:
    """A checkpoint written as a local path (./, ../, / or ~) exists; a hub id is checked where it loads."""
    if path and path.startswith(("/", "./", "../", "~")) and not os.path.exists(os.path.expanduser(path)):
        raise PlatonicError(f"{option} {path}: no such file or folder")


def _check_finetune(args: argparse.Namespace) -> None:
    _require_all(args, "--family")
    _one_task(args)
    _require_all(args, "--output")


def _check_utd(args: argparse.Namespace) -> None:
    _require_all(args, "--family")
    _one_task(args)
    args.space = check_space(args.space)  # after --plugin: a registered space is a space too
    if [bool(args.ft_checkpoint), bool(args.ft_adapter), bool(args.finetune)].count(True) != 1:
        raise PlatonicError("give exactly one of --ft-checkpoint (a fine-tuned checkpoint or task-vector file), "
                            "--ft-adapter (a peft LoRA folder) or --finetune (fine-tune here)")
    _require_all(args, "--output")
    _local(args.ft_checkpoint, "--ft-checkpoint")
    if args.ft_adapter and not os.path.isfile(os.path.join(args.ft_adapter, "adapter_config.json")):
        raise PlatonicError(f"--ft-adapter {args.ft_adapter}: not a peft adapter folder (it holds no adapter_config.json)")


def _check_bank(args: argparse.Namespace) -> None:
    _require_all(args, "--family", "--descriptor", "--output")


def _check_edit(args: argparse.Namespace) -> None:
    parse_terms(args)
    if not args.bank:
        _require(args.family, "--family (or --bank)")
    if args.route == "lora":
        if args.bank:
            raise PlatonicError("--route lora fits LoRA from descriptor files; --bank holds closed-form operators")
        if args.ridge_a is not None:
            raise PlatonicError("--ridge-a is the closed form's; the LoRA route takes the landmark ridge --ridge-b")
    elif args.adapter_dir:
        raise PlatonicError("--adapter-dir is written by --route lora")
    no_probes = "a --bank file holds no probes" if args.bank else "--route lora takes a number" if args.route == "lora" else None
    if args.strength is None:  # Python's defaults: bank.edit chooses (auto); SavedBank.edit and the LoRA route fold at 0.5
        args.strength = 0.5 if no_probes else AUTO
    if isinstance(args.strength, str) and no_probes:
        raise PlatonicError(f"--strength {args.strength} reads the target's probes on the descriptors' grids: it takes descriptor "
                            f"files and the closed form ({no_probes})")
    if args.bank and (args.ridge_a is not None or args.ridge_b is not None):
        raise PlatonicError("--bank holds operators already solved with the ridge it records; "
                            "--ridge-a / --ridge-b apply where the bank is built (platonic bank)")
    if not (args.output or args.save_model or args.adapter_dir):
        raise PlatonicError("nothing to write: give --output (the edit) and/or --save-model (the edited checkpoint)")


def _check_keep(args: argparse.Namespace) -> None:
    """--keep, --budget and --confidence go with a strength rule; a --keep task is not one the edit transfers (that a
    rule has something to keep is checked with the descriptors' grids, before the target loads: commands._fitted_edit)."""
    kept = [k for k in ("keep", "budget", "confidence") if getattr(args, k)]
    if not isinstance(args.strength, str):
        if kept:
            raise PlatonicError(f"{', '.join('--' + k for k in kept)}: read by --strength auto, not by the fixed --strength {args.strength:g}")
        return
    if args.bank or args.route == "lora":
        return
    transferred = {meta["task"] for meta in (header(name, "a descriptor") for name, _ in parse_terms(args)) if isinstance(meta.get("task"), str)}
    named = {spec.split(":")[-1] for spec in args.keep or ()} & transferred
    if named:
        raise PlatonicError(f"--keep {', '.join(sorted(named))}: a task the edit transfers; keep what it must leave alone")
    if (args.budget or args.confidence) and not args.keep:
        raise PlatonicError("--budget and --confidence are spent on labelled --keep tasks: give --keep TASK")


def _check_evaluate(args: argparse.Namespace) -> None:
    _require_all(args, "--family", "--task")


CHECKS = {"finetune": _check_finetune, "utd": _check_utd, "bank": _check_bank, "edit": _check_edit, "evaluate": _check_evaluate,
          "grid": check_grid, "demo": check_demo}
