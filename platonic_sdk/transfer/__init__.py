"""Transfer routes: the closed-form operator bank (its saved form: `SavedBank`) and (in lora.py) the LoRA
route; both produce Edits."""

from ..edits.edit import Edit, OperatorEdit
from .closed_form import GridState, OperatorBank
from .saved_bank import SavedBank

_LORA_NAMES = ("LoraEdit", "LoraRouteConfig", "fit_lora")  # lora.py imports peft (seconds): load on first use


def __getattr__(name: str):
    if name in _LORA_NAMES:
        from . import lora

        return getattr(lora, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Edit", "GridState", "LoraEdit", "LoraRouteConfig", "OperatorBank", "OperatorEdit", "SavedBank", "fit_lora"]
