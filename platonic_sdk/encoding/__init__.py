"""Batched, gradient-free encoding: site features and landmarks (`features`, `accel`), the on-disk feature cache
(`feature_store`), scale-out over torchrun's ranks (`distributed`) and zero-shot accuracy (`zeroshot`)."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {
    ".features": ["encode_items", "landmarks", "site_features"],
    ".zeroshot": ["accuracy", "accuracy_of", "predict"],
})
