"""What the `platonic` subcommands do (cli.py parses; this module acts): resolve tasks and models,
compute descriptors, build operator banks, compose edits, evaluate, run the cell matrix.

Heavy libraries load inside the functions, so `platonic --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from .cli_values import kind_options
from .errors import GridMismatchError, PlatonicError


# ---------------------------------------------------------------------------- checks
def check(args: argparse.Namespace) -> None:
    """The cheapest and most basic facts first, before any model library loads: the family's name (its
    canonical spelling), then the options the command requires and how they combine."""
    from .registry import family_name

    if getattr(args, "family", None):
        args.family = family_name(args.family)
    CHECKS.get(args.command, lambda a: None)(args)


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


def _check_finetune(args: argparse.Namespace) -> None:
    _require_all(args, "--family")
    _one_task(args)
    _require_all(args, "--output")


def _check_utd(args: argparse.Namespace) -> None:
    _require_all(args, "--family")
    _one_task(args)
    if [bool(args.ft_checkpoint), bool(args.ft_adapter), bool(args.finetune)].count(True) != 1:
        raise PlatonicError("give exactly one of --ft-checkpoint (a fine-tuned checkpoint or task-vector file), "
                            "--ft-adapter (a peft LoRA folder) or --finetune (fine-tune here)")
    _require_all(args, "--output")


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
    if isinstance(args.strength, str) and (args.bank or args.route == "lora"):
        raise PlatonicError(f"--strength {args.strength} reads the target's probes on the descriptors' grids: it takes descriptor "
                            "files and the closed form (a --bank file holds no probes; --route lora takes a number)")
    if args.bank and (args.ridge_a is not None or args.ridge_b is not None):
        raise PlatonicError("--bank holds operators already solved with the ridge it records; "
                            "--ridge-a / --ridge-b apply where the bank is built (platonic bank)")
    if not (args.output or args.save_model or args.adapter_dir):
        raise PlatonicError("nothing to write: give --output (the edit) and/or --save-model (the edited checkpoint)")


def _check_evaluate(args: argparse.Namespace) -> None:
    _require_all(args, "--family", "--task")


def _check_grid(args: argparse.Namespace) -> None:
    from .evaluate.registry import method_name

    for name in [*(args.methods or ()), *(n for n, _ in parse_method_cells(args.method_cells or []))]:
        method_name(name)
    check_benchmark_options(args)
    if not (args.benchmark or args.models):
        _check_demo(args)
    _require_all(args, "--out")


def _check_demo(args: argparse.Namespace) -> None:
    """--world names a registered world (its canonical spelling)."""
    from .worlds.registry import WORLDS

    args.world = WORLDS.check(args.world)


CHECKS = {"finetune": _check_finetune, "utd": _check_utd, "bank": _check_bank, "edit": _check_edit, "evaluate": _check_evaluate,
          "grid": _check_grid, "demo": _check_demo}


# ---------------------------------------------------------------------------- tasks
def task_options(args: argparse.Namespace):
    """The TaskOptions of the command's data options."""
    from .data.specs import TaskOptions

    return TaskOptions(args.data_root, args.template, args.test_fraction, args.seed, args.world_seed, args.train_per_class,
                       args.test_per_class)


def resolve_tasks(specs: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    from .data.specs import load_tasks

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
    from .data.specs import TaskOptions, load_task

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
    from .registry import load

    encoder = load(family, checkpoint)
    if args.device:
        encoder.to(args.device)
    return encoder.eval()


# ---------------------------------------------------------------------------- subcommands
def cmd_families(args: argparse.Namespace) -> int:
    from .registry import family, list_families

    names = list_families(args.modality)
    width = max(map(len, names), default=0)
    for name in names:
        spec = family(name)
        print(f"{name:<{width}}  {spec.modality:<5}  {spec.default_checkpoint or '-'}  {spec.description}")
    return 0


RECIPE_OPTIONS = ("mode", "rank", "lora_alpha", "epochs", "lr", "logit_scale", "max_steps")


def finetune_recipe(args: argparse.Namespace, checkpoint: str | None = None):
    """(FinetuneConfig, where its defaults came from): the zoo's own recipe when the checkpoint (default
    --checkpoint) is a zoo member (its manifest records it), else the library's defaults; the command's options win."""
    from .finetune import FinetuneConfig, OrthoReg
    from .worlds.zoo import zoo_recipe

    found = zoo_recipe(checkpoint or getattr(args, "checkpoint", None))
    base, origin = (found[0], f"the zoo's recipe ({found[1]})") if found else ({}, "the library's defaults")
    chosen = {k: getattr(args, k) for k in RECIPE_OPTIONS if getattr(args, k, None) is not None}
    if getattr(args, "orthoreg", None) is not None:
        chosen["orthoreg"] = OrthoReg(args.orthoreg)
    if chosen:
        origin += ", with " + ", ".join(f"--{k.replace('_', '-')}" for k in chosen)
    return FinetuneConfig(**{**base, **chosen, "seed": args.seed}), origin


def _the_task(args: argparse.Namespace):
    """The one --task of finetune and utd."""
    from .data.specs import load_task

    return load_task(args.task[0], task_options(args))


def _finetuned(pre, task, args: argparse.Namespace):
    """Fine-tune `pre` on `task` with the command's recipe, saying which recipe it is."""
    from .finetune import finetune

    config, origin = finetune_recipe(args)
    shown = {k: v for k, v in config.describe().items() if k in (*RECIPE_OPTIONS, "batch_size") or k == "orthoreg" and v["weight"]}
    print(f"fine-tuning {pre.family} on {task.name!r} with {origin}: {json.dumps(shown)}")
    return finetune(pre, task, config, progress=not args.quiet)


def _report_movement(pre, ft, task, args: argparse.Namespace, utd=None) -> None:
    """Print the source's accuracy before and after and the descriptor's size; warn when it barely moved."""
    from .evaluate.movement import movement

    moved = movement(pre, ft, task, utd, args.batch_size)
    print(moved.summary())
    warning = moved.warning()
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
    from .data.specs import spec_record
    from .descriptor import UTD

    task = _the_task(args)
    pre = load_model(args.family, args.checkpoint, args)
    grid = _grid_of(task, args)
    prov = {"grid_per_class": args.per_class, "grid_seed": args.grid_seed, "grid_stratified": args.stratified,
            **spec_record(args.task[0], task, task_options(args))}
    if args.ft_adapter:
        from .edits.lora_edit import LoraEdit

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
    from .io import file_kind

    if file_kind(path) == "task_vector":
        from .finetune import FineTuned

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


def _descriptors(paths: Sequence[str]):
    from .descriptor import UTD

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
    from .transfer import OperatorBank

    bank = OperatorBank(target, args.ridge_a, args.ridge_b, args.batch_size)
    _say_ridge(bank.ridge_a, bank.ridge_b, bank.ridge_why)
    return bank


def cmd_bank(args: argparse.Namespace) -> int:
    descriptors = _descriptors(args.descriptor)
    tasks = resolve_tasks(args.task or [], args)
    target = load_model(args.family, args.checkpoint, args)
    bank = _bank_of(target, args)
    for label, utd in descriptors.items():
        bank.add_grid(descriptor_grid(label, utd, tasks, args))
    saved = bank.save(args.output, descriptors)
    print(f"wrote {args.output}: {len(saved.operators)} operator(s) for {target.family} ({', '.join(saved.operators)})")
    return 0


def parse_terms(args: argparse.Namespace) -> list[tuple[str, float]]:
    """(name, coefficient) of --add NAME, --negate NAME and --term NAME=COEF, in that order."""
    terms = [(n, 1.0) for n in args.add or []] + [(n, -1.0) for n in args.negate or []]
    for item in args.term or []:
        name, sep, coef = item.rpartition("=")
        try:
            terms.append((name, float(coef)))
        except ValueError:
            raise PlatonicError(f"--term takes NAME=COEFFICIENT, got {item!r}") from None
        if not sep:
            raise PlatonicError(f"--term takes NAME=COEFFICIENT, got {item!r}")
    if not terms:
        raise PlatonicError("an edit needs at least one term: --add, --negate or --term")
    return terms


def cmd_edit(args: argparse.Namespace) -> int:
    terms = parse_terms(args)
    if args.bank:
        edit, family = _bank_edit(terms, args)
        target = None
    else:
        target = load_model(args.family, args.checkpoint, args)
        edit, family = _fitted_edit(terms, target, args), args.family
    if args.output:
        edit.save(args.output)
        print(f"wrote {args.output}: {edit!r}")
    if args.adapter_dir:
        edit.save_pretrained(args.adapter_dir, target)
        print(f"wrote the peft adapter folder {args.adapter_dir} (PeftModel.from_pretrained loads it on the native model)")
    if args.save_model:
        if target is None:  # a bank's edit: the bank's target family, and its checkpoint unless --checkpoint is given
            target = load_model(family, args.checkpoint or edit.meta.get("target_checkpoint"), args)
        with edit.applied_to(target, args.allow_other_target):
            target.save(args.save_model)
        print(f"wrote the edited {target.family} checkpoint to {args.save_model}")
    return 0


def _bank_edit(terms: list[tuple[str, float]], args: argparse.Namespace):
    """(edit, target family) of a saved bank's operators."""
    from .transfer import OperatorBank

    saved = OperatorBank.load(args.bank)
    if args.family and args.family != saved.target_family:
        raise PlatonicError(f"bank {args.bank} was built for {saved.target_family!r}, not {args.family!r}")
    _say_ridge(saved.ridge_a, saved.ridge_b, f"recorded in the bank, {saved.ridge_why or 'which predates the record of why'}")
    labels = {entry_name(label): label for label in saved.operators}  # a term may name an entry or its descriptor file
    terms = [(n if n in saved.operators else labels.get(entry_name(n), n), c) for n, c in terms]
    return saved.edit(terms, args.strength), saved.target_family


def _fitted_edit(terms: list[tuple[str, float]], target, args: argparse.Namespace):
    """The edit of descriptor files on `target`: the closed form's operator, or (--route lora) a LoRA fit."""
    from .descriptor import Composition

    descriptors = {n: _descriptors([n]).popitem()[1] for n, _ in terms}
    tasks = resolve_tasks(args.task or [], args)
    grids = {label: descriptor_grid(label, utd, tasks, args) for label, utd in descriptors.items()}
    composition = sum((c * descriptors[n] for n, c in terms), Composition(()))
    if args.route == "lora":
        from .transfer.lora import fit_lora, lora_recipe

        chosen = {k: v for k, v in (("rank", args.lora_rank), ("lr", args.lora_lr), ("epochs", args.lora_epochs),
                                    ("max_steps", args.lora_steps), ("ridge_b", args.ridge_b)) if v is not None}
        config, why = lora_recipe(target.checkpoint, {**chosen, "seed": args.seed})
        print(f"fitting the LoRA route on {target.family} with {why}: {json.dumps(config.describe())}")
        return fit_lora(target, composition, list(grids.values()), config, progress=not args.quiet).scaled(args.strength)
    bank = _bank_of(target, args)
    for grid in grids.values():
        bank.add_grid(grid)
    if isinstance(args.strength, str):  # a strength rule also reads the probes of the other --task tasks' grids
        for name in set(tasks) - {utd.task for utd in descriptors.values()}:
            bank.add_grid(_grid_of(tasks[name], args))
    return bank.edit(composition, args.strength)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluate import accuracy
    from .transfer import Edit

    tasks = resolve_tasks(args.task, args)
    model = load_model(args.family, args.checkpoint, args)
    edit = Edit.load(args.edit) if args.edit else None
    if edit is not None:  # refused (another site, another model) before anything is encoded
        edit.check(model, args.allow_other_target)
    rows = {}
    for name, task in tasks.items():
        rows[name] = {"zero_shot": accuracy(model, task, batch_size=args.batch_size)}
        if edit is not None:
            with edit.applied_to(model, args.allow_other_target):
                rows[name]["edited"] = accuracy(model, task, batch_size=args.batch_size)
    if args.json:
        from .evaluate.report import rounded

        print(json.dumps(rounded(rows), indent=1))
    else:
        print(f"{'task':<24} {'zero-shot':>10}" + (f" {'edited':>10}" if edit else ""))
        for name, accs in rows.items():
            print(f"{name:<24} {accs['zero_shot']:>10.2f}" + (f" {accs['edited']:>10.2f}" if edit else ""))
    return 0


# ---------------------------------------------------------------------------- grid
def workspace_from_config(args: argparse.Namespace):
    """A Workspace from a config's [grid.models] and [[grid.finetuned]] tables."""
    from .descriptor import UTD
    from .evaluate.workspace import Workspace

    models = {name: load_model(_require(m.get("family"), f"models.{name}.family"), m.get("checkpoint"), args) for name, m in args.models.items()}
    tasks = resolve_tasks(args.tasks or [], args)
    controls = resolve_tasks(args.controls or [], args)
    tasks.update(controls)
    finetuned = {}
    for entry in args.finetuned or []:
        model, task = entry.get("model"), entry.get("task")
        if model not in models or task not in tasks:
            raise PlatonicError(f"finetuned entry {entry} names an unknown model or task")
        if "utd" in entry:
            finetuned[(model, task)] = UTD.load(entry["utd"])
        else:
            finetuned[(model, task)] = load_model(models[model].family, _require(entry.get("checkpoint"), "finetuned.checkpoint"), args)
    ridges = {k: getattr(args, k) for k in ("ridge_a", "ridge_b") if getattr(args, k) is not None}  # else the library's
    return Workspace(models, tasks, finetuned, list(controls), per_class=args.per_class, grid_seed=args.grid_seed,
                     batch_size=args.batch_size, progress=not args.quiet, **ridges)


def parse_models(items: Sequence[str], families: Sequence[str]) -> dict[str, str]:
    """{family: checkpoint} of --model FAMILY=CHECKPOINT; each family must be one of `families` (a typo is no family)."""
    out = {}
    for item in items:
        family, sep, checkpoint = item.partition("=")
        if not sep or not family or not checkpoint:
            raise PlatonicError(f"--model takes FAMILY=CHECKPOINT, got {item!r}")
        if family not in families:
            raise PlatonicError(f"--model {item!r}: {family!r} is not among the benchmark's families ({', '.join(families)})")
        out[family] = checkpoint
    return out


def check_benchmark_options(args: argparse.Namespace) -> None:
    """--benchmark names a known benchmark, which brings its own tasks, controls and models; --model and
    --finetunes belong to it."""
    if args.benchmark:
        from .data.benchmark import benchmark_name

        args.benchmark = benchmark_name(args.benchmark)
        clash = [o for o, v in (("--task", args.tasks), ("--controls", args.controls), ("models in --config", args.models)) if v]
        if clash:
            raise PlatonicError(f"--benchmark {args.benchmark} brings its own tasks, controls and families: drop {', '.join(clash)}")
    elif args.model or args.finetunes:
        raise PlatonicError("--model and --finetunes choose the checkpoints and fine-tunes of a --benchmark; give --benchmark NAME")


def benchmark_workspace_from_args(args: argparse.Namespace, dry: bool = False):
    """(Workspace, description, held-out names) of --benchmark: its datasets under --data-root (every
    missing one named before any model loads), the families' checkpoints, their fine-tunes (`dry`: the
    fine-tunes are neither made nor read; the description lists those to make)."""
    from .data.benchmark import benchmark, load_benchmark
    from .evaluate.benchmark_workspace import benchmark_workspace

    bench = benchmark(args.benchmark)
    families = list(args.families or bench.families)
    checkpoints = parse_models(args.model or [], list(dict.fromkeys([*bench.families, *families])))  # --families picks among them
    root = _require(args.data_root, "--data-root")
    loaded = load_benchmark(bench, root, seed=args.seed, test_fraction=args.test_fraction)
    models = {}
    for family in families:
        checkpoint = checkpoints.get(family)
        try:
            models[family] = load_model(family, checkpoint, args)
        except (OSError, ValueError) as exc:  # a hub id without network, a folder that is not a checkpoint
            raise PlatonicError(f"cannot load {family} from {checkpoint or 'its reference checkpoint'} "
                                f"({' '.join(str(exc).split()).rstrip('.')}); give --model {family}=PATH of a local checkpoint") from None
    recipes = {f: finetune_recipe(args, checkpoints.get(f)) for f in families}
    finetunes = Path(args.finetunes or Path(args.out) / "finetunes")
    ridges = {k: getattr(args, k) for k in ("ridge_a", "ridge_b") if getattr(args, k) is not None}  # else the library's
    options = dict(per_class=args.per_class, grid_seed=args.grid_seed, batch_size=args.batch_size, **ridges)
    if dry:
        from .evaluate.benchmark_workspace import finetune_file
        from .evaluate.workspace import Workspace

        pairs = [(f, t.name) for f in families for t in bench.tasks]
        ws = Workspace(models, loaded.tasks, dict.fromkeys(pairs), loaded.controls, **options)  # fine-tunes by name only
        missing = [(f, t) for f, t in pairs if not finetune_file(finetunes, f, t).is_file()]
        per_family = {f: [t for g, t in missing if g == f] for f in families}
        dry_run = {"finetunes to make": f"{len(missing)} of {len(pairs)}" + (
            f" ({'; '.join(f'{f}: {len(ts)} tasks' for f, ts in per_family.items() if ts)}; "
            f"{sum(len(loaded.tasks[t].train) for _, t in missing)} train items in all)" if missing else "")}
    else:
        ws = benchmark_workspace(loaded, models, finetunes, lambda f: recipes[f][0], progress=not args.quiet, **options)
        dry_run = {}
    describe = {**dry_run,
        "benchmark": f"{bench.name}: {bench.description}", "benchmark data": os.path.abspath(root),
        "checkpoints": {f: models[f].checkpoint for f in families}, "finetunes": str(finetunes.resolve()),
        "finetune recipe": {f: origin for f, (_, origin) in recipes.items()},
    }
    return ws, describe, loaded.held_out


def cmd_grid(args: argparse.Namespace) -> int:
    from .evaluate.ranks import rank_folder

    if args.dry_run:
        return _dry_run(args)
    with rank_folder(args.out) as folder:  # locked before any model loads (on rank 0)
        return _grid(args, folder)


def _grid(args: argparse.Namespace, folder) -> int:
    from .evaluate.experiment import run_experiment
    from .evaluate.report import plural

    started = time.perf_counter()
    ws, config, describe, title = _experiment(args)
    summary = run_experiment(ws, folder, config, describe, progress=not args.quiet, title=title)
    if summary is not None:  # rank 0 (or the only process)
        wall = time.perf_counter() - started
        print(f"{plural(summary['cells']['records'], 'cell')}; report {folder.path / 'report.md'}; wall time {wall:.1f} s "
              f"(run stages {summary['timings']['total']:.1f} s)")
    return 0


def _dry_run(args: argparse.Namespace) -> int:
    """Check every dataset and model, print the cells, the items each model encodes and what the feature cache
    already holds; write nothing (no run folder, no fine-tunes, no cache entries)."""
    from .evaluate.experiment import method_passes, selected_cells
    from .feature_store import active_store

    ws, config, describe, title = _experiment(args, dry=True)
    print(f"{title} --dry-run: every dataset and model loads; nothing was written")
    for key in ("benchmark", "benchmark data", "finetunes", "finetunes to make"):
        if key in describe:
            print(f"{key}: {describe[key]}")
    print(f"ridge {ws.ridge_a:g} / {ws.ridge_b:g}; grids: {ws.per_class} probes per class, seed {ws.grid_seed}")
    for selection in config.cells:
        cells = selected_cells(ws, selection, config.pairing)
        print(f"cells: {len(cells)} {selection.kind} ({selection.group})")
    print(f"records (cells x method passes): {len(method_passes(ws, config))}; methods: {', '.join(config.methods)}")
    store = active_store()
    print(f"feature cache: {store.root}" if store is not None else "feature cache: off (--no-cache)")
    evaluated = [t for t, task in ws.tasks.items() if len(task.test)]
    probed = list(ws.transfer_tasks)
    for family, model in ws.models.items():
        sets = [(f"{t} test", ws.tasks[t].test.items) for t in evaluated] + [(f"{t} probes", ws.grid(t).items) for t in probed]
        total = sum(len(items) for _, items in sets)
        cached = [len(items) for _, items in sets if store is not None and store.holds(model, items)]
        sources = [t for t in probed if (family, t) in ws.finetuned]
        ft_rows = sum(len(ws.grid(t).items) for t in sources)
        print(f"{family}: {total} items to encode ({len(evaluated)} test splits, {len(probed)} probe grids), "
              f"{sum(cached)} of them in the feature cache ({len(cached)} of {len(sets)} sets); "
              f"{ft_rows} fine-tuned probe rows on {len(sources)} fine-tunes")
    return 0


def _experiment(args: argparse.Namespace, dry: bool = False):
    """(workspace, ExperimentConfig, description, title) of `platonic grid`'s options (`dry`: no fine-tune is made)."""
    from .data.specs import load_task
    from .evaluate.experiment import ExperimentConfig, selections
    from .evaluate.settings import DEFAULT_METHODS, CellSettings
    from .evaluate.workspace import zoo_workspace
    from .worlds.registry import world_spec

    title = "platonic grid"
    if args.benchmark:
        ws, describe, held = benchmark_workspace_from_args(args, dry)
        lora, title = {}, f"platonic grid --benchmark {args.benchmark}"
        if args.held_out is None:
            args.held_out = list(held)
    elif args.models:
        ws, lora, describe = workspace_from_config(args), {}, {"models": f"from {args.config}"}
    else:
        ws, describe = zoo_workspace(args.world, seed=args.world_seed, families=args.families, tasks=args.tasks, controls=args.controls,
                                     ridge_a=args.ridge_a, ridge_b=args.ridge_b, device=args.device, train_per_class=args.train_per_class,
                                     test_per_class=args.test_per_class, per_class=args.per_class, grid_seed=args.grid_seed,
                                     batch_size=args.batch_size, progress=not args.quiet)
        spec = world_spec(args.world)
        lora = dict(spec.settings().lora)
        if args.held_out is None:
            args.held_out = list(spec.make(seed=args.world_seed).trio)
    held_out = []
    for name in args.held_out or ():  # evaluation-only tasks join the workspace (never probed, never fine-tuned)
        task = ws.tasks.get(name) or load_task(name, task_options(args))
        ws.tasks.setdefault(task.name, task)
        held_out.append(task.name)
    lora.update({"ridge_b": ws.ridge_b, **{k: v for k, v in (("lr", args.lora_lr), ("epochs", args.lora_epochs),
                                                              ("max_steps", args.lora_steps)) if v is not None}})
    given = lambda *names: {k: getattr(args, k) for k in names if getattr(args, k) is not None}  # noqa: E731  (else the classes' defaults)
    counts = {k: v or None for k, v in given("sweep_cells", "similarity_probes").items()}  # 0: every cell / probe
    config = ExperimentConfig(
        cells=selections(args.kinds, args.groups, args.max_cells), pairing=args.pairing,
        settings=CellSettings(**given("addition_strength", "negation_strength", "weight_space_strength", "space"), lora=lora, seed=args.seed, **kind_options(args)),
        methods=tuple(dict.fromkeys(["zero_shot", *args.methods])) if args.methods else DEFAULT_METHODS,
        method_cells=dict(parse_method_cells(args.method_cells or [])), held_out=tuple(held_out), similarity=not args.no_similarity,
        **given("sweep_strengths"), **counts,
    )
    describe = {**describe, "command": "platonic grid", "task specs": [*(args.tasks or ()), *(args.controls or ())],
                **{k: getattr(args, k) for k in ("world_seed", "train_per_class", "test_per_class", "test_fraction", "data_root")}}
    return ws, config, describe, title


def parse_method_cells(items: Sequence[str]) -> list[tuple[str, int | None]]:
    """(method, cap) pairs of --method-cells NAME=N (N = all: every cell)."""
    out = []
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not (count == "all" or count.isdigit()):
            raise PlatonicError(f"--method-cells takes NAME=N or NAME=all, got {item!r}")
        out.append((name, None if count == "all" else int(count)))
    return out


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.main(args) or 0
