"""Descriptor similarity: do descriptors of one task agree across models more than one model's
descriptors agree across tasks?

Same task, different models: cosines of flattened UTDs on the task's own grid. Same model,
different tasks: the shapes differ, so each fine-tune's UTD is recomputed on the union grid (all
tasks' probes, or the first k of each, x all tasks' prompts, METHOD sec. 11); the heatmap shows
that union matrix.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import attrs
import numpy as np
import torch

from ..errors import PlatonicError
from ..linalg import descriptor_cosine, unit_rows
from ..progress import progress as progress_bar
from ..protocol import DualEncoder
from .workspace import Workspace


@attrs.frozen(eq=False)
class SimilarityResult:
    """Cosine matrix over (family, task) descriptors on the union grid, with the two summary means."""

    labels: tuple[tuple[str, str], ...]
    matrix: np.ndarray
    same_task_cross_model: float
    same_model_cross_task: float

    @property
    def ratio(self) -> float:
        return self.same_task_cross_model / self.same_model_cross_task if self.same_model_cross_task else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "labels": [list(label) for label in self.labels],
            "matrix": self.matrix.round(5).tolist(),
            "same_task_cross_model": self.same_task_cross_model,
            "same_model_cross_task": self.same_model_cross_task,
            "ratio": self.ratio,
        }


def union_descriptor(ws: Workspace, family: str, task: str, grid_tasks: Sequence[str], probes: int | None = None) -> torch.Tensor:
    """UTD of (family, task)'s fine-tune on the union of `grid_tasks`' grids (the first `probes` probes of
    each grid, all its prompts; rows and prompts concatenated)."""
    f_pre, f_ft, G = [], [], []
    for other in grid_tasks:
        state = ws.bank(family).add_grid(ws.grid(other))
        f_pre.append(unit_rows(state.Z[:probes]))
        # the fine-tune's own grid is encoded whole anyway (its descriptor needs it): slice that
        f_ft.append(ws.finetuned_rows(family, task, other, None if other == task else probes)[:probes])
        G.append(state.G)
    return (torch.cat(f_ft) - torch.cat(f_pre)) @ torch.cat(G).T


def similarity(
    ws: Workspace, families: Sequence[str] | None = None, tasks: Sequence[str] | None = None, union_probes: int | None = None,
    progress: bool | None = None,
) -> SimilarityResult:
    """Cosine similarities of every (family, task) descriptor whose fine-tuned model is available
    (the union grid needs the fine-tuned model; descriptors loaded from files are left out).

    `union_probes` caps the probes taken from each task's grid in the union (None: all): the union
    costs (fine-tunes x tasks x probes) encodings, the one study that is not a matrix product (it shows
    progress per fine-tune; `progress` None: as the workspace does).
    """
    families = tuple(families or ws.families)
    tasks = tuple(tasks or ws.transfer_tasks)
    labels = tuple((f, t) for t in tasks for f in families if isinstance(ws.finetuned.get((f, t)), DualEncoder))
    if len(labels) < 2:
        raise PlatonicError("descriptor similarity needs at least two fine-tuned models (stored descriptors cannot be recomputed)")
    shown = ws.progress if progress is None else progress
    union = {label: union_descriptor(ws, *label, tasks, union_probes)
             for label in progress_bar(labels, desc="similarity: union-grid descriptors", disable=not shown)}
    n = len(labels)
    matrix = np.eye(n)
    for i, j in itertools.combinations(range(n), 2):
        matrix[i, j] = matrix[j, i] = descriptor_cosine(union[labels[i]], union[labels[j]])
    same_task = [
        ws.descriptor(a[0], a[1]).cosine(ws.descriptor(b[0], b[1]))
        for a, b in itertools.combinations(labels, 2)
        if a[1] == b[1]
    ]
    same_model = [matrix[i, j] for i, j in itertools.combinations(range(n), 2) if labels[i][0] == labels[j][0]]
    mean = lambda v: float(np.mean(v)) if v else float("nan")  # noqa: E731
    return SimilarityResult(labels, matrix, mean(same_task), mean(same_model))
