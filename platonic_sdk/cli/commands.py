"""What the `platonic` subcommands do (cli.py parses; this module acts): resolve tasks and models,
compute descriptors, build operator banks, compose edits, evaluate, run the cell matrix.

Heavy libraries load inside the functions, so `platonic --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from ..errors import GridMismatchError, PlatonicError
from .values import RECIPE_OPTIONS, parse_terms, recipe_options


# ---------------------------------------------------------------------------- tasks
def task_options(args: argparse.Namespace):
    """The TaskOptions of the command's data options."""
    from ..data.specs import TaskOptions

    return TaskOptions(args.data_root, args.template, args.test_fraction, args.seed, args.world_seed, args.train_per_class,
                       args.test_per_class)


def resolve_tasks(specs: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    from ..data.specs import load_tasks

    return load_tasks(specs, task_options(args))


def _repeat(utd, args: argparse.Namespace) -> str:
    """The --task (and options that differ from this command's) that the descriptor was computed with."""
    flags = [f"--task {utd.provenance['task_spec']}"]
    for key, value in utd.provenance.get("task_options", {}).items():
        if key == "templates":
            flags += [f"--template {t!r}" for t in value or ()] if tuple(args.template or ()) != tuple(value or ()) else []
        elif getattr(args, key, value) != value:
            flags += [f"--{key.replace('_', '-')} {value}"]
    return " ".join(flags)


def descriptor_grid(label: str, utd, tasks: dict[str, Any], args: argparse.Namespace):
    """The grid `utd` lives on, checked: its task from --task, else rebuilt from the spec the descriptor records."""
    from ..data.specs import TaskOptions, load_task

    spec = utd.provenance.get("task_spec")
    if utd.task in tasks:
        task = tasks[utd.task]
        hint = (f"repeat `{_repeat(utd, args)}` with the data it was computed on" if spec
                else "give the --task it was computed on, with the same options")
    elif spec:
        try:
            task = load_task(spec, TaskOptions(**utd.provenance.get("task_options", {})))
        except PlatonicError as exc:
            raise PlatonicError(f"{label}: cannot rebuild its task from `--task {spec}` ({exc}); "
                                f"give --task {utd.task}=KIND:PATH with the data it was computed on") from None
        hint = f"the data of `--task {spec}` changed since it was computed: recompute it with `platonic utd`"
    else:
        task = load_task(utd.task, task_options(args))
        hint = "give the --task it was computed on, with the same options"
    grid = _grid_of(task, args, utd.provenance)
    try:
        utd.check_grid(grid)
    except GridMismatchError as exc:
        raise GridMismatchError(f"{label}: {exc}; {hint}") from None
    return grid


def _grid_of(task, args: argparse.Namespace, provenance: dict[str, Any] | None = None):
    """The task's grid with the options recorded in a descriptor's provenance (else the command's)."""
    prov = provenance or {}
    return task.grid(
        per_class=int(prov.get("grid_per_class", args.per_class)),
        seed=int(prov.get("grid_seed", args.grid_seed)),
        stratified=bool(prov.get("grid_stratified", args.stratified)),
    )


# ---------------------------------------------------------------------------- models
def load_model(family: str, checkpoint: str | None, args: argparse.Namespace):
    from ..registry import load

    encoder = load(family, checkpoint)
    if args.device:
        encoder.to(args.device)
    return encoder.eval()


# ---------------------------------------------------------------------------- subcommands
def cmd_families(args: argparse.Namespace) -> int:
    """The families' table, read from the adapters' catalog (and registered plug-ins) without loading any model library."""
    from ..registry import family_facts, list_families

    names = list_families(args.modality)
    width = max(map(len, names), default=0)
    for name in names:
        modality, checkpoint, description = family_facts(name)
        print(f"{name:<{width}}  {modality:<5}  {checkpoint or '-'}  {description}")
    return 0


def finetune_recipe(args: argparse.Namespace, checkpoint: str | None = None):
    """(FinetuneConfig, where its defaults came from) of the checkpoint (default --checkpoint): the library's
    `source_recipe` (a zoo member's own recipe, else the library's defaults), the command's options winning."""
    from ..evaluate.measure.benchmark_workspace import source_recipe

    chosen = recipe_options(args)
    config, origin = source_recipe(checkpoint or getattr(args, "checkpoint", None), chosen, args.seed)
    return config, origin + (", with " + ", ".join(f"--{k.replace('_', '-')}" for k in chosen) if chosen else "")


def _the_task(args: argparse.Namespace):
    """The one --task of finetune and utd."""
    from ..data.specs import load_task

    return load_task(args.task[0], task_options(args))


def _finetuned(pre, task, args: argparse.Namespace):
    """Fine-tune `pre` on `task` with the command's recipe, saying which recipe it is."""
    from ..finetune import finetune

    config, origin = finetune_recipe(args)
    shown = {k: v for k, v in config.describe().items() if k in (*RECIPE_OPTIONS, "batch_size") or k == "orthoreg" and v["weight"]}
    print(f"fine-tuning {pre.family} on {task.name!r} with {origin}: {json.dumps(shown)}")
    return finetune(pre, task, config, progress=not args.quiet)


def _report_movement(pre, ft, task, args: argparse.Namespace, utd=None) -> None:
    """Print the source's accuracy before and after and the descriptor's size; warn when it barely moved or got worse."""
    from ..evaluate.measure.movement import movement

    moved = movement(pre, ft, task, utd, args.batch_size)
    print(moved.summary())
    given = getattr(args, "ft_adapter", None) or getattr(args, "ft_checkpoint", None)  # a fine-tune made elsewhere
    warning = moved.warning(f"train {given} longer or with a higher learning rate" if given else
                            "raise --lr or --epochs, or lower --logit-scale",
                            f"check that {given} was fine-tuned on this --task's data" if given else "lower --lr or --epochs")
    if warning:
        print(f"platonic {args.command}: warning: {warning}", file=sys.stderr)


def cmd_finetune(args: argparse.Namespace) -> int:
    task = _the_task(args)
    pre = load_model(args.family, args.checkpoint, args)
    tuned = _finetuned(pre, task, args)
    tuned.save(args.output)
    print(f"wrote {args.output}: {tuned.metadata['mode']} fine-tune of {pre.family} on {task.name!r}, "
          f"{tuned.metadata['steps']} steps, final loss {tuned.losses[-1]:.4g}, task-vector norm {tuned.task_vector.norm():.4g}")
    _report_movement(pre, tuned.encoder, task, args)
    return 0


def cmd_utd(args: argparse.Namespace) -> int:
    from ..data.specs import spec_record
    from ..descriptor import UTD

    task = _the_task(args)
    pre = load_model(args.family, args.checkpoint, args)
    grid = _grid_of(task, args)
    prov = {"grid_per_class": args.per_class, "grid_seed": args.grid_seed, "grid_stratified": args.stratified,
            **spec_record(args.task[0], task, task_options(args))}
    if args.ft_adapter:
        from ..edits.lora_edit import LoraEdit

        ft = LoraEdit.from_pretrained(args.ft_adapter, pre, allow_other_base=args.allow_other_base)
        prov["ft_adapter"] = args.ft_adapter
    elif args.ft_checkpoint:
        ft = _fine_tuned_side(args.ft_checkpoint, pre, args)
        prov["ft_checkpoint"] = args.ft_checkpoint
    else:
        tuned = _finetuned(pre, task, args)
        ft = tuned.encoder
        prov["finetune"] = tuned.metadata
        if args.save_finetune:
            tuned.save(args.save_finetune)
    utd = UTD.compute(pre, ft, grid, args.batch_size, space=args.space, provenance=prov)
    utd.save(args.output)
    print(f"wrote {args.output}: UTD of {task.name!r} on {args.family} ({utd.space} space), shape {utd.shape}, norm {float(utd.matrix.norm()):.4f}, grid {utd.grid_id}")
    _report_movement(pre, ft, task, args, utd)
    return 0


def _fine_tuned_side(path: str, pre, args: argparse.Namespace):
    """--ft-checkpoint: a task-vector file of `pre` (what --save-finetune writes) on a copy of it, else a checkpoint."""
    from ..io import file_kind

    if file_kind(path) == "task_vector":
        from ..finetune import FineTuned

        return FineTuned.load(path, pre).encoder
    if (Path(path) / "adapter_config.json").is_file():
        raise PlatonicError(f"{path} is a peft adapter folder; pass it as --ft-adapter")
    return load_model(pre.family, path, args)


def entry_name(path: str) -> str:
    """A descriptor file's name in a bank: its file name without `.utd.safetensors` / `.safetensors`."""
    name = Path(path).name
    for suffix in (".utd.safetensors", ".safetensors", ".utd"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def bank_label(name: str, labels: Sequence[str]) -> str | None:
    """The bank entry a term names: an entry's label, or a descriptor file whose name gives it (None: no entry)."""
    return name if name in labels else {entry_name(label): label for label in labels}.get(entry_name(name))


def _descriptors(paths: Sequence[str]):
    from ..descriptor import UTD

    names: dict[str, str] = {}
    for p in paths:
        name = entry_name(p)
        if name in names and names[name] != p:
            raise PlatonicError(f"--descriptor {names[name]} and {p} would both be named {name!r} in the bank; rename one")
        names[name] = p
    return {name: UTD.load(p) for name, p in names.items()}


def _say_ridge(ridge_a: float, ridge_b: float, why: str) -> None:
    """The ridge a command solves with, and why, in one line."""
    print(f"ridge {ridge_a:g} / {ridge_b:g} (ridge_a / ridge_b): {why}")


def _bank_of(target, args: argparse.Namespace):
    """The target's OperatorBank with the command's --ridge-a / --ridge-b (else the rule's), its ridge said."""
    from ..transfer import OperatorBank

    bank = OperatorBank(target, args.ridge_a, args.ridge_b, args.batch_size)
    _say_ridge(bank.ridge_a, bank.ridge_b, bank.ridge_why)
    return bank


def cmd_bank(args: argparse.Namespace) -> int:
    descriptors = _descriptors(args.descriptor)
    tasks = resolve_tasks(args.task or [], args)
    grids = [descriptor_grid(label, utd, tasks, args) for label, utd in descriptors.items()]  # refused before the model loads
    target = load_model(args.family, args.checkpoint, args)
    bank = _bank_of(target, args)
    for grid in grids:
        bank.add_grid(grid)
    saved = bank.save(args.output, descriptors)
    print(f"wrote {args.output}: {len(saved.operators)} operator(s) for {target.family} ({', '.join(saved.operators)})")
    return 0


def cmd_edit(args: argparse.Namespace) -> int:
    terms = parse_terms(args)
    if args.bank:
        edit, family = _bank_edit(terms, args)
        target = None
    else:
        edit, target = _fitted_edit(terms, args)
        family = args.family
    if args.output:
        edit.save(args.output)
        print(f"wrote {args.output}: {edit!r}")
    if args.adapter_dir:
        edit.save_pretrained(args.adapter_dir, target)
        print(f"wrote the peft adapter folder {args.adapter_dir} (PeftModel.from_pretrained loads it on the native model)")
    if args.save_model:
        if target is None:  # a bank's edit: the bank's target family, and its checkpoint unless --checkpoint is given
            target = load_model(family, args.checkpoint or edit.meta.get("target_checkpoint"), args)
        with edit.applied_to(target, args.allow_other_target, args.allow_twice):
            target.save(args.save_model)
        print(f"wrote the edited {target.family} checkpoint to {args.save_model}")
    return 0


def _bank_edit(terms: list[tuple[str, float]], args: argparse.Namespace):
    """(edit, target family) of a saved bank's operators."""
    from ..transfer import OperatorBank

    saved = OperatorBank.load(args.bank)  # its target family and entries were checked against the command (cli.files)
    _say_ridge(saved.ridge_a, saved.ridge_b, f"recorded in the bank, {saved.ridge_why or 'which predates the record of why'}")
    terms = [(bank_label(n, saved.operators) or n, c) for n, c in terms]
    return saved.edit(terms, args.strength), saved.target_family


def _fitted_edit(terms: list[tuple[str, float]], args: argparse.Namespace):
    """(edit, target) of descriptor files on --family: the closed form's operator, or (--route lora) a LoRA fit. The
    descriptors' grids and their composition are checked before the target loads."""
    from ..descriptor import Composition

    descriptors = {n: _descriptors([n]).popitem()[1] for n, _ in terms}
    tasks = resolve_tasks(args.task or [], args)
    grids = {label: descriptor_grid(label, utd, tasks, args) for label, utd in descriptors.items()}
    composition = sum((c * descriptors[n] for n, c in terms), Composition(()))
    others = sorted(set(tasks) - {utd.task for utd in descriptors.values()})
    if isinstance(args.strength, str) and args.route != "lora" and not (args.keep or others):
        raise PlatonicError(f"--strength {args.strength} weighs what the edit must leave alone, and nothing is given: add --keep TASK "
                            "(a labelled eval set of another task; repeatable) or --task of another task whose probes must stay put, "
                            "or give a number (--strength 0.5)")
    target = load_model(args.family, args.checkpoint, args)
    if args.route == "lora":
        from ..transfer.lora import fit_lora, lora_recipe

        chosen = {k: v for k, v in (("rank", args.lora_rank), ("lr", args.lora_lr), ("epochs", args.lora_epochs),
                                    ("max_steps", args.lora_steps), ("ridge_b", args.ridge_b)) if v is not None}
        config, why = lora_recipe(target.checkpoint, {**chosen, "seed": args.seed})
        print(f"fitting the LoRA route on {target.family} with {why}: {json.dumps(config.describe())}")
        return fit_lora(target, composition, list(grids.values()), config, progress=not args.quiet).scaled(args.strength), target
    bank = _bank_of(target, args)
    for grid in grids.values():
        bank.add_grid(grid)
    if not isinstance(args.strength, str):
        return bank.edit(composition, args.strength), target
    # a strength rule reads what the edit must leave alone: the labelled --keep tasks, and the other --task tasks' probes
    from ..data.keep import KeepSet

    others = [_grid_of(tasks[name], args) for name in others]
    kept = [KeepSet.from_task(task, args.keep_split) for task in resolve_tasks(args.keep or [], args).values()]
    keep = [*kept, *map(KeepSet.from_grid, others)] if kept else None
    for grid in others:
        bank.add_grid(grid)
    edit = bank.edit(composition, args.strength, keep=keep, budget=args.budget, confidence=args.confidence)
    record = edit.meta["strength_rule"]
    read = ", ".join(f"{k['task']} {k['drop']:.1f} (bound {k['bound']:.1f})" for k in record["kept"] if "bound" in k)
    print(f"strength {record['strength']:.3f} chosen by {args.strength}" + (f"; drops on the kept tasks, points: {read}" if read else ""))
    return edit, target


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..evaluate import accuracy
    from ..transfer import Edit

    tasks = resolve_tasks(args.task, args)
    edit = Edit.load(args.edit) if args.edit else None  # a file that is no edit is refused before the model loads
    model = load_model(args.family, args.checkpoint, args)
    if edit is not None:  # refused (another site, another model) before anything is encoded
        edit.check(model, args.allow_other_target, args.allow_twice)
    rows = {}
    for name, task in tasks.items():
        rows[name] = {"zero_shot": accuracy(model, task, batch_size=args.batch_size)}
        if edit is not None:
            with edit.applied_to(model, args.allow_other_target, args.allow_twice):
                rows[name]["edited"] = accuracy(model, task, batch_size=args.batch_size)
    if args.json:
        from ..evaluate.report.render import rounded

        print(json.dumps(rounded(rows), indent=1))
    else:
        print(f"{'task':<24} {'zero-shot':>10}" + (f" {'edited':>10}" if edit else ""))
        for name, accs in rows.items():
            print(f"{name:<24} {accs['zero_shot']:>10.2f}" + (f" {accs['edited']:>10.2f}" if edit else ""))
    return 0
