"""The model an edit was made for: family, checkpoint, width, site shapes and a fingerprint of its base weights.

The fingerprint covers the *base* weights at the edit's sites (the values before any applied edit, see
`stack.base_values`), so an edit made on a model that already carries other edits still binds to that
model, and applies to it with or without those other edits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import attrs
from torch import Tensor

from ..errors import CheckpointError, ShapeError, TargetMismatchError
from .stack import base_values, fingerprint


def portable_checkpoint(checkpoint: str | None) -> str | None:
    """A checkpoint as files record it: a hub id as it is, a local folder or file by its name alone (an absolute path
    would tie the file to one machine's layout; the edit binds to the weights' fingerprint, not to the path)."""
    if checkpoint is None or not Path(checkpoint).expanduser().exists():
        return checkpoint
    return Path(checkpoint).expanduser().resolve().name


@attrs.frozen
class Target:
    """Who an edit is for; `check` refuses any other model unless told to allow it."""

    shapes: dict[str, tuple[int, ...]] = attrs.field(converter=lambda s: {str(k): tuple(int(d) for d in v) for k, v in s.items()})
    fingerprint: str
    family: str | None = None
    checkpoint: str | None = None
    embed_dim: int | None = None

    @classmethod
    def of(cls, sites: Mapping[str, Tensor], family: str | None = None, checkpoint: str | None = None, embed_dim: int | None = None) -> "Target":
        """The target whose live tensors are `sites` (fingerprinted at their base values)."""
        return cls({n: tuple(t.shape) for n, t in sites.items()}, fingerprint(base_values(sites)), family, checkpoint, embed_dim)

    @classmethod
    def of_encoder(cls, encoder: Any, sites: Mapping[str, Tensor]) -> "Target":
        """`of` for a DualEncoder's tensors, recording its family, checkpoint (portable_checkpoint) and width."""
        return cls.of(sites, encoder.family, portable_checkpoint(encoder.checkpoint), encoder.embed_dim)

    def describe(self) -> dict[str, Any]:
        """JSON-ready record (what edit files store)."""
        return {**attrs.asdict(self), "shapes": {n: list(s) for n, s in self.shapes.items()}}

    @classmethod
    def from_record(cls, record: Any) -> "Target | None":
        """Rebuild from `describe()`; None for files written before edits recorded their target."""
        if record is None:
            return None
        try:
            return cls(**record)
        except (TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"corrupt target record {record!r} ({exc})") from None

    def __str__(self) -> str:
        family = self.family or "a model"
        where = f" {self.checkpoint!r}" if self.checkpoint else ""
        width = f", d={self.embed_dim}" if self.embed_dim is not None else ""
        return f"{family}{where} (weights {self.fingerprint[:12]}{width})"

    def check(self, live: "Target", what: str, allow_other: bool = False) -> None:
        """Raise unless `live` (the model about to be edited) is this target.

        Other shapes never fit (ShapeError); another family or other base weights raise TargetMismatchError
        naming both models, unless `allow_other` (deliberate reuse, e.g. another checkpoint of one family).
        """
        if live.shapes != self.shapes:
            differ = sorted(n for n in set(self.shapes) | set(live.shapes) if self.shapes.get(n) != live.shapes.get(n))
            raise ShapeError(
                f"{what} was made for {self}, whose sites differ in shape from this model's {live} at {differ[:3]}"
            )
        same_family = None in (self.family, live.family) or self.family == live.family
        if allow_other or (same_family and live.fingerprint == self.fingerprint):
            return
        raise TargetMismatchError(
            f"{what} was made for {self}, not for this model, {live}; "
            "pass allow_other_target=True (CLI: --allow-other-target) to apply it anyway"
        )
