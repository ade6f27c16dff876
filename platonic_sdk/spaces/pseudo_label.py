"""The pseudo-label space: D[i, j] = [argmax_j' <f_ft_i, g_j'> = j] - 1/M, the fine-tuned model's predicted class
as a centred one-hot row (every row sums to 0), scaled to the affinity UTD's Frobenius norm."""

from __future__ import annotations

import torch
from torch import Tensor

from ..linalg import unit_rows
from . import DescriptorSpace, register_space
from .prediction import check_rows, matched_to_utd


def pseudo_labels(f_ft: Tensor, g: Tensor) -> Tensor:
    """[argmax_j' <f_ft_i, g_j'> = j] - 1/M (ties: the first class), in f_ft's dtype."""
    check_rows(f_ft, g, "f_ft")
    M = g.shape[0]
    predicted = (unit_rows(f_ft.double()) @ unit_rows(g.double()).T).argmax(dim=1)
    return (torch.nn.functional.one_hot(predicted, M).double() - 1.0 / M).to(f_ft.dtype)


def pseudo_label(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None = None) -> Tensor:
    """pseudo_labels times ||U||_F / ||D||_F."""
    return matched_to_utd(pseudo_labels(f_ft, g), f_pre, f_ft, g)


register_space(DescriptorSpace("pseudo_label", pseudo_label))
