"""Guarantee diagnostic: which predictions an edit provably cannot change.

With unit landmarks g_c and unit embeddings f (before) and f' (after), every logit moves by
|<f' - f, g_c>| <= ||f' - f||, so the top-1 class stays on top when its margin over the runner-up
exceeds 2 ||f' - f||. Correct items without that guarantee bound the accuracy an edit can lose.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import torch
from torch import Tensor

from ...errors import ShapeError
from ...linalg import unit_rows


@attrs.frozen(eq=False)
class GuaranteeItems:
    """Per-item margins, shifts ||f' - f||, predictions before/after, and labels."""

    margin: np.ndarray
    shift: np.ndarray
    before: np.ndarray
    after: np.ndarray
    labels: np.ndarray

    @property
    def guaranteed(self) -> np.ndarray:
        """margin > 2 ||f' - f||: the prediction cannot change."""
        return self.margin > 2 * self.shift

    @property
    def changed(self) -> np.ndarray:
        return self.before != self.after

    def summary(self) -> dict[str, Any]:
        """Shares (percent): guaranteed, changed, bound (correct but unguaranteed), lost, net accuracy loss."""
        correct_before = self.before == self.labels
        correct_after = self.after == self.labels
        pct = lambda mask: 100.0 * float(np.mean(mask)) if len(mask) else float("nan")  # noqa: E731
        return {
            "items": int(len(self.labels)),
            "guaranteed": pct(self.guaranteed),
            "changed": pct(self.changed),
            "bound": pct(correct_before & ~self.guaranteed),
            "lost": pct(correct_before & ~correct_after),
            "observed_loss": pct(correct_before) - pct(correct_after),
            "violations": int(np.sum(self.guaranteed & self.changed)),
        }


def guarantee_items(f_before: Tensor, f_after: Tensor, class_landmarks: Tensor, labels) -> GuaranteeItems:
    """Margins and shifts of embeddings before/after an edit against `class_landmarks` (rows made unit)."""
    if f_before.shape != f_after.shape or f_before.ndim != 2:
        raise ShapeError(f"embeddings before/after must be matching n x d matrices, got {tuple(f_before.shape)}, {tuple(f_after.shape)}")
    f0 = unit_rows(f_before.double())
    f1 = unit_rows(f_after.double())
    g = unit_rows(class_landmarks.double())
    if g.shape[1] != f0.shape[1] or g.shape[0] < 2:
        raise ShapeError(f"landmarks of shape {tuple(g.shape)} do not fit embeddings of width {f0.shape[1]}")
    logits0, logits1 = f0 @ g.T, f1 @ g.T
    top2 = logits0.topk(2, dim=1).values
    return GuaranteeItems(
        margin=(top2[:, 0] - top2[:, 1]).numpy(),
        shift=(f1 - f0).norm(dim=1).numpy(),
        before=logits0.argmax(1).numpy(),
        after=logits1.argmax(1).numpy(),
        labels=np.asarray(torch.as_tensor(labels), dtype=np.int64),
    )


def pooled_summary(parts: list[GuaranteeItems]) -> dict[str, Any]:
    """One summary over the union of several evaluation sets."""
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    return GuaranteeItems(cat("margin"), cat("shift"), cat("before"), cat("after"), cat("labels")).summary()
