"""Cell methods by name: `register_method` adds one, `method(name)` finds it (the built-in ones, in
measure/methods.py, register on first use, so that the experiment spec can check names without loading them).

Some names stand for a family of methods, one per member of another plug-in registry: `closed_form_<space>`
(every descriptor space, built in or registered: spaces.register_space), `closed_form_strength_<rule>` (every
strength rule: strength.register_strength_rule) and `weight_space_<merge method>` (finetune.register_merge_method).
Such a method is built by measure/methods.py the first time its name is asked for, so a plug-in space or rule gets
its comparison method (and its place in the strength sweep, `family_methods`) as the built-in ones do."""

from __future__ import annotations

import importlib
from typing import Callable, Mapping, Sequence

import attrs

from ...named_registry import NamedRegistry
from ...spaces import space_names
from ...strength import strength_rule_names

MethodFn = Callable[..., "Mapping[str, float] | None"]  # fn(workspace, cell, settings) -> {evaluation set: accuracy}
# sweep(workspace, cell, settings, strengths) -> [{evaluation set: accuracy} at each strength], or None where it does not apply
SweepFn = Callable[..., "Sequence[Mapping[str, float]] | None"]
BUILTIN = "platonic_sdk.evaluate.measure.methods"


@attrs.frozen
class CellMethod:
    """A registered method: `label` names it in reports; `max_cells` caps its cells per kind and group
    (evenly spread; None: every cell) unless a run sets its own cap; `sweep` evaluates it at many strengths
    from one fit (None: the strength sweep calls `fn` at each strength)."""

    name: str
    fn: MethodFn
    label: str
    kinds: tuple[str, ...] = ("addition", "negation")
    max_cells: int | None = None
    sweep: SweepFn | None = None


def _merge_method_names() -> list[str]:
    from ...finetune.merging import merge_methods  # torch: only when a weight_space_<name> is asked for

    return merge_methods()


@attrs.frozen
class MethodFamily:
    """The methods `<prefix><member>`, one per name `members()` lists; BUILTIN's function `make` builds the
    CellMethod of one member."""

    prefix: str
    members: Callable[[], Sequence[str]]
    make: str


# the longer prefix first: closed_form_strength_<rule> is not a space named "strength_<rule>"
FAMILIES = (
    MethodFamily("closed_form_strength_", strength_rule_names, "closed_form_at_rule"),
    MethodFamily("closed_form_", space_names, "closed_form_in_space"),
    MethodFamily("weight_space_", _merge_method_names, "weight_space_chosen"),
)
FAMILY_NOTE = " (and closed_form_<space>, closed_form_strength_<rule>, weight_space_<merge method>)"
_BUILTIN_NAMES = ("zero_shot", "random_utd", "single_a", "single_b", "closed_form", "oracle", "weight_space", "lora",
                  "label_reference", "alignment", "alignment_lstsq")
METHODS: NamedRegistry[CellMethod] = NamedRegistry("cell method", listing="registered", replaceable=False,
                                                   lazy=dict.fromkeys(_BUILTIN_NAMES, BUILTIN))


def register_method(name: str, fn: MethodFn, label: str | None = None, kinds: Sequence[str] = ("addition", "negation"),
                    max_cells: int | None = None, sweep: SweepFn | None = None) -> CellMethod:
    """Register a cell method under `name` (refused when the name is taken); returns it."""
    return METHODS.register(name, CellMethod(name, fn, label or name, tuple(kinds), max_cells, sweep))


def _family_member(name: str) -> tuple[MethodFamily, str] | None:
    """The family and member that `name` spells, or None."""
    for family in FAMILIES:
        if name.startswith(family.prefix):
            member = name[len(family.prefix):]
            if member in family.members():
                return family, member
    return None


def family_methods(prefix: str) -> tuple[str, ...]:
    """Every method of the family `prefix` (e.g. "closed_form_": one per descriptor space, plug-ins included)."""
    family = next(f for f in FAMILIES if f.prefix == prefix)
    return tuple(f"{prefix}{m}" for m in family.members())


def method_name(name: str) -> str:
    """`name` checked against the known methods and families without loading the methods (a weight_space_<merge method>
    loads the merging registry, and torch with it); PlatonicError with the nearest and the registered ones."""
    if METHODS.canonical(name) is None and _family_member(name) is not None:
        return name
    return METHODS.check(name, note=FAMILY_NOTE)


def method(name: str) -> CellMethod:
    """The registered method `name`, a family's method built on first use, or PlatonicError listing the registered ones."""
    if METHODS.canonical(name) is None:
        found = _family_member(name)
        if found is not None:
            family, member = found
            METHODS.unlisted.add(name)  # errors name the family by its pattern (FAMILY_NOTE)
            return METHODS.register(name, getattr(importlib.import_module(BUILTIN), family.make)(member))
    return METHODS.lookup(name, note=FAMILY_NOTE)
