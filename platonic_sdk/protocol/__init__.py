"""The one interface every model family implements (`encoder`: `DualEncoder`, `AffineSite`), the edit stacks of a
model's weights (`stack`) and what an edit is bound to (`binding`: `Target`)."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {".encoder": ["AffineSite", "DualEncoder"], ".binding": ["Target"]})
