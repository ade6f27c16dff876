"""Evaluation: zero-shot accuracy, cached features, and the studies built on them."""

from ..zeroshot import accuracy, accuracy_of, predict
from .features import FeatureCache

__all__ = ["FeatureCache", "accuracy", "accuracy_of", "predict"]
