"""Descriptor similarity: do descriptors of one task agree across models more than one model's
descriptors agree across tasks?

Same task, different models: cosines of flattened UTDs on the task's own grid. Same model,
different tasks: the shapes differ, so each fine-tune's UTD is recomputed on the union grid (all
tasks' probes, or the first k of each, x all tasks' prompts, docs/method.md sec. 11); the heatmap shows
that union matrix. Beside the raw figures stand those of centred descriptors: own-grid UTDs
row-centred, union UTDs centred within each task's block of prompts (what no zero-shot prediction sees).
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import attrs
import numpy as np
import torch

from ...descriptor import centre_rows
from ...errors import PlatonicError
from ...linalg import descriptor_cosine, unit_rows
from ...progress import progress as progress_bar
from ...protocol.encoder import DualEncoder
from .workspace import Workspace


@attrs.frozen(eq=False)
class SimilarityResult:
    """Cosine matrix over (family, task) descriptors on the union grid, with the two summary means."""

    labels: tuple[tuple[str, str], ...]
    matrix: np.ndarray
    same_task_cross_model: float
    same_model_cross_task: float
    centred_same_task_cross_model: float = float("nan")
    centred_same_model_cross_task: float = float("nan")

    @property
    def ratio(self) -> float:
        return _ratio(self.same_task_cross_model, self.same_model_cross_task)

    @property
    def centred_ratio(self) -> float:
        return _ratio(self.centred_same_task_cross_model, self.centred_same_model_cross_task)

    def as_dict(self) -> dict[str, Any]:
        return {
            "labels": [list(label) for label in self.labels],
            "matrix": self.matrix.round(5).tolist(),
            "same_task_cross_model": self.same_task_cross_model,
            "same_model_cross_task": self.same_model_cross_task,
            "ratio": self.ratio,
            "centred_same_task_cross_model": self.centred_same_task_cross_model,
            "centred_same_model_cross_task": self.centred_same_model_cross_task,
            "centred_ratio": self.centred_ratio,
        }


def _ratio(same_task: float, same_model: float) -> float:
    return same_task / same_model if same_model else float("nan")


def union_descriptor(ws: Workspace, family: str, task: str, grid_tasks: Sequence[str], probes: int | None = None) -> torch.Tensor:
    """UTD of (family, task)'s fine-tune on the union of `grid_tasks`' grids (the first `probes` probes of
    each grid, all its prompts; rows and prompts concatenated)."""
    f_pre, f_ft, G = [], [], []
    for other in grid_tasks:
        state = ws.grid_state(family, other)
        f_pre.append(unit_rows(state.raw_embeddings[:probes]))
        # the fine-tune's own grid is encoded whole anyway (its descriptor needs it): slice that
        f_ft.append(ws.finetuned_rows(family, task, other, None if other == task else probes)[:probes])
        G.append(state.landmarks)
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
    blocks = [ws.grid(t).shape[1] for t in tasks]
    centred_union = {label: centre_rows(u, blocks) for label, u in union.items()}
    matrix, centred = _cosines(labels, union), _cosines(labels, centred_union)
    pairs = list(itertools.combinations(range(len(labels)), 2))
    same_task = [(i, j) for i, j in pairs if labels[i][1] == labels[j][1]]
    same_model = [(i, j) for i, j in pairs if labels[i][0] == labels[j][0]]
    own = [ws.descriptor(*label, "affinity") for label in labels]  # the paper's claim is about its UTD
    mean = lambda v: float(np.mean(v)) if v else float("nan")  # noqa: E731
    return SimilarityResult(
        labels, matrix,
        mean([own[i].cosine(own[j]) for i, j in same_task]), mean([matrix[i, j] for i, j in same_model]),
        mean([own[i].centred().cosine(own[j].centred()) for i, j in same_task]), mean([centred[i, j] for i, j in same_model]),
    )


def _cosines(labels: Sequence[tuple[str, str]], descriptors: dict[tuple[str, str], torch.Tensor]) -> np.ndarray:
    """Symmetric matrix of cosines between the flattened descriptors, in `labels` order."""
    matrix = np.eye(len(labels))
    for i, j in itertools.combinations(range(len(labels)), 2):
        matrix[i, j] = matrix[j, i] = descriptor_cosine(descriptors[labels[i]], descriptors[labels[j]])
    return matrix
