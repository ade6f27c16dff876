"""The least-squares strength on the task grids alone (candidate (a) of docs/method.md sec. 17):

    c = argmin_c sum_T (1/M) ||c dU - U||_F^2 = sum_T (1/M) <dU, U> / sum_T (1/M) ||dU||_F^2   (c >= 0)

dU the target's first-order change per unit strength on each of the edit's grids T. It undoes the ridge's
shrinkage and reads nothing outside the task: on its own it overshoots (strengths of 1.3-4.8 on the real
world); kept as the reference the other rules are measured against.
"""

from __future__ import annotations

from typing import Sequence

from torch import Tensor

from . import ProbeGrid, StrengthRule, register_strength_rule
from .first_order import fitted


def least_squares(A: Tensor, task: Sequence[ProbeGrid], others: Sequence[ProbeGrid]) -> float:
    """The first-order least-squares strength on the task grids; `others` are not read."""
    return fitted(A, task, ())


register_strength_rule(StrengthRule("least_squares", least_squares, "first-order least-squares fit on the task grids alone",
                                    reads_others=False))
