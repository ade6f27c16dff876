"""A saved operator bank: the operators A(U) of named descriptors for one target, in one safetensors
file (kind `operator_bank`), so that edits sum_l c_l A(U_l) are built later without the model.

`OperatorBank.save` writes one and `OperatorBank.load` reads it back: tensors are the operators by
label; the JSON metadata holds the target's family, checkpoint, site kind and binding, the ridge
factors and, per label, the descriptor's task, grid identity and provenance.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import attrs
from torch import Tensor

from ..edits.edit import OperatorEdit
from ..errors import CheckpointError, PlatonicError, SpaceMismatchError, check_finite
from ..io import load_tensors, require, save_tensors
from ..protocol.binding import Target

KIND = "operator_bank"
_META = ("target_family", "target_checkpoint", "site_kind", "ridge_a", "ridge_b", "entries")


@attrs.frozen(eq=False)
class SavedBank:
    """Operators by label (d x q each) with what made them; `edit` folds a signed sum of them."""

    operators: Mapping[str, Tensor]
    entries: Mapping[str, Mapping[str, Any]]  # label -> task, grid_id, provenance of its descriptor
    site_kind: str
    ridge_a: float
    ridge_b: float
    target_family: str
    target_checkpoint: str | None
    target: Target | None = None  # None in files written before edits recorded their target
    ridge_why: str | None = None  # which ridge rule chose the factors (ridge.ridge_rule); None in older files

    def metadata(self) -> dict[str, Any]:
        return {"target_family": self.target_family, "target_checkpoint": self.target_checkpoint, "site_kind": self.site_kind,
                "ridge_a": self.ridge_a, "ridge_b": self.ridge_b, "entries": {k: dict(v) for k, v in self.entries.items()},
                "target": self.target.describe() if self.target is not None else None, "ridge_why": self.ridge_why}

    def save(self, path: str | os.PathLike) -> None:
        save_tensors(path, dict(self.operators), KIND, self.metadata())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "SavedBank":
        """Read a bank file; a corrupt file, another kind of file, missing fields, NaN/inf or mismatched
        operators raise (CheckpointError, NonFiniteError)."""
        operators, meta, _ = load_tensors(path, KIND, real=True)
        missing = [k for k in _META if k not in meta]
        if missing or not isinstance(meta["entries"], dict):
            raise CheckpointError(f"{path} is an incomplete operator bank (no {', '.join(missing) or 'entries table'})")
        if not operators or set(operators) != set(meta["entries"]):
            raise CheckpointError(f"{path}: the operators ({', '.join(operators) or 'none'}) and the entries "
                                  f"({', '.join(meta['entries']) or 'none'}) of the bank differ")
        require(path, "operator bank", operators, meta, (), {"ridge_a": (int, float), "ridge_b": (int, float), "target_family": str,
                                                             "site_kind": str})
        bad = [label for label, entry in meta["entries"].items() if not isinstance(entry, dict)]
        if bad:
            raise CheckpointError(f"{path} is a malformed operator bank: the entries {bad} are not JSON objects")
        shapes = {tuple(A.shape) for A in operators.values()}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise CheckpointError(f"{path}: a bank's operators are matrices of one shape, got {sorted(shapes)}")
        for label, A in operators.items():
            check_finite(A, f"{path}: operator {label!r}")
        return cls(operators, meta["entries"], meta["site_kind"], meta["ridge_a"], meta["ridge_b"], meta["target_family"],
                   meta["target_checkpoint"], Target.from_record(meta.get("target")), meta.get("ridge_why"))

    def edit(self, terms: Sequence[tuple[str, float]], strength: float = 0.5, *, keep: Sequence[Any] | None = None) -> OperatorEdit:
        """The edit folding sum_l c_l A_l at `strength`, for (label, c_l) terms. A strength rule ("auto") and keep sets
        read the target's probes and items, which a bank file does not hold: they are refused (OperatorBank.edit takes
        them), so the default stays the fixed 0.5."""
        if keep is not None:
            raise PlatonicError("keep= is read on the target model, which a saved bank does not hold; build the edit with "
                                "OperatorBank(target).edit(descriptor, keep=...)")
        if isinstance(strength, str):
            raise PlatonicError(f"strength {strength!r} chooses the strength from the target's probes and keep sets, which a saved bank "
                                "does not hold (it holds operators); give a number (e.g. 0.5), or build the edit with "
                                "OperatorBank(target).edit(descriptor, strength=...)")
        missing = [n for n, _ in terms if n not in self.operators]
        if missing or not terms:
            raise PlatonicError(f"the bank has no operator(s) {missing or '(no terms given)'}; it holds {', '.join(self.operators)}")
        spaces = list(dict.fromkeys(self.entries[n].get("space", "affinity") for n, _ in terms))
        if len(spaces) > 1:
            raise SpaceMismatchError(f"cannot compose operators of descriptors of different spaces ({', '.join(spaces)})")
        A = sum(c * self.operators[n] for n, c in terms)
        info = {"target_family": self.target_family, "target_checkpoint": self.target_checkpoint, "ridge_a": self.ridge_a,
                "ridge_b": self.ridge_b, "ridge_why": self.ridge_why, "space": spaces[0],
                "terms": [{"label": n, "coef": c, **self.entries[n]} for n, c in terms]}
        return OperatorEdit(A, strength, self.site_kind, info, self.target)
