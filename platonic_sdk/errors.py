"""The SDK's error types: each names the problem, and raising one never leaves a model half-edited."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


class PlatonicError(Exception):
    """Base class of every error the SDK raises on bad input."""


class ShapeError(PlatonicError, ValueError):
    """A tensor's shape does not match what the operation needs (grid size, width, ...)."""


class GridMismatchError(PlatonicError, ValueError):
    """Descriptors or features from different grids were combined."""


class SpaceMismatchError(PlatonicError, ValueError):
    """Descriptors of different spaces (affinity, probability, ...) were combined or compared."""


class NonFiniteError(PlatonicError, ValueError):
    """NaN or inf where finite numbers are required."""


class WrongTypeError(PlatonicError, TypeError):
    """A bool or string where a real number belongs, or a complex, bool or integer tensor where real floats belong."""


class UnknownFamilyError(PlatonicError, KeyError):
    """A family name that the registry does not know."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0]) if self.args else ""


class LayoutError(PlatonicError):
    """A dataset folder that is missing or not in the layout its reader expects (the message names that layout)."""


class CheckpointError(PlatonicError, ValueError):
    """A checkpoint that does not exist, is corrupt, or belongs to another family."""


class NotAffineError(PlatonicError, TypeError):
    """The module at a model's last-affine site is not an affine map the method can fold into."""


def check_finite(x: torch.Tensor, what: str) -> None:
    """Raise NonFiniteError when x holds NaN or inf."""
    import torch

    if not torch.isfinite(x).all():
        bad = int((~torch.isfinite(x)).sum())
        raise NonFiniteError(f"{what} contains {bad} NaN/inf value(s)")


def check_strength(value: float, what: str = "strength") -> float:
    """Return `value` as a float, or raise when it is not a finite real number (bools and strings are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WrongTypeError(f"{what} must be a finite real number, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number):
        raise NonFiniteError(f"{what} must be a finite number, got {value!r}")
    return number


class TargetMismatchError(PlatonicError, ValueError):
    """An edit applied to a model other than the one it was made for."""


def check_real(x: torch.Tensor, what: str) -> None:
    """Raise WrongTypeError unless x is a tensor of real floating-point numbers (not complex, bool or integer)."""
    import torch

    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        dtype = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise WrongTypeError(f"{what} must hold real floating-point numbers, got {dtype}")
