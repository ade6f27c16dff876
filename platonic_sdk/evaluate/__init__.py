"""Evaluation: zero-shot accuracy, cached features, and the studies built on them."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {"..zeroshot": ["accuracy", "accuracy_of", "predict"], ".features": ["FeatureCache"]})
