"""Edits: deployable, reversible changes to one target encoder (`Edit`, `OperatorEdit`; `LoraEdit` in
lora_edit.py, which imports peft). The transfer routes produce them; descriptors measure them."""

from .edit import Edit, OperatorEdit

__all__ = ["Edit", "OperatorEdit"]
