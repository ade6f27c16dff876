"""The descriptor spaces by name (docs/method.md sec. 15; the math is `linalg.space_descriptor`).

A light module (no torch): the command line and the experiment spec check space names against it.
"""

from __future__ import annotations

from .errors import PlatonicError

# affinity: the paper's UTD, <f_ft, g> - <f_pre, g>;
# probability: softmax(s <f_ft, g>) - softmax(s <f_pre, g>) over the grid's classes, s the logit scale;
# pseudo_label: one-hot of the fine-tuned model's predicted class minus 1/M;
# confidence: the pseudo-label row times the fine-tuned model's top probability;
# blend: the row-centred affinity UTD and the confidence descriptor at equal norms, summed.
# The last four are scaled to the affinity UTD's Frobenius norm on the same grid.
SPACES = ("affinity", "probability", "pseudo_label", "confidence", "blend")
DEFAULT_SPACE = "blend"  # chosen on the worlds' task figures, docs/method.md sec. 15 (the paper's: affinity)
SCALED_SPACES = ("probability", "confidence", "blend")  # the spaces that read the model's logit scale


def check_space(value: object) -> str:
    """`value` if it names a descriptor space, else PlatonicError listing them."""
    if value not in SPACES:
        raise PlatonicError(f"unknown descriptor space {value!r}; the spaces are {', '.join(SPACES)}")
    return str(value)
