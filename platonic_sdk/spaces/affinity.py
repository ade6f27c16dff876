"""The affinity space, the paper's UTD: D[i, j] = <f_ft_i, g_j> - <f_pre_i, g_j> on unit rows, in natural units."""

from __future__ import annotations

from torch import Tensor

from ..linalg import utd
from . import DescriptorSpace, register_space


def affinity(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None = None) -> Tensor:
    """U = <f_ft, g> - <f_pre, g> (linalg.utd); the logit scale is not read."""
    return utd(f_pre, f_ft, g)


register_space(DescriptorSpace("affinity", affinity))
