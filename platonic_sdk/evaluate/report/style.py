"""One colour per method in every figure of every report: a method keeps its colour whatever the run's
settings, so the closed form takes its descriptor space's colour (the run's closed form in blend is the
colour of closed_form_blend in a run whose closed form is affinity). A method without a colour of its own (a
plug-in) gets one from its name, the same in every run."""

from __future__ import annotations

import zlib

# tab10 / tab20 colours by method
METHOD_COLOURS = {
    "zero_shot": "#7f7f7f",               # grey
    "closed_form_affinity": "#1f77b4",    # blue: the paper's descriptor
    "closed_form_blend": "#ff7f0e",       # orange: the default
    "closed_form_probability": "#17becf",
    "closed_form_pseudo_label": "#bcbd22",
    "closed_form_confidence": "#e377c2",
    "oracle": "#2ca02c",                  # green
    "label_reference": "#8c564b",         # brown
    "random_utd": "#000000",
    "single_a": "#9467bd",                # purple (the single terms: one colour)
    "single_b": "#9467bd",
    "lora": "#d62728",                    # red
    "alignment": "#aec7e8",
    "alignment_lstsq": "#c5b0d5",
    "weight_space": "#98df8a",
    "finetuned": "#ff9896",               # the sources' own fine-tunes (per-task bars): no method
}
SPARE = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363")


def colour(method: str, space: str | None = None) -> str:
    """`method`'s colour; the closed form's is its descriptor space's (`space`, the run's), closed_form_<space>."""
    key = f"closed_form_{space}" if method == "closed_form" and space else method
    return METHOD_COLOURS.get(key) or SPARE[zlib.crc32(key.encode()) % len(SPARE)]
