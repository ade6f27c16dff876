"""Evaluation: zero-shot accuracy, cached features, the studies built on them, and experiments (`Experiment`)."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {"..zeroshot": ["accuracy", "accuracy_of", "predict"], ".features": ["FeatureCache"],
                                                   ".plan": ["Experiment", "dry_run"]})
