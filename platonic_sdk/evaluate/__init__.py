"""Evaluation, by job: what to run (`spec`: settings, presets, cell-method names), measuring it (`measure`: the
workspace's caches, cells, cell methods, frontiers, studies), reporting it (`report`: report.json, report.md,
figures) and running it (`run`: `Experiment`, the runner, run folders, workers, ranks)."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {
    "..encoding.zeroshot": ["accuracy", "accuracy_of", "predict"],
    ".measure.feature_cache": ["FeatureCache"],
    ".run.experiment": ["Experiment", "dry_run"],
})
