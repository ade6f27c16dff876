"""Edits: deployable, reversible changes to one target encoder, saved as safetensors files.

`Edit` is the abstract base (apply / remove / save / load, dispatching on the file's kind);
`OperatorEdit` folds a closed-form operator into the target's last affine site.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import os
from typing import Any, ClassVar, Iterator

import torch
from torch import Tensor

from ..errors import PlatonicError, ShapeError, check_finite, check_strength
from ..io import load_tensors, save_tensors
from ..protocol import DualEncoder

# Edit kinds whose classes live in modules that `platonic_sdk.transfer` imports lazily.
_DEFERRED_KINDS = {"lora_edit": "platonic_sdk.transfer.lora"}


class Edit(abc.ABC):
    """A change to one target; `apply` snapshots what it overwrites so `remove` restores it bit for bit."""

    kind: ClassVar[str]
    _kinds: ClassVar[dict[str, type["Edit"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            Edit._kinds[cls.kind] = cls

    def __init__(self) -> None:
        self._target: DualEncoder | None = None
        self._snapshot: dict[str, Tensor] = {}

    @property
    def applied(self) -> bool:
        return self._target is not None

    @abc.abstractmethod
    def _write(self, encoder: DualEncoder) -> None:
        """Change `encoder` in place, first copying every tensor it overwrites into `self._snapshot`."""

    @abc.abstractmethod
    def _restore(self, encoder: DualEncoder) -> None:
        """Undo `_write` exactly, using `self._snapshot`."""

    @abc.abstractmethod
    def tensors(self) -> dict[str, Tensor]:
        """What the edit's file stores."""

    @abc.abstractmethod
    def metadata(self) -> dict[str, Any]:
        """JSON metadata of the edit's file."""

    @classmethod
    @abc.abstractmethod
    def from_file(cls, tensors: dict[str, Tensor], meta: dict[str, Any]) -> "Edit":
        """Rebuild an edit from what `tensors` / `metadata` wrote."""

    def apply(self, encoder: DualEncoder) -> "Edit":
        """Change `encoder` in place; on any error the encoder is left exactly as it was."""
        if self.applied:
            raise PlatonicError("this edit is already applied; remove it first")
        self._snapshot = {}
        try:
            self._write(encoder)
        except BaseException:
            self._restore(encoder)
            self._snapshot = {}
            raise
        self._target = encoder
        return self

    def remove(self) -> DualEncoder:
        """Restore the target's original weights bit for bit; returns the target."""
        if self._target is None:
            raise PlatonicError("this edit is not applied")
        target, self._target = self._target, None
        self._restore(target)
        self._snapshot = {}
        return target

    @contextlib.contextmanager
    def applied_to(self, encoder: DualEncoder) -> Iterator[DualEncoder]:
        """`with edit.applied_to(model): ...` applies on entry and removes on exit."""
        self.apply(encoder)
        try:
            yield encoder
        finally:
            self.remove()

    def save(self, path: str | os.PathLike) -> None:
        save_tensors(path, self.tensors(), self.kind, self.metadata())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Edit":
        """Load any saved edit; the file's kind picks the class."""
        tensors, meta, kind = load_tensors(path)
        if kind not in Edit._kinds and kind in _DEFERRED_KINDS:  # defined in a module not imported yet
            importlib.import_module(_DEFERRED_KINDS[kind])
        if kind not in Edit._kinds:
            raise PlatonicError(f"{path} holds a {kind!r}, which is not an edit (known: {sorted(Edit._kinds)})")
        if cls is not Edit and not issubclass(Edit._kinds[kind], cls):
            raise PlatonicError(f"{path} holds a {kind!r}, not a {cls.kind!r}")
        return Edit._kinds[kind].from_file(tensors, meta)


class OperatorEdit(Edit):
    """z -> z + alpha A s folded into the target's last affine site (see protocol.AffineSite)."""

    kind = "operator_edit"

    def __init__(self, operator: Tensor, alpha: float = 0.5, site_kind: str = "projection", meta: dict[str, Any] | None = None):
        super().__init__()
        if operator.ndim != 2:
            raise ShapeError(f"an operator is a matrix, got shape {tuple(operator.shape)}")
        check_finite(operator, "operator")
        self.operator = operator.detach().cpu()
        self.alpha = check_strength(alpha)
        self.site_kind = site_kind
        self.meta = dict(meta or {})

    def scaled(self, alpha: float) -> "OperatorEdit":
        """The same operator at another strength."""
        return OperatorEdit(self.operator, alpha, self.site_kind, self.meta)

    def __add__(self, other: "OperatorEdit") -> "OperatorEdit":
        """Operators add (the solve is linear in the descriptor); strengths must match."""
        if not isinstance(other, OperatorEdit) or other.site_kind != self.site_kind or other.alpha != self.alpha:
            raise PlatonicError("only operator edits of one site kind and one strength add")
        if other.operator.shape != self.operator.shape:
            raise ShapeError(f"operators of shapes {tuple(self.operator.shape)} and {tuple(other.operator.shape)} do not add")
        return OperatorEdit(self.operator + other.operator, self.alpha, self.site_kind, {"sum_of": [self.meta, other.meta]})

    def _write(self, encoder: DualEncoder) -> None:
        site = encoder.last_affine()
        if site.kind != self.site_kind:
            raise PlatonicError(f"edit was solved for a {self.site_kind} site, but {encoder.family} has a {site.kind} site")
        self._snapshot = {name: t.detach().clone() for name, t in site.tensors().items()}
        site.fold(self.operator, self.alpha)

    def _restore(self, encoder: DualEncoder) -> None:
        live = encoder.last_affine().tensors()
        with torch.no_grad():
            for name, original in self._snapshot.items():
                live[name].copy_(original)

    def tensors(self) -> dict[str, Tensor]:
        return {"operator": self.operator}

    def metadata(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "site_kind": self.site_kind, **{"info": self.meta}}

    @classmethod
    def from_file(cls, tensors: dict[str, Tensor], meta: dict[str, Any]) -> "OperatorEdit":
        if "operator" not in tensors:
            raise PlatonicError("operator edit file has no 'operator' tensor")
        return cls(tensors["operator"], meta.get("alpha", 0.5), meta.get("site_kind", "projection"), meta.get("info"))

    def __repr__(self) -> str:
        return f"OperatorEdit(site={self.site_kind}, shape={tuple(self.operator.shape)}, alpha={self.alpha}, applied={self.applied})"
