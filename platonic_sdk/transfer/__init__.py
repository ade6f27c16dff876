"""Transfer routes: the closed-form operator bank and (in lora.py) the LoRA route; both produce Edits."""

from .closed_form import GridState, OperatorBank
from .edit import Edit, OperatorEdit

__all__ = ["Edit", "GridState", "OperatorBank", "OperatorEdit"]
