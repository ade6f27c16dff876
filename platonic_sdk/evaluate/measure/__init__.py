"""Measuring: a zoo's shared caches (`workspace`, `feature_cache`), the cell matrix and cell methods, frontiers, similarity, the studies."""
