"""Edits: deployable, reversible changes to one target encoder (`Edit`, `OperatorEdit`; `LoraEdit` in
lora_edit.py, which imports peft). The transfer routes produce them; descriptors measure them."""

import sys

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {".edit": ["Edit", "OperatorEdit"], ".lora_edit": ["LoraEdit"]})

# each built-in edit file kind and the module of its class, imported when a file of that kind loads (lora_edit's imports peft)
KINDS = {"operator_edit": f"{__name__}.edit", "lora_edit": f"{__name__}.lora_edit"}


def edit_kinds() -> list[str]:
    """The kinds of edit file, known without importing torch: the built-in ones and those of Edit subclasses defined so far."""
    edit = sys.modules.get(f"{__name__}.edit")
    return sorted({*KINDS, *(edit.Edit._kinds if edit is not None else ())})
