"""Cell methods by name: `register_method` adds one, `method(name)` finds it (the built-in ones, in
methods.py, register on first use, so that the experiment spec can check names without loading them)."""

from __future__ import annotations

import importlib
from typing import Callable, Mapping, Sequence

import attrs

from ..named_registry import NamedRegistry

MethodFn = Callable[..., "Mapping[str, float] | None"]  # fn(workspace, cell, settings) -> {evaluation set: accuracy}
BUILTIN = "platonic_sdk.evaluate.methods"


@attrs.frozen
class CellMethod:
    """A registered method: `label` names it in reports; `max_cells` caps its cells per kind and group
    (evenly spread; None: every cell) unless a run sets its own cap."""

    name: str
    fn: MethodFn
    label: str
    kinds: tuple[str, ...] = ("addition", "negation")
    max_cells: int | None = None


METHODS: NamedRegistry[CellMethod] = NamedRegistry("cell method", listing="registered", replaceable=False)


def register_method(name: str, fn: MethodFn, label: str | None = None, kinds: Sequence[str] = ("addition", "negation"),
                    max_cells: int | None = None) -> CellMethod:
    """Register a cell method under `name` (refused when the name is taken); returns it."""
    return METHODS.register(name, CellMethod(name, fn, label or name, tuple(kinds), max_cells))


def method(name: str) -> CellMethod:
    """The registered method `name`, or PlatonicError listing the registered ones."""
    if name not in METHODS:
        importlib.import_module(BUILTIN)
    return METHODS.lookup(name)
