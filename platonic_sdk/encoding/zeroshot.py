"""Zero-shot classification with a (possibly edited) encoder against frozen class landmarks."""

from __future__ import annotations

import torch
from torch import Tensor

from ..linalg import unit_rows
from ..protocol.encoder import DualEncoder
from ..tasks import Task
from .features import encode_items, landmarks


def predict(embeddings: Tensor, class_landmarks: Tensor) -> Tensor:
    """argmax_c <f, g_c> for each row."""
    return (unit_rows(embeddings) @ unit_rows(class_landmarks).T).argmax(dim=1)


def accuracy_of(predictions: Tensor, labels) -> float:
    """Percent of predictions equal to labels."""
    labels = torch.as_tensor(labels, dtype=torch.long)
    if predictions.shape != labels.shape:
        raise ValueError(f"{predictions.shape[0]} predictions for {labels.shape[0]} labels")
    return 100.0 * float((predictions == labels).float().mean()) if len(labels) else float("nan")


def accuracy(encoder: DualEncoder, task: Task, split: str = "test", batch_size: int = 64, progress: bool = False) -> float:
    """Zero-shot accuracy (percent) of `encoder` on a split of `task` with the task's templates (finite weights only)."""
    encoder.check_finite()
    data = getattr(task, split)
    g = landmarks(encoder, task.prompts())
    f = encode_items(encoder, data.items, batch_size, progress, cache=True)
    return accuracy_of(predict(f, g), data.labels)
