"""platonic_sdk: move task edits between dual encoders of different families and widths."""

from .errors import (
    CheckpointError,
    GridMismatchError,
    NonFiniteError,
    NotAffineError,
    PlatonicError,
    ShapeError,
    UnknownFamilyError,
)
from .descriptor import UTD, Composition, Term
from .edits import Edit, OperatorEdit
from .protocol import AffineSite, DualEncoder
from .registry import FamilySpec, family, from_config, list_families, load, register_family
from .tasks import Grid, Split, Task
from .transfer import OperatorBank

from .version import __version__

__all__ = [
    "UTD",
    "Composition",
    "Term",
    "Edit",
    "OperatorBank",
    "OperatorEdit",
    "AffineSite",
    "CheckpointError",
    "DualEncoder",
    "FamilySpec",
    "Grid",
    "GridMismatchError",
    "NonFiniteError",
    "NotAffineError",
    "PlatonicError",
    "ShapeError",
    "Split",
    "Task",
    "UnknownFamilyError",
    "family",
    "from_config",
    "list_families",
    "load",
    "register_family",
    "__version__",
]
