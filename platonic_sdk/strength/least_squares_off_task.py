"""The least-squares strength with the bank's other grids held in place (the default rule, "auto";
docs/method.md sec. 17):

    c = argmin_c sum_T (1/M) ||c dU - U||_F^2 + sum_O (1/M) ||c dU_O||_F^2
      = sum_T (1/M) <dU, U> / (sum_T (1/M) ||dU||_F^2 + sum_O (1/M) ||dU_O||_F^2)   (c >= 0)

T the edit's grids with their descriptors U, O the bank's other grids, whose unlabelled probes should not
move (their target is zero, as an anchor's), dU the target's first-order change per unit strength. It is
the transfer objective L of sec. 3 extended to every grid the bank knows, minimised over the strength
alone: never above the task-only fit, and lower the more the edit leaks onto other grids' probes.
"""

from __future__ import annotations

from typing import Sequence

from torch import Tensor

from . import ProbeGrid, StrengthRule, register_strength_rule
from .first_order import fitted


def least_squares_off_task(A: Tensor, task: Sequence[ProbeGrid], others: Sequence[ProbeGrid]) -> float:
    """The first-order least-squares strength on the task grids, the other grids' changes penalised at zero target."""
    return fitted(A, task, others)


register_strength_rule(StrengthRule("least_squares_off_task", least_squares_off_task,
                                    "first-order least-squares fit, the bank's other grids held at zero change"))
