"""The probability space: D[i, j] = softmax_j(s <f_ft_i, g_j>) - softmax_j(s <f_pre_i, g_j>), the change of each
probe's zero-shot class probabilities over the grid's M classes (rows sum to 0), s the logit scale; scaled to
the affinity UTD's norm."""

from __future__ import annotations

from torch import Tensor

from ..errors import ShapeError
from . import DescriptorSpace, register_space
from .prediction import check_rows, logits, matched_to_utd


def probability_change(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float) -> Tensor:
    """softmax_j(s <f_ft_i, g_j>) - softmax_j(s <f_pre_i, g_j>) (P x M, rows sum to 0), in f_pre's dtype."""
    if f_ft.shape != f_pre.shape:
        raise ShapeError(f"f_pre and f_ft must be matching P x d matrices, got {tuple(f_pre.shape)} and {tuple(f_ft.shape)}")
    check_rows(f_pre, g, "f_pre")
    change = logits(f_ft, g, logit_scale).softmax(dim=1) - logits(f_pre, g, logit_scale).softmax(dim=1)
    return change.to(f_pre.dtype)


def probability(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None) -> Tensor:
    """probability_change times ||U||_F / ||D||_F."""
    return matched_to_utd(probability_change(f_pre, f_ft, g, logit_scale), f_pre, f_ft, g)


register_space(DescriptorSpace("probability", probability, needs_logit_scale=True))
