"""Weight-space task vectors: tau = theta_ft - theta_pre, with the algebra of task arithmetic.

A model edited by a sum of task vectors is theta = theta_pre + lambda * sum_i tau_i (same architecture
only). Vectors live on named floating-point tensors (parameters and buffers); integer buffers never
change under fine-tuning and are left out. `merge` combines several with a registered merging method
(merging.py).
"""

from __future__ import annotations

import inspect
import numbers
import os
from typing import Any, Iterable, Mapping, Sequence

import attrs
import safetensors.torch
import torch
from torch import Tensor, nn

from ..errors import CheckpointError, PlatonicError, ShapeError, check_finite, check_real, check_strength
from ..io import load_tensors, save_tensors
from ..protocol import stack
from ..protocol.binding import Target
from ..protocol.stack import EditStack
from .merging import MergeMethod, merge_method, merge_methods, register_merge_method  # noqa: F401  (re-exported)

KIND = "task_vector"
TARGET_KEY = "target"  # where a file's metadata keeps the vector's `target` record


def named_tensors(module: nn.Module) -> dict[str, Tensor]:
    """The module's floating-point parameters and buffers by name (shared tensors listed once)."""
    out = {name: p for name, p in module.named_parameters()}
    out.update((name, b) for name, b in module.named_buffers() if name not in out)
    return {name: t for name, t in out.items() if t.is_floating_point()}


def _check_same_layout(a: Mapping[str, Tensor], b: Mapping[str, Tensor], what: str) -> None:
    """Raise unless `a` and `b` hold the same names with the same shapes."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        raise PlatonicError(
            f"{what}: different architectures ({len(only_a)} tensor(s) only in the first, e.g. {only_a[:3]}; "
            f"{len(only_b)} only in the second, e.g. {only_b[:3]})"
        )
    for name in a:
        if a[name].shape != b[name].shape:
            raise ShapeError(f"{what}: tensor {name!r} has shapes {tuple(a[name].shape)} and {tuple(b[name].shape)}")


def _frozen_deltas(value: Mapping[str, Tensor]) -> dict[str, Tensor]:
    out = {}
    for name, t in value.items():
        check_real(t, f"task-vector entry {name!r}")
        t = t.detach()
        check_finite(t, f"task-vector entry {name!r}")
        out[str(name)] = t
    return out


@attrs.frozen(eq=False)
class TaskVector:
    """tau[name] = theta_ft[name] - theta_pre[name]; supports +, -, scalar *, sum and apply/undo.

    `target` records theta_pre (shapes and a fingerprint of its base weights at the tensors of tau):
    `apply_to` refuses other weights unless told to allow them.
    """

    deltas: dict[str, Tensor] = attrs.field(converter=_frozen_deltas)
    metadata: dict[str, Any] = attrs.field(factory=dict)
    target: Target | None = None

    @classmethod
    def from_state_dicts(
        cls,
        pre: Mapping[str, Tensor],
        ft: Mapping[str, Tensor],
        include: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> "TaskVector":
        """tau = ft - pre over the floating-point entries (or only the names in `include`); `metadata` is kept
        with it (its "family" names the target it binds to)."""
        pre_f = {k: v for k, v in pre.items() if torch.is_tensor(v) and v.is_floating_point()}
        ft_f = {k: v for k, v in ft.items() if torch.is_tensor(v) and v.is_floating_point()}
        _check_same_layout(pre_f, ft_f, "task vector")
        names = list(pre_f) if include is None else list(include)
        missing = [n for n in names if n not in pre_f]
        if missing:
            raise PlatonicError(f"task vector: no floating-point tensor named {missing[:3]}")
        deltas = {n: ft_f[n].detach().to(pre_f[n].device) - pre_f[n].detach() for n in names}
        metadata = dict(metadata or {})
        return cls(deltas, metadata, Target.of({n: pre_f[n] for n in names}, metadata.get("family")))

    @classmethod
    def from_models(
        cls, pre: nn.Module, ft: nn.Module, include: Iterable[str] | None = None, metadata: Mapping[str, Any] | None = None,
    ) -> "TaskVector":
        """tau between two models of the same architecture (the pre-trained one first)."""
        return cls.from_state_dicts(named_tensors(pre), named_tensors(ft), include, metadata)

    @classmethod
    def from_files(cls, pre_path: str | os.PathLike, ft_path: str | os.PathLike,
                   metadata: Mapping[str, Any] | None = None) -> "TaskVector":
        """tau between two plain safetensors state dicts (e.g. two checkpoints of one model)."""
        states = []
        for path in (pre_path, ft_path):
            if not os.path.isfile(path):
                raise CheckpointError(f"no such file: {path}")
            try:
                states.append(safetensors.torch.load_file(str(path)))
            except Exception as exc:  # safetensors raises several types for foreign files
                raise CheckpointError(f"{path} is not a readable safetensors file ({exc})") from None
        return cls.from_state_dicts(states[0], states[1], metadata=metadata)

    # algebra
    def _combine(self, other: "TaskVector", sign: float) -> "TaskVector":
        if not isinstance(other, TaskVector):
            return NotImplemented
        _check_same_layout(self.deltas, other.deltas, "task-vector arithmetic")
        deltas = {n: self.deltas[n] + sign * other.deltas[n].to(self.deltas[n].device) for n in self.deltas}
        target = self.target if self.target == other.target else None  # vectors of two pre-trained models bind to neither
        return TaskVector(deltas, {"combined": [self.metadata, other.metadata], "signs": [1.0, sign]}, target)

    def __add__(self, other: "TaskVector") -> "TaskVector":
        return self._combine(other, 1.0)

    def __sub__(self, other: "TaskVector") -> "TaskVector":
        return self._combine(other, -1.0)

    def __mul__(self, coef: float) -> "TaskVector":
        if isinstance(coef, bool) or not isinstance(coef, numbers.Real):
            return NotImplemented
        c = check_strength(coef, "task-vector coefficient")
        return TaskVector({n: c * d for n, d in self.deltas.items()}, {**self.metadata, "scaled_by": c}, self.target)

    __rmul__ = __mul__

    def __neg__(self) -> "TaskVector":
        return self * -1.0

    @staticmethod
    def sum(vectors: Iterable["TaskVector"]) -> "TaskVector":
        """sum_i tau_i (all on the same tensors)."""
        vectors = list(vectors)
        if not vectors:
            raise PlatonicError("TaskVector.sum needs at least one task vector")
        total = vectors[0]
        for v in vectors[1:]:
            total = total + v
        return total

    def norm(self) -> float:
        """Frobenius norm of the whole vector: sqrt(sum_name ||tau[name]||^2)."""
        return float(sum(d.double().square().sum() for d in self.deltas.values()) ** 0.5)

    def cosine(self, other: "TaskVector") -> float:
        """<tau, tau'> / (||tau|| ||tau'||) over all tensors (the interference OrthoReg lowers)."""
        _check_same_layout(self.deltas, other.deltas, "task-vector cosine")
        dot = sum(float((d.double() * other.deltas[n].double().to(d.device)).sum()) for n, d in self.deltas.items())
        denom = self.norm() * other.norm()
        return dot / denom if denom > 0 else 0.0

    def apply_to(self, model: nn.Module, strength: float = 1.0, allow_other_target: bool = False,
                 allow_twice: bool = False) -> "AppliedTaskVector":
        """theta <- theta + strength * tau in place (summed in float64), on the model's edit stack.

        Returns a handle whose undo() takes tau out again, in any order with the model's other edits.
        Refused (nothing changed): other tensor names or shapes, weights other than `target` (unless
        `allow_other_target`), an identical task vector already applied to the model (at any strength;
        unless `allow_twice`), and a result with NaN or inf.
        """
        c = check_strength(strength, "task-vector strength")
        if not allow_twice:
            self._refuse_twice(model)
        live = named_tensors(model)
        missing = [n for n in self.deltas if n not in live]
        if missing:
            raise PlatonicError(f"model has no tensor named {missing[:3]} (different architecture?)")
        for n, d in self.deltas.items():
            if live[n].shape != d.shape:
                raise ShapeError(f"tensor {n!r} has shape {tuple(live[n].shape)} in the model, {tuple(d.shape)} in the task vector")
        sites = {n: live[n] for n in self.deltas}
        label = f"task vector ({len(self.deltas)} tensors) x {c:g}"  # not repr: its norm is a pass over tau
        if self.target is not None:
            here = Target.of(sites, self.target.family, type(model).__name__)
            self.target.check(here, label, allow_other_target)
        deltas = self.deltas

        def update(values: dict[str, Tensor]) -> dict[str, Tensor]:
            return {n: (t.double() + c * deltas[n].to(device=t.device, dtype=torch.float64)).to(t.dtype) for n, t in values.items()}

        handle = AppliedTaskVector(self, c)
        handle.stack = stack.push(handle, sites, update, label, model)
        return handle

    def _refuse_twice(self, model: nn.Module) -> None:
        """Raise when an identical task vector is applied to `model`."""
        twin = stack.identical(model, AppliedTaskVector, lambda h: h.vector.deltas, self.deltas)
        if twin is not None:
            raise PlatonicError(f"an identical task vector ({len(self.deltas)} tensors, applied at strength {twin.strength:g}) is "
                                "already applied to this model; applying it again would add it twice (allow_twice=True applies it "
                                "again; undo the other one to replace it)")

    def fold_into(self, model: nn.Module, strength: float = 1.0, allow_other_target: bool = False) -> None:
        """theta <- theta + strength * tau for good: the result is a new model, whose base is these weights.

        Nothing to undo and no base copy kept (a loaded fine-tune); refused while edits are applied to `model`.
        """
        if stack.applied(model):
            raise PlatonicError("fold a task vector into a model without applied edits (remove them first)")
        self.apply_to(model, strength, allow_other_target)
        stack.forget(model)

    @property
    def identity(self) -> str:
        """`task_vector:fingerprint` of the deltas (the strength aside)."""
        return f"{KIND}:{stack.fingerprint(self.deltas)}"

    def save(self, path: str | os.PathLike) -> None:
        target = self.target.describe() if self.target is not None else None
        save_tensors(path, self.deltas, KIND, {**self.metadata, TARGET_KEY: target})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TaskVector":
        tensors, meta, _ = load_tensors(path, KIND, real=True)
        target = Target.from_record(meta.pop(TARGET_KEY, None))
        return cls(tensors, meta, target)

    def __repr__(self) -> str:
        return f"TaskVector({len(self.deltas)} tensors, norm={self.norm():.4g})"


@attrs.define(eq=False)
class AppliedTaskVector:
    """Undo handle of `TaskVector.apply_to`: undo() takes the vector out of the model's edit stack."""

    vector: TaskVector
    strength: float
    stack: EditStack | None = None

    @property
    def active(self) -> bool:
        return self.stack is not None and self.stack.resolve().holds(self)

    def undo(self) -> None:
        """Weights become the base plus the model's other edits, bit for bit."""
        if not self.active:
            raise PlatonicError("this task vector was already undone")
        self.stack.resolve().pop(self)
        self.stack = None

    def record(self) -> dict[str, Any]:
        """What a saved checkpoint's platonic.json says about this vector once it is folded in."""
        return {"kind": KIND, "identity": self.vector.identity, "strength": self.strength, "edit": repr(self.vector)}

    def __enter__(self) -> "AppliedTaskVector":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            self.undo()


def merge(vectors: Sequence[TaskVector], method: str = "task_arithmetic", **params: Any) -> TaskVector:
    """tau_merged = method(tau_1..tau_T; params), all vectors on the same tensors (same architecture)."""
    spec = merge_method(method)
    vectors = list(vectors)
    if not vectors or not all(isinstance(v, TaskVector) for v in vectors):
        raise PlatonicError(f"merge needs a non-empty list of TaskVectors, got {[type(v).__name__ for v in vectors]}")
    for v in vectors[1:]:
        _check_same_layout(vectors[0].deltas, v.deltas, f"merge ({method})")
    try:
        inspect.signature(spec.fn).bind(None, **params)
    except TypeError:
        accepted = [p for p in inspect.signature(spec.fn).parameters][1:]
        raise PlatonicError(f"merge method {method!r} takes {accepted or 'no parameters'}, got {sorted(params)}") from None
    first = vectors[0].deltas
    deltas = [{n: v.deltas[n].detach().to(device=first[n].device, dtype=torch.float64) for n in first} for v in vectors]
    merged = spec.fn(deltas, **params)
    out = {n: merged[n].to(first[n].dtype) for n in first}
    target = vectors[0].target if all(v.target == vectors[0].target for v in vectors) else None  # one pre-trained model
    return TaskVector(out, {"merge_method": method, "merge_params": dict(params), "merged": [v.metadata for v in vectors]}, target)
