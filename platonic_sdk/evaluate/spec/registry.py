"""Cell methods by name: `register_method` adds one, `method(name)` finds it (the built-in ones, in
methods.py, register on first use, so that the experiment spec can check names without loading them)."""

from __future__ import annotations

import importlib
from typing import Callable, Mapping, Sequence

import attrs

from ...named_registry import NamedRegistry
from ...spaces import SPACES
from ...strength import STRENGTH_RULES

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


# the built-in methods by name, with the module that registers them (a merge method registered later gets
# its weight_space_<name> method when that module loads)
_BUILTIN_NAMES = ("zero_shot", "random_utd", "single_a", "single_b", "closed_form", "oracle", "weight_space",
                  *(f"weight_space_{m}" for m in ("task_arithmetic", "ties", "dare", "tsv", "iso_c")), "lora", "label_reference",
                  *(f"closed_form_{s}" for s in SPACES), *(f"closed_form_strength_{r}" for r in STRENGTH_RULES), "alignment",
                  "alignment_lstsq")
METHODS: NamedRegistry[CellMethod] = NamedRegistry("cell method", listing="registered", replaceable=False,
                                                   lazy=dict.fromkeys(_BUILTIN_NAMES, BUILTIN))


def register_method(name: str, fn: MethodFn, label: str | None = None, kinds: Sequence[str] = ("addition", "negation"),
                    max_cells: int | None = None, sweep: SweepFn | None = None) -> CellMethod:
    """Register a cell method under `name` (refused when the name is taken); returns it."""
    return METHODS.register(name, CellMethod(name, fn, label or name, tuple(kinds), max_cells, sweep))


def method_name(name: str) -> str:
    """`name` checked against the known methods without loading them (but a weight_space_<merge method>,
    which exists once the built-in methods load); PlatonicError with the nearest and the registered ones."""
    if name.startswith("weight_space_") and METHODS.canonical(name) is None:
        importlib.import_module(BUILTIN)
    return METHODS.check(name)


def method(name: str) -> CellMethod:
    """The registered method `name` (the built-in ones load on first use), or PlatonicError listing the registered ones."""
    if METHODS.canonical(name) is None:
        importlib.import_module(BUILTIN)
    return METHODS.lookup(name)
