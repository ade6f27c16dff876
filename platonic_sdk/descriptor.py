"""Universal Task Descriptors and their composition algebra.

A UTD is a P x M matrix on one task's grid, its shape independent of the model: in the paper, the change of
probe-to-prompt affinities ("affinity" space); by default, the default space `spaces.DEFAULT_SPACE` (docs/method.md sec. 15).
A Composition is a formal signed sum of UTDs: terms on different grids stay separate terms.
Descriptors in other spaces (`space`: probability, pseudo_label, confidence, blend; docs/method.md sec. 15)
live on the same grids, compose, transfer and save the same way; descriptors of different spaces never mix.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import attrs
import torch
from torch import Tensor

from . import spaces
from .edits.edit import Edit
from .encoding.features import encode_items, landmarks
from .errors import GridMismatchError, PlatonicError, ShapeError, SpaceMismatchError, check_finite, check_real, check_strength
from .io import load_tensors, require, save_tensors
from .linalg import descriptor_cosine
from .protocol.binding import portable_checkpoint
from .protocol.encoder import DualEncoder
from .spaces import DEFAULT_SPACE, check_space
from .tasks import Grid

if TYPE_CHECKING:
    from peft import PeftModel


def _as_change(ft: Edit | str | os.PathLike | PeftModel, pre: DualEncoder) -> Edit:
    """An edit of `pre`: `ft` itself when it applies like an Edit, else a peft LoRA adapter read onto `pre`."""
    if hasattr(ft, "applied_to"):
        return ft
    from .edits.lora_edit import LoraEdit  # deferred: peft takes seconds to import

    return LoraEdit.from_pretrained(ft, pre)


def centre_rows(matrix: Tensor, blocks: Sequence[int] | None = None) -> Tensor:
    """U[i, j] - mean_{j' in block(j)} U[i, j']: each row centred within each block of columns
    (`blocks` are the block widths, summing to the column count; None: one block, all columns)."""
    blocks = [matrix.shape[1]] if blocks is None else [int(b) for b in blocks]
    if any(b < 1 for b in blocks) or sum(blocks) != matrix.shape[1]:
        raise ShapeError(f"column blocks {blocks} do not partition the {matrix.shape[1]} columns of the descriptor")
    return torch.cat([part - part.mean(dim=1, keepdim=True) for part in matrix.split(blocks, dim=1)], dim=1)


def _matrix(value: Tensor) -> Tensor:
    check_real(torch.as_tensor(value), "descriptor")  # complex would lose its imaginary part in .float()
    value = torch.as_tensor(value).detach().float().cpu()
    if value.ndim != 2:
        raise ShapeError(f"a descriptor is a P x M matrix, got shape {tuple(value.shape)}")
    check_finite(value, "descriptor")
    return value


# the descriptor spaces (spaces.space_names()), and "labels": the labelled reference (evaluate/label_reference.py),
# which no model computes
REFERENCE_SPACES = ("labels",)


def _space(_: Any, __: attrs.Attribute, value: str) -> None:
    if value not in REFERENCE_SPACES:
        check_space(value)


@attrs.frozen(eq=False)
class UTD:
    """A task descriptor: a P x M matrix on grid `grid_id` of task `task`, in descriptor space `space`.

    `compute` gives it in the default space, `spaces.DEFAULT_SPACE` (docs/method.md sec. 15), unless told `space=`.
    The paper's UTD is the "affinity" space, UTD[i, j] = <f_ft(x_i), g(p_j)> - <f_pre(x_i), g(p_j)>: pass
    space="affinity" (the experiment runner: `CellSettings.paper()`, `platonic demo|grid --paper`).

    `space` says what the matrix measures (a registered DescriptorSpace, spaces.space; docs/method.md sec. 15): "affinity"
    (the paper's UTD above; a matrix given without a space), "probability" (softmax(s <f_ft, g>) -
    softmax(s <f_pre, g>)), "pseudo_label" ([argmax <f_ft, g> = j] - 1/M), "confidence" (the pseudo-label
    row times the fine-tuned model's top probability) or "blend" (the row-centred affinity UTD and the
    confidence matrix at equal norms, summed); all but affinity scaled to
    the affinity UTD's Frobenius norm.
    """

    matrix: Tensor = attrs.field(converter=_matrix)
    grid_id: str
    task: str
    provenance: dict[str, Any] = attrs.field(factory=dict)
    space: str = attrs.field(default="affinity", validator=_space)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.matrix.shape)

    def check_grid(self, grid: Grid) -> None:
        """Raise unless this descriptor lives on `grid` (same identity and shape)."""
        if grid.identity != self.grid_id:
            if grid.names_identity == self.grid_id:
                why = ("it was saved before grid identities covered the probe items, so its data cannot be checked; "
                       "recompute it (platonic utd, or UTD.compute) to use it")
            else:
                why = "the grids differ in their probe items, prompts or probe draw (a descriptor of other data)"
            raise GridMismatchError(
                f"descriptor of task {self.task!r} is on grid {self.grid_id}, not on grid {grid.identity} ({grid.task!r}): {why}"
            )
        if grid.shape != self.shape:
            raise ShapeError(f"descriptor has shape {self.shape}, but its grid is {grid.shape}")

    @classmethod
    def from_features(cls, f_pre: Tensor, f_ft: Tensor, g: Tensor, grid: Grid, space: str = DEFAULT_SPACE,
                      logit_scale: float | None = None, provenance: Mapping[str, Any] | None = None) -> "UTD":
        """Descriptor in `space` (spaces.space(space).descriptor) from probe embeddings before/after a change and
        the grid's landmarks (`logit_scale`: the model's s, needed by the spaces that read it, recorded in the
        provenance; `provenance`: free metadata kept with the descriptor)."""
        if f_pre.shape[0] != grid.shape[0] or g.shape[0] != grid.shape[1]:
            raise ShapeError(f"features give {f_pre.shape[0]} x {g.shape[0]}, but the grid is {grid.shape}")
        kind = spaces.space(space)
        provenance = dict(provenance or {})
        if kind.needs_logit_scale:
            if logit_scale is None:
                raise PlatonicError(f"the {kind.name} space needs the model's logit scale (logit_scale=)")
            provenance["logit_scale"] = float(logit_scale)
        return cls(kind.descriptor(f_pre, f_ft, g, logit_scale), grid.identity, grid.task, provenance, kind.name)

    @classmethod
    def compute(
        cls, pre: DualEncoder, ft: DualEncoder | Edit | str | os.PathLike | PeftModel, grid: Grid, batch_size: int = 64,
        space: str = DEFAULT_SPACE, logit_scale: float | None = None, provenance: Mapping[str, Any] | None = None,
    ) -> "UTD":
        """Descriptor of `ft` against `pre` (the text tower of `pre` gives the landmarks) in `space`
        (default spaces.DEFAULT_SPACE, chosen in docs/method.md sec. 15; "affinity", the paper's UTD; "blend",
        "probability", "pseudo_label", "confidence", or any space registered with spaces.register_space: see the class).

        `ft` is a fine-tuned encoder of the same family, or a change of `pre` applied while encoding and
        removed after: an `Edit`, or a peft LoRA adapter trained on `pre` (its folder, or a PeftModel).
        `logit_scale` overrides `pre.logit_scale` (read by the spaces that need it). `provenance`: free
        metadata kept with the descriptor, beside the family and checkpoint.
        """
        kind = spaces.space(space)
        if kind.needs_logit_scale and logit_scale is None:
            logit_scale = pre.logit_scale  # before any encoding: a family without one fails fast
        if isinstance(ft, DualEncoder) and (pre.family != ft.family or pre.embed_dim != ft.embed_dim):
            raise PlatonicError(f"a UTD compares two states of one model, got {pre.family} and {ft.family}")
        change = None if isinstance(ft, DualEncoder) else _as_change(ft, pre)  # refused before any encoding
        pre.check_finite()
        if isinstance(ft, DualEncoder):
            ft.check_finite()
        g = landmarks(pre, grid.prompts)
        f_pre = encode_items(pre, grid.items, batch_size, cache=True)
        if change is None:
            f_ft = encode_items(ft, grid.items, batch_size, cache=True)
        else:
            with change.applied_to(pre):
                f_ft = encode_items(pre, grid.items, batch_size)
        return cls.from_features(f_pre, f_ft, g, grid, kind.name, logit_scale,
                                 {"family": pre.family, "checkpoint": portable_checkpoint(pre.checkpoint), **(provenance or {})})

    def random_like(self, seed: int = 0) -> "UTD":
        """Random-UTD baseline: Gaussian entries rescaled to this descriptor's Frobenius norm."""
        gen = torch.Generator().manual_seed(seed)
        noise = torch.randn(self.shape, generator=gen)
        noise = noise * (self.matrix.norm() / noise.norm())
        return UTD(noise, self.grid_id, self.task, {**self.provenance, "random_seed": seed, "baseline": "random"}, self.space)

    def centred(self) -> "UTD":
        """Row-centred descriptor U[i, j] - mean_j U[i, j]: drops the per-probe offset shared by all of the
        task's prompts, which no zero-shot prediction on this task can see."""
        return UTD(centre_rows(self.matrix), self.grid_id, self.task, {**self.provenance, "centred": True}, self.space)

    def cosine(self, other: "UTD") -> float:
        """Cosine between flattened descriptors on the same grid."""
        if other.grid_id != self.grid_id:
            raise GridMismatchError(f"cannot compare descriptors on grids {self.grid_id} and {other.grid_id}")
        if other.space != self.space:
            raise SpaceMismatchError(f"cannot compare a {self.space} descriptor with a {other.space} descriptor")
        return descriptor_cosine(self.matrix, other.matrix)

    def save(self, path: str | os.PathLike) -> None:
        save_tensors(path, {"utd": self.matrix}, "utd",
                     {"grid_id": self.grid_id, "task": self.task, "provenance": self.provenance, "space": self.space})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "UTD":
        tensors, meta, _ = load_tensors(path, "utd", real=True)
        require(path, "descriptor file", tensors, meta, ("utd",), {"grid_id": str, "task": str})
        require(path, "descriptor file", tensors, {"provenance": {}, "space": "affinity", **meta}, (), {"provenance": dict, "space": str})
        return cls(tensors["utd"], meta["grid_id"], meta["task"], meta.get("provenance", {}), meta.get("space", "affinity"))

    # algebra: every operation yields a Composition
    def as_composition(self) -> "Composition":
        return Composition((Term(self, 1.0),))

    def __add__(self, other: "UTD | Composition") -> "Composition":
        return self.as_composition() + other

    def __sub__(self, other: "UTD | Composition") -> "Composition":
        return self.as_composition() - other

    def __neg__(self) -> "Composition":
        return -self.as_composition()

    def __mul__(self, coef: float) -> "Composition":
        return self.as_composition() * coef

    __rmul__ = __mul__

    def __repr__(self) -> str:
        space = "" if self.space == "affinity" else f", space={self.space!r}"
        return f"UTD(task={self.task!r}, grid={self.grid_id}, shape={self.shape}, norm={float(self.matrix.norm()):.4g}{space})"


@attrs.frozen
class Term:
    """One signed, weighted descriptor of a composition: coef * utd."""

    utd: UTD
    coef: float = attrs.field(converter=lambda c: check_strength(c, "composition coefficient"))


@attrs.frozen
class Composition:
    """Signed sum of descriptor terms; each term stays on its own grid (docs/method.md sec. 3)."""

    terms: tuple[Term, ...]

    def __attrs_post_init__(self) -> None:
        names = list(dict.fromkeys(term.utd.space for term in self.terms))
        if len(names) > 1:
            raise SpaceMismatchError(
                f"cannot compose descriptors of different spaces ({', '.join(names)}): their entries measure different "
                f"things; compute every term in one space (UTD.compute(..., space=...))"
            )
        grids: dict[str, str] = {}
        for term in self.terms:
            known = grids.setdefault(term.utd.task, term.utd.grid_id)
            if known != term.utd.grid_id:
                raise GridMismatchError(
                    f"two descriptors of task {term.utd.task!r} live on different grids ({known} vs "
                    f"{term.utd.grid_id}); recompute them on one grid before combining"
                )

    @staticmethod
    def of(value: "UTD | Composition") -> "Composition":
        if isinstance(value, UTD):
            return value.as_composition()
        if isinstance(value, Composition):
            return value
        raise TypeError(f"cannot compose a descriptor with {type(value).__name__}")

    def __add__(self, other: "UTD | Composition") -> "Composition":
        return Composition(self.terms + Composition.of(other).terms)

    __radd__ = __add__

    def __sub__(self, other: "UTD | Composition") -> "Composition":
        return self + (-Composition.of(other))

    def __neg__(self) -> "Composition":
        return self * -1.0

    def __mul__(self, coef: float) -> "Composition":
        c = check_strength(coef, "composition coefficient")
        return Composition(tuple(Term(t.utd, t.coef * c) for t in self.terms))

    __rmul__ = __mul__

    def centred(self) -> "Composition":
        """Every term's descriptor row-centred (UTD.centred); the coefficients stay."""
        return Composition(tuple(Term(t.utd.centred(), t.coef) for t in self.terms))

    def __iter__(self) -> Iterator[Term]:
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    @property
    def space(self) -> str | None:
        """The space of every term's descriptor (None for an empty composition)."""
        return self.terms[0].utd.space if self.terms else None

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.utd.task for t in self.terms))

    def by_grid(self) -> dict[str, tuple[str, Tensor]]:
        """grid_id -> (task, sum of coef * UTD on that grid): the per-grid targets of the objective."""
        out: dict[str, tuple[str, Tensor]] = {}
        for t in self.terms:
            task, acc = out.get(t.utd.grid_id, (t.utd.task, torch.zeros(t.utd.shape)))
            if acc.shape != t.utd.shape:
                raise ShapeError(f"descriptors on grid {t.utd.grid_id} have shapes {tuple(acc.shape)} and {t.utd.shape}")
            out[t.utd.grid_id] = (task, acc + t.coef * t.utd.matrix)
        return out

    def objective(self, achieved: dict[str, Tensor]) -> float:
        """L = sum over grids of (1/M) ||UTD[E] - sum_l c_l UTD_l||_F^2, given the edit's UTD per grid."""
        total = 0.0
        for grid_id, (_, target) in self.by_grid().items():
            if grid_id not in achieved:
                raise GridMismatchError(f"no achieved descriptor for grid {grid_id}")
            total += float((achieved[grid_id] - target).square().sum()) / target.shape[1]
        return total
