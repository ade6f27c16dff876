"""The files a `platonic` command reads, checked against the command before any model library loads.

Each file is read from its header alone (`io.read_header`: no tensor, no torch), so a refusal comes at once:
a file that is missing, damaged or of the wrong kind; an edit, bank or fine-tune made for another family than
`--family`; a checkpoint folder that this SDK saved for another family (its `platonic.json`) or whose weights
file is damaged; descriptors of different spaces composed into one edit; a bank term that names no entry of
the bank; a descriptor computed on another probe grid than the `--per-class` / `--grid-seed` / `--stratified`
given (a descriptor's grid is rebuilt from what it records, so a different option given would be ignored).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from ..edits import edit_kinds
from ..errors import CheckpointError, PlatonicError
from ..io import FORMAT, MARKER, read_header, safetensors_metadata
from .commands import bank_label
from .values import parse_terms

GRID_OPTIONS = {"per_class": "grid_per_class", "grid_seed": "grid_seed", "stratified": "grid_stratified"}  # option: provenance key


def header(path: str, option: str, kinds: Sequence[str] = ()) -> dict[str, Any]:
    """The metadata of the file `option` names, which must exist, read, and (`kinds`) hold one of those kinds."""
    try:
        kind, meta = read_header(path)
    except CheckpointError as exc:
        raise PlatonicError(f"{option} {exc}") from None
    if kinds and kind not in kinds:
        raise PlatonicError(f"{option} {path}: holds a {kind!r}; {option} takes {' or '.join(kinds)} files")
    return meta


def check_files(args: argparse.Namespace) -> None:
    """The files of `args.command` against its options (see the module's docstring)."""
    bank = args.command == "edit" and args.bank
    family = _check_bank(args) if bank else getattr(args, "family", None)
    if family and getattr(args, "checkpoint", None):
        _check_checkpoint(args.checkpoint, "--checkpoint", family)
    if args.command in ("edit", "bank") and not bank:
        _check_descriptors(args)
    elif args.command == "evaluate" and args.edit:
        _check_made_for(args.edit, "--edit", header(args.edit, "--edit", edit_kinds()), family, args.allow_other_target)
    elif args.command == "utd":
        _check_fine_tune(args)


def _made_for(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """(family, checkpoint) an edit file records as its target (None, None when it records none)."""
    target, info = meta.get("target"), meta.get("info")
    for record, keys in ((target, ("family", "checkpoint")), (info, ("target_family", "target_checkpoint"))):
        if isinstance(record, dict) and isinstance(record.get(keys[0]), str):
            return record[keys[0]], record.get(keys[1])
    return None, None


def _check_made_for(path: str, option: str, meta: dict[str, Any], family: str, allow_other: bool) -> None:
    made_for, checkpoint = _made_for(meta)
    if made_for and made_for != family and not allow_other:
        where = f" ({checkpoint})" if checkpoint else ""
        raise PlatonicError(f"{option} {path} was made for {made_for}{where}, not for {family}: make an edit for {family} from "
                            f"the same descriptors (platonic edit --family {family}), or give --allow-other-target to apply it anyway")


def _check_bank(args: argparse.Namespace) -> str:
    """--bank: an operator bank for --family (if given) with an entry for every term, of one space; its target family."""
    meta = header(args.bank, "--bank", ("operator_bank",))
    entries = meta.get("entries") if isinstance(meta.get("entries"), dict) else {}
    made_for = meta.get("target_family")
    if args.family and isinstance(made_for, str) and made_for != args.family:
        raise PlatonicError(f"--bank {args.bank} was built for {made_for!r}, not {args.family!r}")
    chosen, missing = [], []
    for name, _ in parse_terms(args):
        label = bank_label(name, list(entries))
        (chosen if label else missing).append(label or name)
    if missing:
        raise PlatonicError(f"--bank {args.bank} has no entry {', '.join(map(repr, missing))}; it holds {', '.join(entries) or 'none'}")
    _one_space({label: entries[label].get("space", "affinity") for label in chosen if isinstance(entries[label], dict)})
    return args.family or made_for


def _check_descriptors(args: argparse.Namespace) -> None:
    """The descriptor files of `bank` (--descriptor) and `edit` (its terms): each holds a descriptor drawn on the grid the
    grid options given ask for; an edit's are of one space."""
    if args.command == "bank":
        files = [("--descriptor", path) for path in args.descriptor]
    else:
        options = ["--add"] * len(args.add or ()) + ["--negate"] * len(args.negate or ()) + ["--term"] * len(args.term or ())
        files = [(option, name) for option, (name, _) in zip(options, parse_terms(args))]
    given = _grid_options_given(args)
    spaces = {}
    for option, path in files:
        meta = header(path, option, ("utd",))
        provenance = meta.get("provenance") if isinstance(meta.get("provenance"), dict) else {}
        differ = [key for key, value in given.items() if provenance.get(GRID_OPTIONS[key], value) != value]
        if differ:
            recorded = {key: provenance[GRID_OPTIONS[key]] for key in differ}
            raise PlatonicError(f"{option} {path} was computed on the grid of {_flags(recorded)}, not {_flags(given, differ)}: its "
                                f"grid is rebuilt from what it records, so drop {' and '.join('--' + k.replace('_', '-') for k in differ)} "
                                f"or recompute it with `platonic utd ... {_flags(given, differ)}`")
        spaces[path] = meta.get("space", "affinity")
    if args.command == "edit":
        _one_space(spaces)


def _grid_options_given(args: argparse.Namespace) -> dict[str, Any]:
    """The grid options the command gives other than their defaults (on the command line or in a config file)."""
    from .parser import _subparser, build_parser

    parser = _subparser(build_parser(), args.command)
    return {key: getattr(args, key) for key in GRID_OPTIONS if getattr(args, key) != parser.get_default(key)}


def _flags(options: dict[str, Any], keys: Sequence[str] | None = None) -> str:
    """Grid options as the command line writes them (`keys`: only those), e.g. "--per-class 4 --stratified"."""
    def flag(key: str, value: Any) -> str:
        if key == "stratified":
            return "--stratified" if value else "without --stratified"
        return f"--{key.replace('_', '-')} {value}"

    return " ".join(flag(key, options[key]) for key in (options if keys is None else keys))


def _one_space(spaces: dict[str, str]) -> None:
    """Descriptors (by file or bank entry) composed into one edit are of one space."""
    if len(set(spaces.values())) > 1:
        listed = ", ".join(f"{name} ({space})" for name, space in spaces.items())
        raise PlatonicError(f"an edit composes descriptors of one space; these are of {len(set(spaces.values()))}: {listed} "
                            "(recompute one with `platonic utd --space`)")


def _check_fine_tune(args: argparse.Namespace) -> None:
    """utd's fine-tune: a task-vector file of --family, or a checkpoint or adapter folder not saved for another family."""
    if args.ft_checkpoint:
        _check_checkpoint(args.ft_checkpoint, "--ft-checkpoint", args.family, fine_tune=True)
    if args.ft_adapter:
        _check_checkpoint(args.ft_adapter, "--ft-adapter", args.family)


def _check_checkpoint(path: str, option: str, family: str, fine_tune: bool = False) -> None:
    """A model `option` names, as far as its files tell without loading it: a folder this SDK saved records its family
    (platonic.json) and its safetensors files read; a file that this SDK wrote is (`fine_tune`) a fine-tune of `family`,
    a damaged .safetensors file is refused, and any other file or a hub id is left to the family's loader."""
    local = Path(path).expanduser()
    if local.is_dir():
        try:
            recorded = json.loads((local / MARKER).read_text()).get("family")
        except (OSError, ValueError, AttributeError):  # no marker, or one the loader reports
            recorded = None
        if isinstance(recorded, str) and recorded != family:
            raise PlatonicError(f"{option} {path} holds a {recorded} model (its {MARKER} says so), not a {family} one: "
                                f"give --family {recorded}, or a {family} checkpoint")
        for weights in sorted(local.glob("*.safetensors")):
            _readable(str(weights), f"{option} {path}:")
    elif local.is_file():
        raw = _readable(path, option) if path.endswith(".safetensors") else {}
        if raw.get("format") == FORMAT and not fine_tune:
            raise PlatonicError(f"{option} {path}: holds a {raw.get('kind')!r}, not a model (a checkpoint folder, hub id or weights file)")
        if raw.get("format") == FORMAT:
            meta = header(path, option, ("task_vector",))
            if isinstance(meta.get("family"), str) and meta["family"] != family:
                where = f" (checkpoint {meta['checkpoint']})" if isinstance(meta.get("checkpoint"), str) else ""
                raise PlatonicError(f"{option} {path} is a fine-tune of {meta['family']}{where}, not of {family}: give "
                                    f"--family {meta['family']} and the checkpoint it was fine-tuned from, or a fine-tune of {family}")


def _readable(path: str, where: str) -> dict[str, str]:
    """A safetensors file's metadata; refused (after `where`) when the file does not read."""
    try:
        return safetensors_metadata(path)
    except CheckpointError as exc:
        raise PlatonicError(f"{where} {exc}") from None
