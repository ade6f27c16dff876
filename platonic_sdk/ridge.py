"""The closed form's ridge factors and the one rule that picks them for a model.

`RIDGE_A` / `RIDGE_B` are the paper's defaults, relative to mean sigma(F)^2 and mean sigma(G)^2
(docs/method.md, "Closed form"). The synthetic worlds declare their own (worlds/registry.py), and a
member of a world's zoo runs with them: `ridge_rule(checkpoint, ridge_a, ridge_b)` is what
`OperatorBank(target)` and `platonic bank` / `platonic edit` use, so Python and the command line solve
with the same ridge on the same model and say why.

A checkpoint folder is a member of a world's zoo when it lies directly in a zoo folder that a registered
world declared (`register_zoo`, which `worlds.registry.register_world` calls), or when its parent
holds a zoo manifest (`zoo.json`) that lists it and records the world's ridge (`"ridge": {"world",
"ridge_a", "ridge_b"}`, written by the zoo builders; the shipped zoos carry it, so a zoo member is
known before its world's module is imported, and in a copy of the zoo).
"""

from __future__ import annotations

import json
import math
import numbers
import os
from pathlib import Path
from typing import Any, NamedTuple

from .errors import NonFiniteError, PlatonicError, WrongTypeError

RIDGE_A = 1e-2
RIDGE_B = 1e-6
MANIFEST = "zoo.json"  # a zoo's manifest (worlds/zoo.py writes and reads it)


class Ridge(NamedTuple):
    """The ridge factors a solve uses and why (a line a command prints and a file records)."""

    ridge_a: float
    ridge_b: float
    why: str


class _Zoo(NamedTuple):
    world: str
    ridge_a: float
    ridge_b: float


_ZOOS: dict[Path, _Zoo] = {}  # resolved zoo folder -> the world whose zoo it is, and the world's ridge


def check_ridge(value: Any, name: str) -> float:
    """`value` as a float, or PlatonicError unless it is a finite number >= 0 (bools and strings refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WrongTypeError(f"{name} must be a finite number >= 0, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number):
        raise NonFiniteError(f"{name} must be a finite number >= 0, got {value!r}")
    if number < 0:
        raise PlatonicError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def register_zoo(folder: str | os.PathLike, world: str, ridge_a: float, ridge_b: float) -> None:
    """Declare `folder` the zoo of `world`: its member folders run with (ridge_a, ridge_b) unless overridden."""
    _ZOOS[Path(folder).expanduser().resolve()] = _Zoo(world, check_ridge(ridge_a, "ridge_a"), check_ridge(ridge_b, "ridge_b"))


def _manifest(zoo: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((zoo / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("members"), dict) else None


def _member_of_registered(folder: Path) -> _Zoo | None:
    """The registered zoo `folder` lies in, when its manifest lists it (no manifest: any folder but its fine-tunes)."""
    found = _ZOOS.get(folder.parent)
    if found is None:
        return None
    manifest = _manifest(folder.parent)
    listed = folder.name in manifest["members"] if manifest is not None else folder.name != "finetunes"
    return found if listed else None


def _manifest_record(folder: Path) -> _Zoo | None:
    manifest = _manifest(folder.parent)
    if manifest is None or folder.name not in manifest["members"]:
        return None
    try:
        record = manifest["ridge"]
        return _Zoo(str(record["world"]), check_ridge(record["ridge_a"], "ridge_a"), check_ridge(record["ridge_b"], "ridge_b"))
    except (KeyError, TypeError, PlatonicError):  # no ridge record (or a malformed one): not a known member
        return None


def zoo_world(checkpoint: str | os.PathLike | None) -> tuple[_Zoo, Path] | None:
    """(the world and its ridge, the zoo folder) when `checkpoint` is a member folder of a world's zoo, else None."""
    if checkpoint is None:
        return None
    folder = Path(checkpoint).expanduser()
    if not folder.is_dir():
        return None  # a hub id or a file
    folder = folder.resolve()
    found = _member_of_registered(folder)
    if found is not None:
        return found, folder.parent
    found = _manifest_record(folder)
    return (found, folder.parent) if found is not None else None


def ridge_rule(checkpoint: str | os.PathLike | None, ridge_a: float | None = None, ridge_b: float | None = None) -> Ridge:
    """The ridge a solve on the model of `checkpoint` uses: a factor the caller gives (not None) wins;
    the others are the world's when the checkpoint is a member of a world's zoo, else the paper's."""
    given = {k: check_ridge(v, k) for k, v in (("ridge_a", ridge_a), ("ridge_b", ridge_b)) if v is not None}
    member = zoo_world(checkpoint)
    if member is not None:
        (world, a, b), zoo = member
        default, origin = {"ridge_a": a, "ridge_b": b}, f"the {world} world's ridge (a member of its zoo {zoo})"
    else:
        default, origin = {"ridge_a": RIDGE_A, "ridge_b": RIDGE_B}, "the paper's default ridge (not a member of a world's zoo)"
    chosen = {**default, **given}
    if len(given) == 2:
        why = "given"
    elif given:
        why = f"{', '.join(given)} given; the other from {origin}"
    else:
        why = origin
    return Ridge(chosen["ridge_a"], chosen["ridge_b"], why)
