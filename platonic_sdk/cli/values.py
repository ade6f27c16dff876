"""Option values of the `platonic` command: argparse `type=` checks, and TOML config values run through them.

A config value passes the same checks as the command line (the option's `type=` and `choices=`), and must
also have the TOML type the option takes: a string, a number, a bool (flags) or an array (repeatable options).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any, Sequence

from ..errors import PlatonicError
from ..evaluate.plan.settings import KIND_CHOICES
from ..strength import AUTO, check_strength_rule


def device(value: str) -> str:
    """A torch device that exists and is available here: cpu, or an accelerator this machine has."""
    import torch

    try:
        dev = torch.device(value)
    except (RuntimeError, TypeError):
        raise argparse.ArgumentTypeError(f"{value!r} is not a torch device (e.g. cpu, cuda, cuda:1, mps)") from None
    if dev.type == "cpu":
        return value
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    have = torch.accelerator.device_count() if accelerator is not None else 0
    if accelerator is None or accelerator.type != dev.type:
        what = f"cpu and {_devices(have, accelerator.type)}" if accelerator is not None else "only cpu"
        raise argparse.ArgumentTypeError(f"device {value!r} is not available on this machine (it has {what})")
    if dev.index is not None and dev.index >= have:
        raise argparse.ArgumentTypeError(f"device {value!r} is not available: this machine has {_devices(have, dev.type)}")
    return value


def _devices(n: int, kind: str) -> str:
    return f"{n} {kind} device" + ("" if n == 1 else "s")


def _number(value: str, convert: type, ok, what: str) -> Any:
    """`value` as an int or float that is finite and passes `ok`; else an argparse type error saying `what`."""
    try:
        number = convert(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {convert.__name__} value: {value!r}") from None
    if not math.isfinite(number) or not ok(number):
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return number


def positive_int(value: str) -> int:
    """An integer >= 1."""
    return _number(value, int, lambda n: n >= 1, "a positive integer")


def count(value: str) -> int:
    """An integer >= 0."""
    return _number(value, int, lambda n: n >= 0, "a whole number (0 or more)")


def finite_float(value: str) -> float:
    """A real number, not NaN or infinite."""
    return _number(value, float, lambda x: True, "a finite number")


def strength_or_rule(value: str) -> float | str:
    """A finite number, or a strength rule that chooses it: "auto" (the default rule, kept as the user wrote it, so that
    messages and the edit file say "auto") or a rule's name (strength.check_strength_rule)."""
    try:
        float(value)
    except ValueError:
        try:
            return AUTO if value == AUTO else check_strength_rule(value)
        except PlatonicError as exc:
            raise argparse.ArgumentTypeError(f"must be a finite number or a strength rule: {exc}") from None
    return finite_float(value)


def positive_float(value: str) -> float:
    """A finite number > 0."""
    return _number(value, float, lambda x: x > 0, "a positive finite number")


def non_negative_float(value: str) -> float:
    """A finite number >= 0."""
    return _number(value, float, lambda x: x >= 0, "a finite number >= 0")


def fraction(value: str) -> float:
    """A number strictly between 0 and 1."""
    return _number(value, float, lambda x: 0 < x < 1, "a number between 0 and 1 (exclusive)")


def output_file(value: str) -> str:
    """A path to write a file to: not an existing folder."""
    if os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"{value!r} is a folder; give the path of a file to write")
    return value


def output_dir(value: str) -> str:
    """A path to write a folder to: not an existing file."""
    if os.path.exists(value) and not os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"{value!r} is a file; give the path of a folder to write")
    return value


# option types that take a TOML number; every other option takes a string
NUMBERS = {int: "an integer", float: "a number", positive_int: "a positive integer", count: "a whole number",
           finite_float: "a number", positive_float: "a positive number", non_negative_float: "a number", fraction: "a fraction",
           strength_or_rule: "a number or a strength rule"}


def _toml_kind(value: Any) -> str:
    kinds = {bool: "a bool", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}
    return next((name for t, name in kinds.items() if isinstance(value, t)), type(value).__name__)


def _convert(action: argparse.Action, value: Any) -> Any:
    """One value through the option's type= and choices=, as if typed on the command line."""
    wanted = NUMBERS.get(action.type, "a string")
    if isinstance(value, (bool, list, dict)) or (wanted == "a string" and not isinstance(value, str)):
        raise PlatonicError(f"takes {wanted}, got {_toml_kind(value)}")
    converted = value
    if action.type is not None:
        try:
            converted = action.type(str(value))
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            name = getattr(action.type, "__name__", "")
            raise PlatonicError(str(exc) if isinstance(exc, argparse.ArgumentTypeError) else f"invalid {name} value: {value!r}") from None
    if action.choices is not None and converted not in action.choices:
        raise PlatonicError(f"invalid choice: {converted!r} (choose from {', '.join(map(repr, action.choices))})")
    return converted


def config_value(action: argparse.Action, value: Any) -> Any:
    """A TOML value for `action`, checked and converted as the command line would; PlatonicError says why not."""
    if action.nargs == 0:  # a flag: store_true / store_false
        if not isinstance(value, bool):
            raise PlatonicError(f"is a flag: takes true or false, got {_toml_kind(value)}")
        return action.const if value else action.default
    if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
        if not isinstance(value, list):  # a lone value is not quietly made a list: the file says what it means
            hint = f": write {action.dest} = [{json.dumps(value)}]" if isinstance(value, (str, int, float)) else ""
            raise PlatonicError(f"takes an array, got {_toml_kind(value)}{hint}")
        values = value
        if action.nargs == "+" and not values:
            raise PlatonicError("takes at least one value, got an empty array")
        return [_convert(action, v) for v in values]
    return _convert(action, value)


def config_tables(key: str, value: Any) -> Any:
    """[models.NAME] tables (family, checkpoint) or [[finetuned]] entries (model, task, checkpoint or utd): strings."""
    entries = value.values() if key == "models" and isinstance(value, dict) else value if key == "finetuned" and isinstance(value, list) else None
    if entries is None:
        shape = "a table of [models.NAME] tables" if key == "models" else "an array of [[finetuned]] tables"
        raise PlatonicError(f"takes {shape}, got {_toml_kind(value)}")
    for entry in entries:
        if not isinstance(entry, dict):
            raise PlatonicError(f"entries must be tables, got {_toml_kind(entry)}")
        wrong = sorted(k for k, v in entry.items() if not isinstance(v, str))
        if wrong:
            raise PlatonicError(f"{', '.join(wrong)} must be strings")
    return value


def kind_options(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """CellSettings' `centre` and `anchor` from --centre and --anchor (an option not given: the class's default)."""
    return {key: KIND_CHOICES[getattr(args, key)] for key in ("centre", "anchor") if getattr(args, key, None)}


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


def parse_models(items: Sequence[str]) -> dict[str, str]:
    """{family: checkpoint} of --model FAMILY=CHECKPOINT."""
    out = {}
    for item in items:
        family, sep, checkpoint = item.partition("=")
        if not sep or not family or not checkpoint:
            raise PlatonicError(f"--model takes FAMILY=CHECKPOINT, got {item!r}")
        out[family] = checkpoint
    return out


def parse_method_cells(items: Sequence[str]) -> list[tuple[str, int | None]]:
    """(method, cap) pairs of --method-cells NAME=N (N = all: every cell)."""
    out = []
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not (count == "all" or count.isdigit()):
            raise PlatonicError(f"--method-cells takes NAME=N or NAME=all, got {item!r}")
        out.append((name, None if count == "all" else int(count)))
    return out


RECIPE_OPTIONS = ("mode", "rank", "lora_alpha", "epochs", "lr", "logit_scale", "max_steps")  # and --orthoreg


def recipe_options(args: argparse.Namespace) -> dict[str, Any]:
    """The fine-tuning recipe options given on the command line, as FinetuneConfig fields."""
    chosen = {k: getattr(args, k) for k in RECIPE_OPTIONS if getattr(args, k, None) is not None}
    if getattr(args, "orthoreg", None) is not None:
        from ..finetune import OrthoReg

        chosen["orthoreg"] = OrthoReg(args.orthoreg)
    return chosen
