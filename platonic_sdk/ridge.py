"""The closed form's ridge factors and the one rule that picks them for a model.

`RIDGE_A` / `RIDGE_B` are the paper's defaults, relative to mean sigma(F)^2 and mean sigma(G)^2
(docs/method.md, "Closed form"). A world records its own in its zoo's manifest (`zoo_settings`), and a
member of a world's zoo runs with them: `ridge_rule(checkpoint, ridge_a, ridge_b)` is what
`OperatorBank(target)` and `platonic bank` / `platonic edit` use, so Python and the command line solve
with the same ridge on the same model and say why. A member records its world's ridge in its own folder's
marker (`zoo_settings.member_settings`), so a member copied anywhere carries its ridge.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, NamedTuple

from .errors import NonFiniteError, PlatonicError, WrongTypeError
from .zoo_settings import member_settings

RIDGE_A = 1e-2
RIDGE_B = 1e-6


class Ridge(NamedTuple):
    """The ridge factors a solve uses and why (a line a command prints and a file records)."""

    ridge_a: float
    ridge_b: float
    why: str


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


def ridge_rule(checkpoint: str | os.PathLike | None, ridge_a: float | None = None, ridge_b: float | None = None) -> Ridge:
    """The ridge a solve on the model of `checkpoint` uses: a factor the caller gives (not None) wins;
    the others are the world's when the checkpoint is a member of a world's zoo, else the paper's."""
    given = {k: check_ridge(v, k) for k, v in (("ridge_a", ridge_a), ("ridge_b", ridge_b)) if v is not None}
    world = member_settings(checkpoint)
    if world is not None:
        default = {"ridge_a": world.ridge_a, "ridge_b": world.ridge_b}
        origin = f"the {world.world} world's ridge (recorded in the member's folder)"
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
