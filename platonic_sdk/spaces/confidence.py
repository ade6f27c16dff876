"""The confidence space: D[i, j] = max_j' softmax_j'(s <f_ft_i, g_j'>) ([argmax = j] - 1/M), pseudo-labels weighted
by the fine-tuned model's confidence in its own prediction (s the logit scale), scaled to the affinity UTD's
Frobenius norm."""

from __future__ import annotations

from torch import Tensor

from . import DescriptorSpace, register_space
from .prediction import check_rows, logits, matched_to_utd
from .pseudo_label import pseudo_labels


def confidence_labels(f_ft: Tensor, g: Tensor, logit_scale: float) -> Tensor:
    """max_j' softmax_j'(s <f_ft_i, g_j'>) * ([argmax = j] - 1/M), in f_ft's dtype."""
    check_rows(f_ft, g, "f_ft")
    top = logits(f_ft, g, logit_scale).softmax(dim=1).amax(dim=1, keepdim=True)
    return (top * pseudo_labels(f_ft, g).double()).to(f_ft.dtype)


def confidence(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None) -> Tensor:
    """confidence_labels times ||U||_F / ||D||_F."""
    return matched_to_utd(confidence_labels(f_ft, g, logit_scale), f_pre, f_ft, g)


register_space(DescriptorSpace("confidence", confidence, needs_logit_scale=True))
