"""The probability space: D = softmax(s <f_ft, g>) - softmax(s <f_pre, g>) over the grid's M classes, s the
logit scale, scaled to the affinity UTD's Frobenius norm."""

from __future__ import annotations

from torch import Tensor

from ..linalg import matched_to_utd, probability_change
from . import DescriptorSpace, register_space


def probability(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None) -> Tensor:
    """The change of each probe's zero-shot class probabilities (linalg.probability_change) times ||U||_F / ||D||_F."""
    return matched_to_utd(probability_change(f_pre, f_ft, g, logit_scale), f_pre, f_ft, g)


register_space(DescriptorSpace("probability", probability, needs_logit_scale=True))
