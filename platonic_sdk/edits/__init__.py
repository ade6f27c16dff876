"""Edits: deployable, reversible changes to one target encoder (`Edit`, `OperatorEdit`; `LoraEdit` in
lora_edit.py, which imports peft). The transfer routes produce them; descriptors measure them."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {".edit": ["Edit", "OperatorEdit"], ".lora_edit": ["LoraEdit"]})
