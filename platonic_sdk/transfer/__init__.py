"""Transfer routes: the closed-form operator bank (its saved form: `SavedBank`) and the LoRA route (lora.py,
which imports peft); both produce Edits (also exported here)."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {
    "..edits.edit": ["Edit", "OperatorEdit"],
    "..edits.lora_edit": ["LoraEdit"],
    ".closed_form": ["GridState", "OperatorBank"],
    ".saved_bank": ["SavedBank"],
    ".lora": ["LoraRouteConfig", "fit_lora", "lora_recipe"],
})
