"""Evaluation: zero-shot accuracy, cached features, and the studies built on them."""

from .features import FeatureCache
from .zeroshot import accuracy, accuracy_of, predict

__all__ = ["FeatureCache", "accuracy", "accuracy_of", "predict"]
