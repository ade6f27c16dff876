"""Descriptor spaces as plug-ins (docs/method.md sec. 15): what a P x M descriptor of a change f_pre -> f_ft
measures on a grid with class landmarks g.

A space is a `DescriptorSpace`: its name, whether it reads the model's logit scale, and the function that
computes the descriptor, scale convention included. `register_space` adds one; `space(name)` finds it.
The built-in spaces, one module each, load on first lookup; this module itself is light (no torch), so
the command line and the experiment spec check space names against it:

    affinity      <f_ft, g> - <f_pre, g>, the paper's UTD (spaces/affinity.py)
    probability   softmax(s <f_ft, g>) - softmax(s <f_pre, g>) over the grid's classes, s the logit scale
    pseudo_label  one-hot of the fine-tuned model's predicted class minus 1/M
    confidence    the pseudo-label row times the fine-tuned model's top probability
    blend         the row-centred affinity UTD and the confidence descriptor at equal norms, summed

The last four are scaled to the affinity UTD's Frobenius norm on the same grid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import attrs

from ..errors import PlatonicError
from ..named_registry import NamedRegistry

if TYPE_CHECKING:
    from torch import Tensor

# fn(f_pre, f_ft, g, logit_scale) -> the P x M descriptor (logit_scale None where the space reads none)
DescriptorFn = Callable[["Tensor", "Tensor", "Tensor", "float | None"], "Tensor"]

SPACES = ("affinity", "probability", "pseudo_label", "confidence", "blend")  # the built-in spaces, one module each
DEFAULT_SPACE = "blend"  # with the default strength rule, chosen by the protocol of docs/method.md sec. 15.1, round 3 (0.2.0: affinity)


@attrs.frozen
class DescriptorSpace:
    """A descriptor space: `compute(f_pre, f_ft, g, logit_scale)` gives the P x M descriptor of the change
    f_pre -> f_ft (unit-norm or raw probe rows, P x d) on landmarks g (M x d), in f_pre's dtype and scaled
    by the space's own convention; `needs_logit_scale`: it reads the model's s (UTD.compute then takes
    `DualEncoder.logit_scale`, and the descriptor's provenance records it)."""

    name: str
    compute: DescriptorFn
    needs_logit_scale: bool = False

    def descriptor(self, f_pre: "Tensor", f_ft: "Tensor", g: "Tensor", logit_scale: float | None = None) -> "Tensor":
        """The space's descriptor; ValueError when it reads the logit scale and none is given."""
        if self.needs_logit_scale and logit_scale is None:
            raise ValueError(f"the {self.name} space needs the model's logit scale")
        return self.compute(f_pre, f_ft, g, logit_scale)


_REGISTRY: NamedRegistry[DescriptorSpace] = NamedRegistry(
    "descriptor space", listing="the spaces are", lazy={name: f"{__name__}.{name}" for name in SPACES})


def register_space(space: DescriptorSpace, *, replace: bool = False) -> DescriptorSpace:
    """Register `space` under its name (a taken name is refused unless `replace`); returns it."""
    if not isinstance(space, DescriptorSpace):
        raise TypeError(f"register_space takes a DescriptorSpace, got {type(space).__name__}")
    return _REGISTRY.register(space.name, space, replace=replace)


def space_names() -> list[str]:
    """The names of the built-in spaces, then the registered ones."""
    return _REGISTRY.names()


def check_space(value: object) -> str:
    """`value` if it names a descriptor space (nothing loaded), else PlatonicError naming the nearest and listing them."""
    if not isinstance(value, str):
        raise PlatonicError(f"a descriptor space is named by a string, got {value!r}; the spaces are {', '.join(space_names())}")
    return _REGISTRY.check(value)


def space(name: str) -> DescriptorSpace:
    """The space `name` (a built-in one loads on first use), or check_space's error."""
    return _REGISTRY.lookup(check_space(name))


def space_descriptor(name: str, f_pre: "Tensor", f_ft: "Tensor", g: "Tensor", logit_scale: float | None = None) -> "Tensor":
    """The P x M descriptor of the change f_pre -> f_ft in space `name` (DescriptorSpace.descriptor)."""
    return space(name).descriptor(f_pre, f_ft, g, logit_scale)
