"""The closed form's ridge factors: the paper's defaults, relative to mean sigma(F)^2 and mean sigma(G)^2
(docs/method.md, "Closed form"). Every library default reads these; the synthetic worlds declare their own
(worlds/registry.py)."""

RIDGE_A = 1e-2
RIDGE_B = 1e-6
