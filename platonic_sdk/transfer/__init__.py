"""Transfer routes: the closed-form operator bank and (in lora.py) the LoRA route; both produce Edits."""

from .closed_form import GridState, OperatorBank
from .edit import Edit, OperatorEdit
from .lora import LoraEdit, LoraRouteConfig, fit_lora

__all__ = ["Edit", "GridState", "LoraEdit", "LoraRouteConfig", "OperatorBank", "OperatorEdit", "fit_lora"]
