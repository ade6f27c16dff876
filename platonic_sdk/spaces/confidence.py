"""The confidence space: D[i, j] = max_j' softmax_j'(s <f_ft_i, g_j'>) ([argmax = j] - 1/M), scaled to the
affinity UTD's Frobenius norm."""

from __future__ import annotations

from torch import Tensor

from ..linalg import confidence_labels, matched_to_utd
from . import DescriptorSpace, register_space


def confidence(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None) -> Tensor:
    """Pseudo-label rows weighted by the fine-tuned top probability (linalg.confidence_labels) times ||U||_F / ||D||_F."""
    return matched_to_utd(confidence_labels(f_ft, g, logit_scale), f_pre, f_ft, g)


register_space(DescriptorSpace("confidence", confidence, needs_logit_scale=True))
