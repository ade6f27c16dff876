"""The papers' figures beside a run: the sentences that say where a figure contradicts the paper's claim (a
similarity ratio below 1, an addition gain at or below zero, a negation that spares its task), and the closing
section with the reference figures of the paper of the run's modality: the image paper's tables, or, for
audio, the statement that the audio paper gives no figure (a run of unknown or mixed modality quotes neither).
"""

from __future__ import annotations

from typing import Any, Mapping

from .names import SLOT_NAMES

PAPER_ADDITION = """| method | task A | task B | CIFAR-100 | ImageNet |
|---|---|---|---|---|
| zero-shot | 60.98 | 60.98 | 75.82 | 72.33 |
| Random-UTD | 32.37 | 32.58 | 32.97 | 23.37 |
| single A | 80.56 | 59.86 | 75.04 | 71.01 |
| ours, closed form | 79.08 | 72.60 | 74.01 | 69.09 |
| oracle (own UTD) | 83.64 | 76.74 | 75.05 | 71.35 |"""
PAPER_IMAGE_MORE = ("Negation (240 cross-family cells, strength 1.0): removed task 60.98 -> 25.76; controls CIFAR-100 "
                    "75.82 -> 71.27, ImageNet 72.33 -> 65.67. Held-out remote sensing (two other tasks' operators summed): "
                    "70.41 -> 76.47 (closed form), 76.64 (LoRA route). Descriptor similarity: same task on other models 0.473, "
                    "same model on other tasks 0.227 (ratio 2.1). Failure cases: Cars and SUN397 (own gain ~2 points, transfer ~0).")
PAPER_AUDIO_SAYS = ("The audio paper describes its study (four audio-text models of different widths and depths, two tasks "
                    "composed, a third dataset held out) and states no figure: no accuracy, gain, control or similarity "
                    "number to compare this run with.")


# The paper's figures that a contradicting run is measured against (docs/method.md sec. 2 and 9).
PAPER_RATIO = 0.473 / 0.227
PAPER_GAINS = {"task_a": 79.08 - 60.98, "task_b": 72.60 - 60.98}
PAPER_REMOVED_DROP = 60.98 - 25.76


def contradictions(figures: Mapping[str, float], modality: str | None = None) -> dict[str, list[str]]:
    """Sentences for the figures that contradict the paper's claims, by report section: a similarity
    ratio below 1, an addition gain at or below zero, a negation that leaves its task as it was or better.
    The figure quoted beside each is the image paper's; on an audio run, whose paper states none, it says so."""
    out: dict[str, list[str]] = {}
    paper = "the image paper" if modality == "audio" else "the paper"
    no_figure = "; the audio paper states no figure" if modality == "audio" else ""
    say = lambda section, text: out.setdefault(section, []).append(f"**Contradicts the paper:** {text}")  # noqa: E731
    for key, grid in (("similarity_ratio", "raw"), ("similarity_ratio_centred", "centred")):
        ratio = figures.get(key)
        if ratio is not None and ratio < 1:
            say("similarity", f"the similarity ratio ({grid} descriptors) is {ratio:.2f}, below 1: one model's descriptors of different "
                              f"tasks are more alike than one task's descriptors on different models ({paper}'s ratio: {PAPER_RATIO:.1f}{no_figure}).")
    for slot, figure in PAPER_GAINS.items():
        gain = figures.get(f"addition_gain_{slot}")
        if gain is not None and gain <= 0:
            say("addition", f"the closed form's addition gain on {SLOT_NAMES[slot]} is {gain:+.2f} points, at or below zero: the transferred "
                            f"edit does not add the task ({paper}: {figure:+.1f}{no_figure}).")
    drop = figures.get("negation_removed_drop")
    if drop is not None and drop <= 0:
        say("negation", f"negation spares the task: the removed task's accuracy moves by {-drop:+.2f} points, no drop "
                        f"({paper}: {-PAPER_REMOVED_DROP:+.1f}{no_figure}).")
    return out


def modality(summary: Mapping[str, Any]) -> str | None:
    """The run's modality, "image" or "audio": as the run recorded it from its models, else its benchmark's,
    else its families' (None when unknown or mixed)."""
    if "modality" in summary:  # recorded from the run's models (summarise_run)
        return summary["modality"]
    config = summary.get("config", {})
    bench = str(config.get("describe", {}).get("benchmark", "")).split(":")[0]
    found: set[str] = set()
    try:
        if bench:
            from ...data.benchmark import benchmark

            found = {benchmark(bench).modality}
        else:
            from ...registry import family

            found = {family(f).modality for f in config.get("families", ())}
    except Exception:  # noqa: BLE001  (an unknown or uninstalled family: no modality, no paper to quote)
        return None
    return found.pop() if len(found) == 1 else None


def paper_reference(summary: Mapping[str, Any]) -> str | None:
    """The closing section: the reference figures of the paper of the run's modality (docs/method.md sec. 9);
    None when the modality is unknown or mixed (no paper's figures to set beside it)."""
    bench = str(summary.get("config", {}).get("describe", {}).get("benchmark", "")).split(":")[0]
    kind = modality(summary)
    image = ("## The image paper's reference figures (docs/method.md sec. 9)\n\n"
             + ("" if bench == "paper-image" else "This run is not the paper's study (other models, data and control sets): "
                "its figures are for orientation, not a like-for-like comparison.\n\n")
             + "ViT-L scale, real data; cross-family two-task addition, 3,360 cells at strength 0.5 (accuracy %):\n\n"
             + PAPER_ADDITION + "\n\n" + PAPER_IMAGE_MORE)
    audio = "## The audio paper's reference figures (docs/method.md sec. 9)\n\n" + PAPER_AUDIO_SAYS
    if kind == "audio":
        return audio + (" The figures quoted beside a contradiction above are the image paper's." if contradictions(summary.get("checks", {})) else "")
    return image if kind == "image" else None
