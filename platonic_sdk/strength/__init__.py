"""Strength rules as plug-ins (docs/method.md sec. 17): the strength of an edit chosen without labels.

A rule reads only the target's view of the bank's grids: on the grids of the edit's terms, the site
inputs S, raw embeddings Z, unit landmarks G and the descriptor U the edit is asked to realise there; on
every other grid of the bank, S, Z and G alone (unlabelled probes, no descriptor). No label, control set
or test item enters. `register_strength_rule` adds one; `strength_rule(name)` finds it; the strength
"auto" means the rule named by DEFAULT_STRENGTH_RULE. Built in, one module each:

    least_squares           c = sum_T w <dU, U> / sum_T w ||dU||^2 (first-order fit on the task grids alone)
    least_squares_off_task  c = sum_T w <dU, U> / (sum_T w ||dU||^2 + sum_O w ||dU||^2), the other grids held at 0
    prediction_share        the least c whose share of changed task predictions reaches the share U implies

dU is the target's first-order change of its probe-prompt affinities per unit strength
(linalg.first_order_change), T the edit's grids, O the bank's other grids, w = 1/M per grid.
This module is light (no torch): the command line checks rule names against it.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Callable, Sequence

import attrs

from ..errors import PlatonicError, check_strength
from ..named_registry import NamedRegistry

if TYPE_CHECKING:
    from torch import Tensor

STRENGTH_RULES = ("least_squares", "least_squares_off_task", "prediction_share")  # the built-in rules, one module each
DEFAULT_STRENGTH_RULE = "least_squares_off_task"  # what strength="auto" runs (docs/method.md sec. 17)
AUTO = "auto"
FIXED = "fixed"  # where a rule may be named: no rule, the fixed strengths
DEFAULT_BUDGET = 3.0  # accuracy points a kept set may lose (strength/budget.py): every world's addition limit
DEFAULT_CONFIDENCE = 0.7  # z = 0.52; measured on the development replicates (docs/method.md sec. 18)


@attrs.frozen(eq=False)
class ProbeGrid:
    """The target's unedited view of one grid: site inputs S (P x q), raw embeddings Z (P x d), landmarks G
    (M x d; unit rows are taken), and `target`, the P x M descriptor the edit should realise there (None on
    a grid outside the edit, whose probes should not move). A labelled keep set is viewed the same way, with
    its items' `labels` (P class indices; budget.py reads them, the label-free rules never do)."""

    site_inputs: "Tensor"
    raw_embeddings: "Tensor"
    landmarks: "Tensor"
    target: "Tensor | None" = None
    labels: "Tensor | None" = None


# fn(operator A (d x q), the edit's grids, the bank's other grids) -> the strength c >= 0
RuleFn = Callable[["Tensor", Sequence[ProbeGrid], Sequence[ProbeGrid]], float]


@attrs.frozen
class StrengthRule:
    """A strength rule: `choose(A, task, others)` returns the strength at which to fold the operator A;
    `reads_others`: whether it weighs the other grids' probes (a bank holding none then gets a warning)."""

    name: str
    choose: RuleFn
    summary: str = ""
    reads_others: bool = True


_REGISTRY: NamedRegistry[StrengthRule] = NamedRegistry(
    "strength rule", listing="the rules are", lazy={name: f"{__name__}.{name}" for name in STRENGTH_RULES})


def register_strength_rule(rule: StrengthRule, *, replace: bool = False) -> StrengthRule:
    """Register `rule` under its name (a taken name is refused unless `replace`); returns it."""
    if not isinstance(rule, StrengthRule):
        raise TypeError(f"register_strength_rule takes a StrengthRule, got {type(rule).__name__}")
    if rule.name == AUTO:
        raise PlatonicError(f"{AUTO!r} names the default rule ({DEFAULT_STRENGTH_RULE}); register the rule under its own name")
    return _REGISTRY.register(rule.name, rule, replace=replace)


def strength_rule_names() -> list[str]:
    """The built-in rules' names, then the registered ones."""
    return _REGISTRY.names()


def check_strength_rule(value: object) -> str:
    """The rule that `value` names ("auto": DEFAULT_STRENGTH_RULE), nothing loaded; else PlatonicError listing them."""
    return _named_rule(value, "")


def rule_or_fixed(value: object) -> str | None:
    """check_strength_rule's rule, or None for FIXED or None (the fixed strengths); an unknown name's error names FIXED too."""
    return None if value is None or value == FIXED else _named_rule(value, f"; or {FIXED!r}: the fixed strengths")


def _named_rule(value: object, more: str) -> str:
    """check_strength_rule, its errors' list of alternatives ending with `more`."""
    if not isinstance(value, str):
        raise PlatonicError(f"a strength rule is named by a string, got {value!r}; the rules are {AUTO}, {', '.join(strength_rule_names())}")
    return DEFAULT_STRENGTH_RULE if value == AUTO else _REGISTRY.check(value, note=f" (or {AUTO!r}: {DEFAULT_STRENGTH_RULE}{more})")


def strength_rule(name: str) -> StrengthRule:
    """The rule `name` ("auto": the default; a built-in rule loads on first use), or check_strength_rule's error."""
    return _REGISTRY.lookup(check_strength_rule(name))


def fixed_or_rule(value: object, what: str = "strength") -> float | str:
    """`value` as a fixed strength (a finite real number) or the name of the rule it picks ("auto" or a rule's
    name, returned as the rule's own name); PlatonicError in `what`'s words otherwise."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return check_strength(value, what)
    if isinstance(value, str):
        return check_strength_rule(value)
    raise PlatonicError(f"{what} must be a finite real number or a strength rule ({AUTO}, {', '.join(strength_rule_names())}), "
                        f"got {value!r}")

