"""The pseudo-label space: D[i, j] = [argmax_j' <f_ft_i, g_j'> = j] - 1/M, scaled to the affinity UTD's Frobenius norm."""

from __future__ import annotations

from torch import Tensor

from ..linalg import matched_to_utd, pseudo_labels
from . import DescriptorSpace, register_space


def pseudo_label(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None = None) -> Tensor:
    """The fine-tuned model's predictions as centred one-hot rows (linalg.pseudo_labels) times ||U||_F / ||D||_F."""
    return matched_to_utd(pseudo_labels(f_ft, g), f_pre, f_ft, g)


register_space(DescriptorSpace("pseudo_label", pseudo_label))
