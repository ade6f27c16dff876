"""The blend space (the default): D = Uc / ||Uc||_F + C / ||C||_F, Uc the row-centred affinity UTD and C the
confidence matrix, scaled to ||U||_F: equal parts of what the affinity change and the predictions say."""

from __future__ import annotations

import torch
from torch import Tensor

from ..linalg import utd
from . import DescriptorSpace, register_space
from .confidence import confidence_labels
from .prediction import norm_matched


def blend(f_pre: Tensor, f_ft: Tensor, g: Tensor, logit_scale: float | None) -> Tensor:
    """Uc / ||Uc||_F + C / ||C||_F (a zero part stays zero) times ||U||_F / ||D||_F, in U's dtype."""
    U = utd(f_pre, f_ft, g)
    unit = torch.ones((), dtype=torch.float64)
    centred = U.double() - U.double().mean(dim=1, keepdim=True)
    raw = norm_matched(centred, unit) + norm_matched(confidence_labels(f_ft, g, logit_scale).double(), unit)
    return norm_matched(raw, U).to(U.dtype)


register_space(DescriptorSpace("blend", blend, needs_logit_scale=True))
