"""How far a fine-tune moved its model on a task: test accuracy before and after, and the size of its
descriptor. A near-null fine-tune (a recipe too weak for the model) gives a near-null descriptor, and
every transfer built on it does nothing; a fine-tune that lowered the accuracy gives a descriptor of that
loss. `Movement.warning` says which, if either.
"""

from __future__ import annotations

import attrs

from ...descriptor import UTD
from ...edits.edit import Edit
from ...encoding.zeroshot import accuracy
from ...protocol.encoder import DualEncoder
from ...tasks import Task

MIN_GAIN = 1.0  # accuracy points
MIN_RMS = 0.02  # RMS descriptor entry: mean cosine change per (probe, class); a working zoo fine-tune gives ~0.2


@attrs.frozen
class Movement:
    """Test accuracy (percent) before and after a fine-tune, and its descriptor's norm and RMS entry."""

    task: str
    before: float
    after: float
    descriptor_norm: float | None = None
    descriptor_rms: float | None = None

    def shortfalls(self) -> list[str]:
        """What is too small: the accuracy change (within +-MIN_GAIN points) and/or the RMS descriptor entry (< MIN_RMS)."""
        out = []
        if abs(self.after - self.before) < MIN_GAIN:
            out.append(f"accuracy {self.after - self.before:+.1f} points, under {MIN_GAIN:g} either way")
        if self.descriptor_rms is not None and self.descriptor_rms < MIN_RMS:
            out.append(f"RMS descriptor entry {self.descriptor_rms:.3g}, under {MIN_RMS:g}")
        return out

    @property
    def barely_moved(self) -> bool:
        return not self.made_worse and bool(self.shortfalls())

    @property
    def made_worse(self) -> bool:
        """The fine-tune lowered the test accuracy by MIN_GAIN points or more."""
        return self.before - self.after >= MIN_GAIN

    def summary(self) -> str:
        text = f"source accuracy on {self.task!r} (test): {self.before:.1f} -> {self.after:.1f}"
        if self.descriptor_norm is not None:
            text += f"; descriptor norm {self.descriptor_norm:.4g} (RMS entry {self.descriptor_rms:.3g})"
        return text

    def warning(self, remedy: str = "fine-tune with a higher lr or more epochs, or a lower logit_scale",
                worse_remedy: str = "check that it was fine-tuned on this task's data, or fine-tune with a lower lr or fewer epochs",
                ) -> str | None:
        """A one-line warning when the fine-tune made the model worse (ending with `worse_remedy`) or barely moved it
        (ending with `remedy`); None otherwise."""
        if self.made_worse:
            return (f"the fine-tune made the model worse on {self.task!r}: test accuracy {self.before:.1f} -> {self.after:.1f} "
                    f"({self.after - self.before:+.1f} points), and a descriptor of it carries that loss to a target; {worse_remedy}")
        if not self.barely_moved:
            return None
        return (f"the fine-tune barely moved the model ({'; '.join(self.shortfalls())}): a descriptor of it transfers "
                f"next to nothing; {remedy}")


def movement(pre: DualEncoder, ft: DualEncoder | Edit, task: Task, utd: UTD | None = None, batch_size: int = 64) -> Movement:
    """Accuracy on task.test of `pre` and of the fine-tune (an encoder, or an edit of `pre` such as a
    peft adapter's, applied meanwhile), and (given) the descriptor's ||UTD||_F and ||UTD||_F / sqrt(N C)."""
    norm = rms = None
    if utd is not None:
        norm = float(utd.matrix.norm())
        rms = norm / utd.matrix.numel() ** 0.5
    before = accuracy(pre, task, batch_size=batch_size)
    if isinstance(ft, Edit):
        with ft.applied_to(pre):
            after = accuracy(pre, task, batch_size=batch_size)
    else:
        after = accuracy(ft, task, batch_size=batch_size)
    return Movement(task.name, before, after, norm, rms)
