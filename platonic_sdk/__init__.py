"""platonic_sdk: move task edits between dual encoders of different families and widths.

The public names load on first use: `import platonic_sdk` imports no model library (nor torch), and
`platonic_sdk.UTD` imports what descriptors need."""

from typing import TYPE_CHECKING

from .lazy import exports
from .version import __version__

__getattr__, __dir__, __all__ = exports(__name__, {
    ".errors": ["CheckpointError", "GridMismatchError", "NonFiniteError", "NotAffineError", "PlatonicError", "ShapeError",
                "UnknownFamilyError"],
    ".data.keep": ["KeepSet"],
    ".descriptor": ["UTD", "Composition", "Term"],
    ".edits": ["Edit", "OperatorEdit"],
    ".protocol": ["AffineSite", "DualEncoder"],
    ".registry": ["FamilySpec", "family", "from_config", "list_families", "load", "register_family"],
    ".tasks": ["Grid", "Split", "Task"],
    ".transfer": ["OperatorBank"],
})
__all__ += ["__version__"]

if TYPE_CHECKING:  # what type checkers and IDEs see
    from .data.keep import KeepSet
    from .descriptor import UTD, Composition, Term
    from .edits import Edit, OperatorEdit
    from .errors import (
        CheckpointError,
        GridMismatchError,
        NonFiniteError,
        NotAffineError,
        PlatonicError,
        ShapeError,
        UnknownFamilyError,
    )
    from .protocol.encoder import AffineSite, DualEncoder
    from .registry import FamilySpec, family, from_config, list_families, load, register_family
    from .tasks import Grid, Split, Task
    from .transfer import OperatorBank
