"""Feature caches on disk: each (model, dataset, preprocessing, site) is encoded once, as safetensors.

An entry's key hashes four things, so that a change to any of them misses the entry:

- the model: every tensor of its state dict (names, dtypes, shapes, bytes), so an applied edit counts;
- the dataset: each item's stamp (a file's path, size and modification time; a dataset row's table
  fingerprint and index; an in-memory item's content, see `tasks.item_fingerprint`), in order;
- the preprocessing: the model's `preprocessing_signature` where it names a fixed function (a frozen trunk's
  settings), else the bytes of the batch that the model's own `preprocess` makes of the first two items
  (always as a batch of their own: a Prepared set and its plain items share the key, and a hit preprocesses
  two items, never a whole batch), plus the autocast setting and the device type;
- the site: its kind, layout and weight shape.

The batch size is not part of the key: forward passes of other batch sizes agree to float rounding.

Entries are written atomically (`io.save_tensors`). An unreadable entry, or one whose recorded key
differs from its name, is encoded again and overwritten, with a warning. `caching(dir)` makes a store
the default of every `features.site_features` call inside the block (the CLI's `--cache-dir`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import attrs
import torch
from torch import Tensor

from ..errors import CheckpointError, PlatonicError
from ..io import load_tensors, save_tensors
from ..items import Items
from ..protocol.encoder import DualEncoder
from ..tasks import item_fingerprint
from .accel import Prepared

KIND = "site_features"
ENV = "PLATONIC_CACHE_DIR"

__all__ = ["FeatureStore", "active_store", "caching", "default_cache_dir", "model_fingerprint"]


def default_cache_dir() -> Path:
    """$PLATONIC_CACHE_DIR, else $XDG_CACHE_HOME/platonic_sdk/features (~/.cache by default)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "platonic_sdk" / "features"


def _tensor_bytes(h: Any, name: str, tensor: Tensor) -> None:
    t = tensor.detach().reshape(-1).contiguous().cpu()
    h.update(f"{name}|{t.dtype}|{tuple(tensor.shape)}|".encode())
    h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def _batch_bytes(h: Any, batch: Any, name: str = "batch") -> None:
    """Hash every tensor of a (nested) model batch, in a fixed order."""
    if isinstance(batch, Tensor):
        _tensor_bytes(h, name, batch)
    elif isinstance(batch, Mapping):
        for key in sorted(batch):
            _batch_bytes(h, batch[key], f"{name}.{key}")
    elif isinstance(batch, (list, tuple)):
        for i, value in enumerate(batch):
            _batch_bytes(h, value, f"{name}[{i}]")
    else:
        h.update(f"{name}={batch!r}".encode())


def model_fingerprint(encoder: DualEncoder) -> str:
    """blake2b of every tensor of the model's state dict (an edit folded into it changes this)."""
    h = hashlib.blake2b(digest_size=16)
    for name, tensor in encoder.model.state_dict().items():
        _tensor_bytes(h, name, tensor)
    return h.hexdigest()


def _stamp(item: Any) -> str:
    own = getattr(item, "stamp", None)
    if callable(own):
        return str(own())
    return item_fingerprint(item)


def items_fingerprint(items: Sequence[Any]) -> str:
    """blake2b over the stamps of `items` (references are stamped, never decoded), in order."""
    h = hashlib.blake2b(digest_size=16)
    items = items.source if isinstance(items, Prepared) else items
    for item in items.refs if isinstance(items, Items) else items:
        h.update(_stamp(item).encode())
        h.update(b"\0")
    return h.hexdigest()


def preprocessing_fingerprint(encoder: DualEncoder, items: Sequence[Any], amp: bool) -> str:
    """blake2b of the encoder's `preprocessing_signature`, or where it has none of the batch the model's `preprocess`
    makes of the first two items (a batch of their own, whatever the set: a plain and an `accel.Prepared` set of the
    same items get one key, and a hit costs two items' preprocessing, not a whole batch's), with the autocast flag
    and device type."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{type(encoder).__qualname__}|amp={amp}|{encoder.device.type}|{encoder.dtype}|".encode())
    signature = encoder.preprocessing_signature
    if signature is not None:
        h.update(f"signature|{signature}".encode())
    else:
        _batch_bytes(h, encoder.preprocess([items[i] for i in range(min(2, len(items)))]))
    return h.hexdigest()


def site_signature(encoder: DualEncoder) -> str:
    site = encoder.last_affine()
    return f"{site.kind}|{site.layout}|{tuple(site.weight.shape)}|{site.bias is not None}"


@attrs.frozen
class FeatureStore:
    """A folder of site-feature entries: root/<key[:2]>/<key>.safetensors, holding S, Z and their key parts."""

    root: Path = attrs.field(converter=lambda p: Path(p).expanduser())

    def parts(self, encoder: DualEncoder, items: Sequence[Any], amp: bool = False) -> dict[str, str]:
        """What the entry of (encoder, items) depends on."""
        return {
            "model": model_fingerprint(encoder),
            "dataset": items_fingerprint(items),
            "preprocessing": preprocessing_fingerprint(encoder, items, amp),
            "site": site_signature(encoder),
            "count": str(len(items)),
        }

    @staticmethod
    def key(parts: Mapping[str, str]) -> str:
        return hashlib.blake2b(repr(sorted(parts.items())).encode(), digest_size=20).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.safetensors"

    def holds(self, encoder: DualEncoder, items: Sequence[Any], amp: bool = False) -> bool:
        """Whether an entry of (encoder, items) is on disk (unread: `get` checks it)."""
        return self.path(self.key(self.parts(encoder, items, amp))).is_file()

    def get(self, parts: Mapping[str, str]) -> tuple[Tensor, Tensor] | None:
        """(S, Z) of the entry with these parts; None when absent, or (with a warning) unreadable or foreign."""
        path = self.path(self.key(parts))
        if not path.is_file():
            return None
        try:
            tensors, meta, _ = load_tensors(path, KIND, real=True)
            if meta.get("parts") != dict(parts):
                raise CheckpointError(f"it records the key parts {meta.get('parts')}, not {dict(parts)}")
            S, Z = tensors["S"], tensors["Z"]
            if S.shape[0] != Z.shape[0] or S.shape[0] != int(parts["count"]):
                raise CheckpointError(f"it holds {S.shape[0]} rows for {parts['count']} items")
            if not (S.isfinite().all() and Z.isfinite().all()):
                raise CheckpointError("it holds NaN/inf values")
        except (CheckpointError, KeyError) as exc:
            warnings.warn(f"feature cache entry {path} is unusable ({exc}); encoding again", stacklevel=3)
            return None
        return S, Z

    def put(self, parts: Mapping[str, str], S: Tensor, Z: Tensor, meta: Mapping[str, Any] | None = None) -> Path:
        """Write the entry (atomically: a reader sees the old entry, none, or the whole new one), `meta` beside its parts."""
        path = self.path(self.key(parts))
        save_tensors(path, {"S": S, "Z": Z}, KIND, {"parts": dict(parts), **(meta or {})})
        return path

    def features(
        self, encoder: DualEncoder, items: Sequence[Any], encode: Callable[[], tuple[Tensor, Tensor]], amp: bool = False,
        agree: Callable[[bool], bool] = bool, write: bool = True,
    ) -> tuple[Tensor, Tensor]:
        """The cached (S, Z) of `items` on `encoder`, else `encode()`'s, stored for next time (when `write`).

        `agree(found)` decides whether the entry counts as found (ranks that encode together use it only when all have it).
        """
        parts = self.parts(encoder, items, amp)
        hit = self.get(parts)
        if agree(hit is not None):
            return hit
        S, Z = encode()
        try:
            if write:
                self.put(parts, S, Z, {"family": encoder.family, "checkpoint": encoder.checkpoint})
        except OSError as exc:
            warnings.warn(f"cannot write the feature cache under {self.root} ({exc}); continuing without it", stacklevel=3)
        return S, Z


_ACTIVE: list[FeatureStore] = []


def active_store() -> FeatureStore | None:
    """The store of the innermost `caching` block, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def caching(root: str | os.PathLike | FeatureStore | None = None) -> Iterator[FeatureStore]:
    """Within the block, `site_features` reads and writes the store at `root` (default: `default_cache_dir()`)."""
    store = root if isinstance(root, FeatureStore) else FeatureStore(root or default_cache_dir())
    if store.root.exists() and not store.root.is_dir():
        raise PlatonicError(f"cache folder {str(store.root)!r} is a file")
    _ACTIVE.append(store)
    try:
        yield store
    finally:
        _ACTIVE.remove(store)
