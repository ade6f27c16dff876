"""Edits: deployable, reversible changes to one target encoder, saved as safetensors files.

`Edit` is the abstract base: apply / remove in any order through the target's edit stack, binding to
the target it was made for, save / load dispatching on the file's kind. `OperatorEdit` folds a
closed-form operator into the target's last affine site.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import os
import weakref
from typing import Any, ClassVar, Iterator

from torch import Tensor

from ..errors import CheckpointError, PlatonicError, ShapeError, check_finite, check_real, check_strength
from ..io import load_tensors, save_tensors
from ..protocol import stack
from ..protocol.binding import Target
from ..protocol.encoder import DualEncoder
from . import KINDS, edit_kinds


class Edit(abc.ABC):
    """A change to one target, recorded on the target's edit stack (see `platonic_sdk.protocol.stack`).

    `remove` works in any order: the weights become the base plus the other applied edits, bit for bit.
    An edit records the `target` it was made for and refuses any other model unless told otherwise.
    """

    kind: ClassVar[str]
    _kinds: ClassVar[dict[str, type["Edit"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            Edit._kinds[cls.kind] = cls

    def __init__(self, target: Target | None = None) -> None:
        self.target = target
        self._stack: stack.EditStack | None = None
        self._encoder: weakref.ref[DualEncoder] | None = None

    @property
    def applied(self) -> bool:
        return self._stack is not None and self._stack.resolve().holds(self)

    @abc.abstractmethod
    def _plan(self, encoder: DualEncoder) -> tuple[dict[str, Tensor], stack.Update]:
        """The live tensors this edit writes in `encoder` (checked to fit) and the pure update of their values."""

    @abc.abstractmethod
    def tensors(self) -> dict[str, Tensor]:
        """What the edit's file stores (its identity, strength aside)."""

    @abc.abstractmethod
    def metadata(self) -> dict[str, Any]:
        """JSON metadata of the edit's file."""

    @classmethod
    @abc.abstractmethod
    def from_file(cls, tensors: dict[str, Tensor], meta: dict[str, Any]) -> "Edit":
        """Rebuild an edit from what `tensors` / `metadata` wrote."""

    @property
    def identity(self) -> str:
        """`kind:fingerprint` of the edit's tensors; the same edit at another strength has the same identity."""
        return f"{self.kind}:{stack.fingerprint(self.tensors())}"

    def record(self) -> dict[str, Any]:
        """What a saved checkpoint's platonic.json says about this edit once it is folded in."""
        return {"kind": self.kind, "identity": self.identity, "edit": repr(self)}

    def apply(self, encoder: DualEncoder, allow_other_target: bool = False, allow_twice: bool = False) -> "Edit":
        """Change `encoder` in place; on any error the encoder is left exactly as it was.

        Refused: an edit already applied; unless `allow_twice`, an identical edit (same `identity`, at any
        strength) already applied to the encoder or recorded as folded into its checkpoint; and (unless
        `allow_other_target`) a model other than `self.target`.
        """
        sites, update = self.check(encoder, allow_other_target, allow_twice)
        self._stack = stack.push(self, sites, update, repr(self), encoder.model)
        self._encoder = weakref.ref(encoder)
        return self

    def check(self, encoder: DualEncoder, allow_other_target: bool = False, allow_twice: bool = False,
              ) -> tuple[dict[str, Tensor], stack.Update]:
        """Raise what `apply` refuses before computing new weights (an edit already applied, an identical one, another
        site or model), changing nothing; else (the tensors it would write, their update)."""
        if self.applied:
            raise PlatonicError("this edit is already applied; remove it first")
        if not allow_twice:
            self._refuse_twice(encoder)
        sites, update = self._plan(encoder)
        if self.target is not None:
            self.target.check(Target.of_encoder(encoder, sites), repr(self), allow_other_target)
        return sites, update

    def remove(self) -> DualEncoder | None:
        """Take this edit out of its target's stack, wherever it sits; returns the target (None once freed)."""
        if not self.applied:
            raise PlatonicError("this edit is not applied")
        self._stack.resolve().pop(self)
        self._stack = None
        return self._encoder()

    def _refuse_twice(self, encoder: DualEncoder) -> None:
        """Raise when an identical edit is already in `encoder`: folded into its checkpoint, or applied."""
        if encoder.folded_edits:
            identity = self.identity
            folded = [r for r in encoder.folded_edits if r.get("identity") == identity]
            if folded:
                raise PlatonicError(
                    f"{encoder.family} checkpoint {encoder.checkpoint!r} already has this edit folded in "
                    f"({folded[0].get('edit', identity)}, recorded in its platonic.json); it would be applied twice "
                    "(allow_twice=True applies it again)"
                )
        twin = stack.identical(encoder.model, type(self), lambda e: e.tensors(), self.tensors())
        if twin is not None:
            raise PlatonicError(
                f"an identical edit ({twin!r}) is already applied to this {encoder.family} model; applying it again "
                "would add it twice (allow_twice=True applies it again; remove the other one to replace it)"
            )

    @contextlib.contextmanager
    def applied_to(self, encoder: DualEncoder, allow_other_target: bool = False, allow_twice: bool = False) -> Iterator[DualEncoder]:
        """`with edit.applied_to(model): ...` applies on entry and removes on exit."""
        self.apply(encoder, allow_other_target, allow_twice)
        try:
            yield encoder
        finally:
            self.remove()

    def save(self, path: str | os.PathLike) -> None:
        target = self.target.describe() if self.target is not None else None
        save_tensors(path, self.tensors(), self.kind, {**self.metadata(), "target": target})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Edit":
        """Load any saved edit; the file's kind picks the class."""
        tensors, meta, kind = load_tensors(path, real=True)
        if kind not in Edit._kinds and kind in KINDS:  # defined in a module not imported yet
            importlib.import_module(KINDS[kind])
        if kind not in Edit._kinds:
            raise PlatonicError(f"{path} holds a {kind!r}, which is not an edit (edit files: {', '.join(edit_kinds())})")
        if cls is not Edit and not issubclass(Edit._kinds[kind], cls):
            raise PlatonicError(f"{path} holds a {kind!r}, not a {cls.kind!r}")
        try:
            edit = Edit._kinds[kind].from_file(tensors, meta)
            edit.target = Target.from_record(meta.get("target"))
        except (PlatonicError, KeyError, TypeError, ValueError, AttributeError) as exc:  # what the file's fields hold
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            raise CheckpointError(f"{path} is a malformed {kind} file: {message}") from None
        return edit


_SITES = {"projection": "projection layer", "residual_head": "attention-pool head"}


def _model(family: str, checkpoint: str | None) -> str:
    return f"{family} ({checkpoint})" if checkpoint else f"{family} (built from a config)"


class OperatorEdit(Edit):
    """z -> z + strength * A s folded into the target's last affine site (see protocol.AffineSite)."""

    kind = "operator_edit"

    def __init__(
        self,
        operator: Tensor,
        strength: float = 0.5,
        site_kind: str = "projection",
        meta: dict[str, Any] | None = None,
        target: Target | None = None,
    ):
        super().__init__(target)
        check_real(operator, "operator")
        if operator.ndim != 2:
            raise ShapeError(f"an operator is a matrix, got shape {tuple(operator.shape)}")
        check_finite(operator, "operator")
        self.operator = operator.detach().cpu()
        self.strength = check_strength(strength)
        self.site_kind = site_kind
        self.meta = dict(meta or {})

    def scaled(self, strength: float) -> "OperatorEdit":
        """The same operator at another strength."""
        return OperatorEdit(self.operator, strength, self.site_kind, self.meta, self.target)

    def __add__(self, other: "OperatorEdit") -> "OperatorEdit":
        """Operators add (the solve is linear in the descriptor); strengths must match."""
        if not isinstance(other, OperatorEdit) or other.site_kind != self.site_kind or other.strength != self.strength:
            raise PlatonicError("only operator edits of one site kind and one strength add")
        if other.operator.shape != self.operator.shape:
            raise ShapeError(f"operators of shapes {tuple(self.operator.shape)} and {tuple(other.operator.shape)} do not add")
        target = self.target if self.target == other.target else None
        return OperatorEdit(self.operator + other.operator, self.strength, self.site_kind, {"sum_of": [self.meta, other.meta]}, target)

    def _plan(self, encoder: DualEncoder) -> tuple[dict[str, Tensor], stack.Update]:
        site = encoder.last_affine()
        if site.kind != self.site_kind:
            raise PlatonicError(f"this edit was made for {self._made_for()} and changes its {_SITES.get(self.site_kind, 'last affine map')} "
                                f"(a {self.site_kind} site); {_model(encoder.family, encoder.checkpoint)} has a {site.kind} site "
                                f"({_SITES.get(site.kind, 'last affine map')}) instead, so the edit cannot apply to it (build one for "
                                "it from the same descriptors)")
        sites = site.tensors()
        if self.target is not None and {n: tuple(t.shape) for n, t in sites.items()} != self.target.shapes:
            self.target.check(Target.of_encoder(encoder, sites), "this edit")  # another width: whom it was made for, first
        return sites, site.folded(self.operator, self.strength)

    def _made_for(self) -> str:
        if self.target is not None and self.target.family:
            return _model(self.target.family, self.target.checkpoint)
        if self.meta.get("target_family"):
            return _model(self.meta["target_family"], self.meta.get("target_checkpoint"))
        return "another model"

    def tensors(self) -> dict[str, Tensor]:
        return {"operator": self.operator}

    def metadata(self) -> dict[str, Any]:
        return {"strength": self.strength, "site_kind": self.site_kind, **{"info": self.meta}}

    @classmethod
    def from_file(cls, tensors: dict[str, Tensor], meta: dict[str, Any]) -> "OperatorEdit":
        missing = [k for k in ("strength", "site_kind") if k not in meta] + (["operator"] if "operator" not in tensors else [])
        if missing:
            raise PlatonicError(f"operator edit file has no {' or '.join(map(repr, missing))}")
        if meta["site_kind"] not in _SITES:
            raise PlatonicError(f"its site_kind is {meta['site_kind']!r}, not one of {', '.join(_SITES)}")
        if not isinstance(meta.get("info", {}), dict):
            raise PlatonicError(f"its info is {meta['info']!r}, not a JSON object")
        return cls(tensors["operator"], meta["strength"], meta["site_kind"], meta.get("info"))

    def __repr__(self) -> str:
        return f"OperatorEdit(site={self.site_kind}, shape={tuple(self.operator.shape)}, strength={self.strength}, applied={self.applied})"
