"""Parsing of the `platonic` command: every subcommand's options (`build_parser`), `--paper`, and options from a TOML
file (`--config run.toml`: top-level keys apply to every subcommand, a [utd] / [grid] / ... table to one;
command-line options win)."""

from __future__ import annotations

import argparse
from typing import Sequence

from ..errors import PlatonicError
from ..evaluate.plan.presets import preset, preset_names
from ..evaluate.plan.settings import DEFAULT_METHODS, KEEP_CHOICES, KIND_CHOICES, CellSettings, ExperimentConfig, default, default_keep
from ..ridge import RIDGE_A, RIDGE_B
from ..spaces import DEFAULT_SPACE, SPACES
from ..strength import DEFAULT_BUDGET, DEFAULT_CONFIDENCE, DEFAULT_STRENGTH_RULE
from ..version import __version__
from ..worlds.registry import world_names
from . import commands, demo
from . import grid as grid_commands
from .values import (
    config_tables,
    config_value,
    count,
    device,
    finite_float,
    fraction,
    non_negative_float,
    output_dir,
    output_file,
    positive_float,
    positive_int,
    strength_or_rule,
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _common(batch_size: int = 64) -> Parser:
    """The options every command takes; a fresh parser per command, so that one command's defaults never reach another's."""
    p = Parser(add_help=False)
    g = p.add_argument_group("general")
    g.add_argument("--config", metavar="TOML", help="read options from a TOML file (command line wins)")
    g.add_argument("--device", type=device, help="torch device for the models, e.g. cpu or cuda (default: where they load)")
    g.add_argument("--batch-size", type=positive_int, default=batch_size, help=f"encoding batch size (default {batch_size})")
    g.add_argument("--seed", type=count, default=0, help="seed for splits, fine-tuning and baselines (default 0)")
    g.add_argument("--threads", type=positive_int, help="torch CPU threads (default: torch's, one per core)")
    g.add_argument("--quiet", action="store_true", help="no progress bars")
    g.add_argument("--cache-dir", metavar="DIR", help="on-disk feature cache (default: $PLATONIC_CACHE_DIR, else ~/.cache/platonic_sdk/features)")
    g.add_argument("--no-cache", action="store_true", help="encode everything again, reading and writing no feature cache")
    g.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    g.add_argument("--plugin", action="append", metavar="MODULE|FILE.py",
                   help="import a module or file first (e.g. one that calls register_family); repeatable")
    return p


def _data() -> Parser:
    p = Parser(add_help=False)
    g = p.add_argument_group("tasks and grids")
    g.add_argument("--data-root", metavar="DIR", help="base folder of the paths in data task specs (images:, csv:, torchvision:, hf:, audio:, ...)")
    g.add_argument("--template", action="append", metavar="T", help="prompt template with {} (repeatable; folder tasks)")
    g.add_argument("--test-fraction", type=fraction, default=0.2, help="test share of folder tasks without a split (0.2)")
    g.add_argument("--world-seed", type=count, default=0,
                   help="a world's seed (0): it redraws a synthetic world's items; on a world of real items (real, real_audio) "
                        "a seed N >= 1 is replicate N, splits redrawn with probes held out of sources fine-tuned anew")
    g.add_argument("--train-per-class", type=positive_int, help="synthetic-world train items per class (default: the world's, 64)")
    g.add_argument("--test-per-class", type=positive_int, help="synthetic-world test items per class (default: the world's, 40)")
    g.add_argument("--per-class", type=positive_int, default=30, help="probes per class in a task grid (30)")
    g.add_argument("--grid-seed", type=count, default=0, help="seed of the probe draw (0)")
    g.add_argument("--stratified", action="store_true", help="draw probes per class instead of uniformly")
    return p


def _task() -> Parser:
    p = Parser(add_help=False)
    p.add_argument(
        "--task", action="append", metavar="SPEC",
        help="NAME (synthetic world) or [NAME=]images:DIR, [NAME=]audio:DIR, [NAME=]csv:FILE (repeatable)",
    )
    return p


def _model(required_help: str = "") -> Parser:
    p = Parser(add_help=False)
    g = p.add_argument_group("model")
    g.add_argument("--family", help="registered family name (see `platonic families`)" + required_help)
    g.add_argument("--checkpoint", help="checkpoint folder, file or hub id (default: the family's reference)")
    return p


def _ridge() -> Parser:
    p = Parser(add_help=False)
    g = p.add_argument_group("closed form")
    rule = "default: the world's when --checkpoint is a member of a world's zoo, else the paper's"
    g.add_argument("--ridge-a", type=non_negative_float, help=f"probe-side ridge, relative to mean sigma(F)^2 ({rule}, {RIDGE_A:g})")
    g.add_argument("--ridge-b", type=non_negative_float, help=f"landmark-side ridge, relative to mean sigma(G)^2 ({rule}, {RIDGE_B:g})")
    return p


def _allow_other_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-other-target", action="store_true",
        help="apply the edit even to a model other than the one it was made for (e.g. another checkpoint of its family)",
    )
    p.add_argument("--allow-twice", action="store_true",
                   help="apply the edit even where an identical one is already folded into the checkpoint (it then counts twice)")


def _recipe(member: str = "--checkpoint is", of: str = "") -> Parser:
    p = Parser(add_help=False)
    g = p.add_argument_group(f"fine-tuning recipe{of} (default: the zoo's own when {member} a zoo member, else the library's)")
    g.add_argument("--mode", choices=("lora", "full"), help="LoRA on the tower's attention q/v, or full fine-tuning (lora)")
    g.add_argument("--rank", type=positive_int, help="LoRA rank (4)")
    g.add_argument("--lora-alpha", type=positive_float, help="peft's lora_alpha: updates are (lora_alpha / rank) B A (8; not the edit strength)")
    g.add_argument("--epochs", type=positive_int, help="epochs (library 3; image zoo 10)")
    g.add_argument("--lr", type=positive_float, help="learning rate (library 1e-4; image zoo 5e-3)")
    g.add_argument("--logit-scale", type=positive_float, help="temperature s of the loss CE(s <f, g>) (library 100; image zoo 1/0.07)")
    g.add_argument("--orthoreg", type=non_negative_float, metavar="WEIGHT", help="OrthoReg penalty weight lambda (0: off)")
    g.add_argument("--max-steps", type=positive_int, help="cap on optimiser steps")
    return p


def _experiment_options(p: Parser) -> None:
    """The zoo and the ridges of `platonic grid`: a world's zoo runs with the world's settings unless overridden."""
    g = p.add_argument_group("zoo and closed form")
    g.add_argument("--world", default="image",
                   help=f"registered world whose zoo runs without models in --config ({', '.join(world_names())}; image)")
    g.add_argument("--families", nargs="+", help="zoo (or --benchmark) families to include (default: all)")
    for side, lib in (("a", RIDGE_A), ("b", RIDGE_B)):
        g.add_argument(f"--ridge-{side}", type=non_negative_float,
                       help=f"ridge_{side}, relative (default: the world's tuned value, which the report lists; models from --config: {lib:g})")


def build_parser() -> Parser:
    parser = Parser(prog="platonic", description="Move task edits between dual encoders (UTDs, closed-form operators).")
    parser.add_argument("--version", action="version", version=f"platonic_sdk {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    p = sub.add_parser("families", parents=[_common()], help="list the registered model families")
    p.add_argument("--modality", choices=("image", "audio"), help="only families of one modality")
    p.set_defaults(func=commands.cmd_families)

    p = sub.add_parser("finetune", parents=[_common(), _model(), _task(), _data(), _recipe()], help="fine-tune a source model on a task and save the fine-tune")
    p.add_argument("-o", "--output", type=output_file, metavar="FILE", help="where to write the fine-tune (.safetensors task vector)")
    p.set_defaults(func=commands.cmd_finetune)

    p = sub.add_parser("utd", parents=[_common(), _model(), _task(), _data(), _recipe()], help="compute a task descriptor and save it")
    p.add_argument("--ft-checkpoint", help="the fine-tuned checkpoint (same family; --checkpoint is the pretrained one), "
                   "or a task-vector file of --checkpoint (what --save-finetune writes; the zoo's fine-tunes)")
    p.add_argument("--ft-adapter", metavar="DIR", help="a peft LoRA adapter folder trained on --checkpoint (the fine-tuned side)")
    p.add_argument("--allow-other-base", action="store_true",
                   help="accept an adapter whose recorded base model has another name (e.g. the hub id of a local copy)")
    p.add_argument("--finetune", action="store_true", help="fine-tune --checkpoint on the task here instead (with the recipe options)")
    p.add_argument("--save-finetune", type=output_file, metavar="FILE", help="also save the fine-tune's task vector")
    p.add_argument("--space", type=str.lower, default=DEFAULT_SPACE,
                   help=f"descriptor space: affinity (the paper's UTD), probability, pseudo_label, confidence or blend (centred "
                        f"affinity + confidence), or one a --plugin registers; all but affinity are scaled to the affinity UTD's norm "
                        f"(docs/method.md sec. 15; {DEFAULT_SPACE})")
    p.add_argument("-o", "--output", type=output_file, metavar="FILE", help="where to write the UTD (.safetensors)")
    p.set_defaults(func=commands.cmd_utd)

    p = sub.add_parser("bank", parents=[_common(), _model(), _task(), _data(), _ridge()], help="build a target's operators for descriptors")
    p.add_argument("--descriptor", nargs="+", metavar="FILE", help="UTD files; each operator is named by its file stem")
    p.add_argument("-o", "--output", type=output_file, metavar="FILE", help="where to write the operator bank (.safetensors)")
    p.set_defaults(func=commands.cmd_bank)

    p = sub.add_parser("edit", parents=[_common(), _model(), _task(), _data(), _ridge()],
                       help="compose descriptors into an edit of a target (closed form, or the LoRA route to a peft adapter)")
    p.add_argument("--route", choices=("closed-form", "lora"), default="closed-form",
                   help="closed-form operator folded into the last affine map, or LoRA fitted on the media tower (closed-form)")
    p.add_argument("--adapter-dir", type=output_dir, metavar="DIR", help="--route lora: also write the fit as a peft adapter folder")
    p.add_argument("--bank", metavar="FILE", help="compose operators of this bank (terms name its entries)")
    p.add_argument("--add", action="append", metavar="NAME", help="add a task: UTD file, or bank entry with --bank")
    p.add_argument("--negate", action="append", metavar="NAME", help="remove a task (coefficient -1)")
    p.add_argument("--term", action="append", metavar="NAME=COEF", help="a term with any coefficient")
    p.add_argument("--strength", type=strength_or_rule,
                   help="auto (the default, as bank.edit, platonic grid and demo): chosen from the target, the descriptors' grids "
                        "and what the edit must leave alone (--keep, or the grids of the other --task tasks); a rule's name; or a "
                        "number, the fixed strength (the default with --bank and --route lora, which hold no probes: 0.5, the "
                        "paper's addition; docs/method.md sec. 17 and 18)")
    p.add_argument("--keep", action="append", metavar="TASK",
                   help="a task the edit must leave alone, with its labelled items (a task as --task takes it; repeatable): "
                        "--strength auto spends --budget accuracy points on them")
    p.add_argument("--keep-split", choices=("test", "train"), default="test",
                   help="the split of each --keep task that holds your labelled items (test: its eval set)")
    p.add_argument("--budget", type=positive_float, metavar="POINTS",
                   help=f"accuracy points a --keep task may lose (default {DEFAULT_BUDGET:g})")
    p.add_argument("--confidence", type=fraction, metavar="Q",
                   help=f"confidence that no --keep task loses more than --budget (default {DEFAULT_CONFIDENCE:g})")
    p.add_argument("-o", "--output", type=output_file, metavar="FILE", help="where to write the edit (.safetensors)")
    p.add_argument("--save-model", type=output_dir, metavar="DIR", help="also save the edited checkpoint with the family's save "
                   "(with --bank: of the bank's target unless --family/--checkpoint say otherwise)")
    _allow_other_target(p)
    _lora_options(p, "--route lora", "a zoo member's world recipe, else ")
    p.add_argument("--lora-rank", type=positive_int, help="--route lora: LoRA rank (default: a zoo member's world recipe, else LoraRouteConfig's, 16)")
    p.set_defaults(func=commands.cmd_edit)

    p = sub.add_parser("evaluate", parents=[_common(), _model(), _task(), _data()], help="zero-shot accuracy, optionally with an edit")
    p.add_argument("--edit", metavar="FILE", help="an edit file to apply (accuracy before and after)")
    p.add_argument("--json", action="store_true", help="print JSON")
    _allow_other_target(p)
    p.set_defaults(func=commands.cmd_evaluate)

    p = sub.add_parser("grid", parents=[_common(batch_size=256), _data(), _recipe("--model names", " of the fine-tunes --benchmark makes")],
                       help="run cells with any registered methods and the studies; write report.md")
    _experiment_options(p)
    g = p.add_argument_group("benchmark (the paper's studies on datasets under --data-root)")
    g.add_argument("--benchmark", metavar="NAME", help="a registered benchmark: paper-image or paper-audio (user guide, Benchmarks)")
    g.add_argument("--model", action="append", metavar="FAMILY=CHECKPOINT",
                   help="checkpoint folder or hub id of a benchmark family (repeatable; default: the family's reference)")
    g.add_argument("--finetunes", type=output_dir, metavar="DIR",
                   help="the families' fine-tunes, DIR/<family>/<task>.safetensors; missing ones are made there (default: OUT/finetunes)")
    g.add_argument("--dry-run", action="store_true",
                   help="check every dataset and model, print the cells, the items each model encodes and what the feature cache "
                        "holds; write nothing")
    p.add_argument("--out", type=output_dir, metavar="DIR", help="run folder (rerunning with the same settings resumes finished cells)")
    p.add_argument("--task", dest="tasks", action="append", metavar="SPEC", help="tasks (default: the zoo's transfer tasks)")
    p.add_argument("--controls", nargs="+", metavar="SPEC", help="control sets (default: the world's)")
    p.add_argument("--kinds", nargs="+", choices=("addition", "negation"), default=["addition", "negation"])
    p.add_argument("--groups", nargs="+", choices=("cross-family", "same-architecture", "same-model"), default=["cross-family"])
    p.add_argument("--pairing", choices=("auto", "distinct", "any"), default="auto", help="source families of the two tasks")
    p.add_argument("--methods", type=lambda v: v.split(","), metavar="M1,M2,...",
                   help=f"registered cell methods, e.g. closed_form,lora (zero_shot always; default: {','.join(DEFAULT_METHODS)})")
    p.add_argument("--method-cells", action="append", metavar="NAME=N", help="cap a method's cells per kind and group (N or all; lora: 8)")
    for kind in ("addition", "negation", "weight_space"):
        name = f"{kind}_strength"
        what = ("strength of weight-space task vectors" if kind == "weight_space" else
                f"fixed strength on {kind} cells (under a strength rule, that of the methods the rule does not choose for)")
        p.add_argument(f"--{name.replace('_', '-')}", type=finite_float, help=f"{what} ({default(CellSettings, name)})")
    _strength_rule_option(p)
    _keep_options(p)
    _kind_options(p)
    p.add_argument("--space", type=str.lower,
                   help=f"descriptor space of every descriptor-transferring method and study ({', '.join(SPACES)} or one a --plugin "
                        f"registers; default: {default(CellSettings, 'space')}; closed_form_<space> methods compare the others)")
    _preset_option(p)
    _lora_options(p, "LoRA route", "the world's, else ")
    p.add_argument("--sweep-strengths", nargs="+", type=finite_float, help="strengths of the sweep (default: 0 to 2 in steps of 0.25)")
    p.add_argument("--sweep-cells", type=count, help=f"cells per kind in the strength sweep, evenly spaced ({default(ExperimentConfig, 'sweep_cells')}; 0: all)")
    p.add_argument("--held-out", nargs="+", metavar="TASK", help="related tasks then the held-out task (worlds: their trio)")
    p.add_argument("--no-similarity", action="store_true", help="skip the descriptor similarity study")
    p.add_argument("--similarity-probes", type=count,
                   help=f"probes per task in the similarity union grid ({default(ExperimentConfig, 'similarity_probes')}; 0: all)")
    p.add_argument("--max-cells", type=positive_int, help="at most this many cells per kind and group, evenly spread")
    _workers_option(p)
    p.set_defaults(func=grid_commands.cmd_grid, models=None, finetuned=None)

    shown = preset("demo").experiment
    lora_cells, weight_space_cells = shown["method_cells"]["lora"], next(c["max_cells"] for c in shown["cells"] if c.get("group") == "same-model")
    p = sub.add_parser("demo", parents=[_common(batch_size=256)], help="the offline demo: the experiment runner's preset on a world's zoo")
    p.add_argument("--out", type=output_dir, default="out/demo", help="run folder (out/demo; rerunning with the same settings resumes)")
    p.add_argument("--world", "--modality", dest="world", default="image", help=f"registered world and its zoo ({', '.join(world_names())}; image)")
    p.add_argument("--families", nargs="+", help="zoo families to include (default: all)")
    p.add_argument("--lora-cells", type=count, help=f"addition and negation cells that also run the LoRA route (the preset's: {lora_cells}; 0: none)")
    p.add_argument("--weight-space-cells", type=count, help=f"same-model cells with weight-space arithmetic (the preset's: {weight_space_cells}; 0: none)")
    p.add_argument("--orthoreg-tasks", type=count, default=0,
                   help="run the OrthoReg study on this many tasks (0: off; 3 tasks: six fine-tunes, then every merging "
                        "method's addition and negation sweeps, about 3 CPU-minutes on one core)")
    _kind_options(p)
    p.add_argument("--space", type=str.lower,
                   help=f"descriptor space of the closed form and the studies ({', '.join(SPACES)} or one a --plugin registers; "
                        f"default: {default(CellSettings, 'space')})")
    _strength_rule_option(p)
    _keep_options(p)
    _preset_option(p, demo=True)
    _workers_option(p)
    p.set_defaults(func=demo.main)
    return parser


def _lora_options(p: argparse.ArgumentParser, what: str, default: str = "") -> None:
    """The LoRA route's learning rate, epochs and step cap."""
    p.add_argument("--lora-lr", type=positive_float, help=f"{what}: learning rate (default: {default}LoraRouteConfig's)")
    p.add_argument("--lora-epochs", type=positive_int, help=f"{what}: epochs (default: {default}LoraRouteConfig's)")
    p.add_argument("--lora-steps", type=positive_int, help=f"{what}: cap on steps (default: LoraRouteConfig's)")


def _workers_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=positive_int,
                   help="worker processes for the LoRA route's fits (default: one per core; 1: in this process); the numbers are the same")


def _strength_rule_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strength-rule", metavar="RULE",
                   help="how each closed-form cell's strength is chosen without labels: auto (the default rule, the default), a rule's "
                        "name, or fixed: the fixed strengths (docs/method.md sec. 17)")


def _keep_options(p: argparse.ArgumentParser) -> None:
    """--keep (what the strength rule reads of the sets a cell's edit must leave alone) and the budget it spends with labels."""
    p.add_argument("--keep", choices=KEEP_CHOICES, type=str.lower,
                   help="what the strength rule reads of the sets an edit must leave alone: probes, the other transfer tasks' "
                        "unlabelled probes; labels, the labelled train splits of the controls and the other transfer tasks, on "
                        f"which auto spends the budgets (default: {default_keep(DEFAULT_STRENGTH_RULE)} under auto, probes under another rule; "
                        "docs/method.md sec. 18)")
    for kind in ("addition", "negation"):
        p.add_argument(f"--{kind}-budget", type=positive_float, metavar="POINTS",
                       help=f"--keep labels: accuracy points a kept set may lose on {kind} cells (default: the world's control "
                            f"limit, else {DEFAULT_BUDGET:g})")
    p.add_argument("--confidence", type=fraction, metavar="Q",
                   help=f"--keep labels: confidence that no kept set loses more than its budget (default {DEFAULT_CONFIDENCE:g})")


def _kind_options(p: argparse.ArgumentParser) -> None:
    """--centre and --anchor: which cell kinds transfer row-centred descriptors, and which anchor the
    probes of the tasks that read other attributes."""
    for option, what in (("centre", "whose descriptors are row-centred before the solve"),
                         ("anchor", "whose solves hold the probes of the transfer tasks that read other attributes in place")):
        p.add_argument(f"--{option}", choices=tuple(KIND_CHOICES), type=str.lower,
                       help=f"cell kinds {what} (default: {_kinds_name(default(CellSettings, option))})")


def _preset_option(p: argparse.ArgumentParser, demo: bool = False) -> None:
    """--preset NAME (a preset's method settings, presets/NAME.json or a JSON file) and --paper, which is --preset paper."""
    p.add_argument("--preset", metavar="NAME", help=f"the method settings of a preset: {', '.join(n for n in preset_names() if n != 'demo')}"
                   f"{'' if demo else ', demo (the demo on --world)'} or a .json file of your own (refused beside a flag it sets)")
    p.add_argument("--paper", dest="preset", action="store_const", const="paper",
                   help=f"--preset paper: {preset('paper').description.split(':', 1)[1].strip()}")


def _kinds_name(kinds: tuple[str, ...]) -> str:
    return next(name for name, value in KIND_CHOICES.items() if set(value) == set(kinds))


def _subparsers(parser: Parser) -> dict[str, Parser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _subparser_names(parser: Parser) -> list[str]:
    return list(_subparsers(parser))


def _subparser(parser: Parser, command: str) -> Parser:
    return _subparsers(parser)[command]


def apply_config(parser: Parser, argv: Sequence[str], args: argparse.Namespace) -> argparse.Namespace:
    """Re-parse with the TOML file's values as defaults: top-level keys, then the command's table."""
    import tomllib

    try:
        with open(args.config, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise PlatonicError(f"config file {args.config} does not exist") from None
    except OSError as exc:
        raise PlatonicError(f"cannot read config file {args.config}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PlatonicError(f"config file {args.config} is not valid TOML: {exc}") from None
    tables = {k for k, v in data.items() if isinstance(v, dict)}  # [utd], [grid], ... (one per subcommand)
    strange = sorted(tables - set(_subparser_names(parser)))
    if strange:
        raise PlatonicError(f"config file {args.config}: unknown table(s) {strange}; tables are named after subcommands")
    key = lambda k: k.replace("-", "_")  # noqa: E731
    everywhere = {key(k): v for k, v in data.items() if k not in tables}
    section = {key(k): v for k, v in data.get(args.command, {}).items()}
    known = set(vars(args)) - {"func", "command", "config"}
    anywhere = {a.dest for p in _subparsers(parser).values() for a in p._actions} | {"models", "finetuned"}
    unknown = sorted([k for k in section if k not in known] + [k for k in everywhere if k not in anywhere])
    if unknown:
        raise PlatonicError(f"config file {args.config}: unknown setting(s) for `{args.command}`: {', '.join(unknown)}")
    # top-level keys apply where the command has that option; the command's table always applies
    settings = {**{k: v for k, v in everywhere.items() if k in known}, **section}
    actions = {a.dest: a for a in _subparser(parser, args.command)._actions}
    for k, v in settings.items():
        try:
            settings[k] = config_tables(k, v) if k not in actions else config_value(actions[k], v)
        except PlatonicError as exc:
            raise PlatonicError(f"config file {args.config}: {k} = {v!r}: {exc}") from None
    _subparser(parser, args.command).set_defaults(**settings)
    return parse(parser, argv)


def parse(parser: Parser, argv: Sequence[str]) -> argparse.Namespace:
    """parse_args, with unknown options reported by the subcommand's parser (its usage, its name)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        _subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    return args
