"""The markdown of a run's cell results: per kind and group a table of methods (the paper's layout, each control set's
accuracy, then the worst other transfer task's drop, with each method's share of the labelled reference), capped
methods against the closed form on their own cells, the descriptor similarity, the per-task table and the headline
figures, each unit in a column of its own.

Every heading says which strengths its numbers were folded at: the fixed ones, or, under a strength rule, the
rule's per cell for the methods that follow it (names.follows_rule: the mean and range of the strengths it chose) and
the fixed ones for the others.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .names import SLOT_NAMES, SLOTS, follows_rule, group_key, method_label, rule_name, strength_str
from .paper import contradictions, modality
from .summaries import reference_share, set_drops, worst
from .text import finite, percent, plural, table


def figure_link(summary: Mapping[str, Any], name: str) -> str:
    """The figure `name` of the run, as a markdown image after a blank line ("" when the run drew none)."""
    path = summary.get("figures", {}).get(name)
    return f"\n\n![{name}]({path})" if path else ""


def said(summary: Mapping[str, Any], section: str) -> str:
    """The contradiction sentences of a section, then (cell sections) what share of the labelled reference the closed form reached."""
    figures = summary.get("checks", {})
    lines = contradictions(figures, modality(summary)).get(section, [])
    reached = figures.get(f"{section}_share_of_label_reference")
    if finite(reached):
        what = "gain" if section == "addition" else "removed-task drop"
        lines.append(f"The labelled reference feeds the closed form descriptors built from the probes' labels (one-hot minus 1/M, "
                     f"norm-matched to the transferred ones): labels the method never sees, so it shows what a labelled grid "
                     f"gives; it is not a baseline to beat, and no ceiling. The closed form reaches {100 * reached:.0f}% of its {what}"
                     + (": more than the reference itself (one-hot rows ask as much of probes the target already gets right as "
                        "of those it misses)." if reached > 1 else "."))
    return "".join(f"\n\n{line}" for line in lines)


def method_strength(name: str, entry: Mapping[str, Any], strength: float, rule: str | None) -> str:
    """The strength method `name` folded at, in a cell table's strength column: the strength `rule`'s per cell (with their
    mean and range where the cells recorded them), a mean chosen on validation, the fixed weight-space strength, or the
    fixed strength of the kind."""
    if name == "zero_shot":
        return "none (unedited)"
    ruled = rule is not None and follows_rule(name)
    if "strength" in entry:
        low, high = entry.get("strength_range", (entry["strength"], entry["strength"]))
        return f"{rule_name(rule) + ', per cell' if ruled else 'on validation'}: mean {entry['strength']:.2f} ({low:.2f} to {high:.2f})"
    if ruled:
        return f"{rule_name(rule)}, per cell"
    return "weight_space_strength (fixed)" if name.startswith("weight_space") else f"{strength_str(strength)} (fixed)"


def strength_column(entry: Mapping[str, Any], rule: str | None) -> bool:
    """Whether a cell table gives each method's strength: under a strength rule, or where a method chose its own."""
    return rule is not None or any(isinstance(v, dict) and "strength" in v for v in entry.values())


def others_column(entry: Mapping[str, Any]) -> bool:
    """Whether a cell table gives the worst other transfer task's drop: the cells list other tasks and zero-shot ran."""
    return "zero_shot" in entry and any(isinstance(v, dict) and v.get("others") for v in entry.values())


def _method_rows(entry: dict[str, Any], kind: str, controls: Sequence[str], space: str | None = None, strength: float = 0.5,
                 rule: str | None = None) -> list[list[Any]]:
    """A cell table's rows, with each method's strength after its name where strength_column says so, and the worst other
    task's drop and name where others_column says so."""
    names = [m for m in entry if isinstance(entry[m], dict)]
    shares = "label_reference" in names and "zero_shot" in names
    column, others = strength_column(entry, rule), others_column(entry)
    return [[method_label(m, space), *([method_strength(m, entry[m], strength, rule)] if column else []), *(entry[m][s] for s in SLOTS[kind]),
             *(entry[m]["controls"].get(c) for c in controls), entry[m]["control"],
             *(worst(set_drops(entry, m, "others")) or (None, None) if others else ()),
             *([percent(reference_share(entry, m, kind))] if shares else []), entry[m]["cells"]] for m in names]


def strength_words(strength: float, rule: str | None = None) -> str:
    """A heading's strengths: "strength 0.5" (fixed), or, under a strength rule, "strength per method" (the table's column)."""
    return f"strength {strength_str(strength)}" if rule is None else "strength per method"


def cells_section(summary: dict[str, Any], kind: str, group: str, strength: float, space: str | None = None,
                  rule: str | None = None) -> str:
    """A kind and group's table of methods; the closed form is named by the run's descriptor `space`, and the
    heading says at which strengths: the fixed `strength`, or, under the strength `rule`, each method's in a column."""
    entry = summary[group_key(kind, group)]
    controls = list(dict.fromkeys(c for m in entry.values() if isinstance(m, dict) for c in m["controls"]))
    title = "Two-task addition" if kind == "addition" else "Negation"
    shares = {"label_reference", "zero_shot"} <= set(entry)
    moved = "gain on tasks A and B" if kind == "addition" else "removed-task drop"
    others = others_column(entry)
    return (f"## {title}, {group}, {strength_words(strength, rule)} ({plural(entry['cells'], 'cell')})\n\n"
            + table(["method", *(["strength"] if strength_column(entry, rule) else []), *(SLOT_NAMES[s] for s in SLOTS[kind]), *controls, "control mean",
                     *(["worst other task's drop (points)", "worst other task"] if others else []),
                     *(["share of labelled reference"] if shares else []), "cells"],
                    _method_rows(entry, kind, controls, space, strength, rule))
            + "\n\nAccuracy in %, mean over the cells."
            + (" The worst other task: of the transfer tasks a cell does not edit, the one whose accuracy drops most from "
               "zero-shot (mean over the cells that keep it)." if others else "")
            + (f" Share of labelled reference: each method's {moved} over the labelled reference's (same cells' zero-shot)."
               if shares else ""))


def same_cells_sections(summary: dict[str, Any], strengths: Mapping[str, float], space: str | None = None,
                        rule: str | None = None) -> list[str]:
    """Each capped method against the closed form on the cells it ran on (`strengths`: the fixed one of each kind)."""
    out = []
    for name, by_key in summary.get("same_cells", {}).items():
        for key, entry in by_key.items():
            kind = key.split("_")[0]
            shown = [m for m in ("zero_shot", "closed_form", name) if m in entry]
            column = strength_column(entry, rule)
            rows = [[method_label(m, space), *([method_strength(m, entry[m], strengths[kind], rule)] if column else []),
                     *(entry[m][s] for s in (*SLOTS[kind], "control"))] for m in shown]
            out.append(f"## {method_label(name)} vs closed form on the same {key.replace('_', ' ')} cells ({plural(entry['cells'], 'cell')}, "
                       f"{strength_words(strengths[kind], rule)})\n\n"
                       + table(["method", *(["strength"] if column else []), *(SLOT_NAMES[s] for s in SLOTS[kind]), "control"], rows))
    return out


def similarity_section(summary: dict[str, Any]) -> str:
    sim = summary["similarity"]
    rows = [["raw", sim["same_task_cross_model"], sim["same_model_cross_task"], sim["ratio"]]]
    if "centred_ratio" in sim:
        rows.append(["centred (within each task's prompts)", sim["centred_same_task_cross_model"], sim["centred_same_model_cross_task"],
                     sim["centred_ratio"]])
    header = ["descriptors", "same task, other models (own grid)", "same model, other tasks (union grid)", "ratio"]
    return ("## Descriptor similarity\n\n" + table(header, rows) + "\n\nMean cosine of flattened descriptors; the ratio is the "
            "first over the second: above 1, a task's descriptor looks alike on every model, as transfer needs."
            + said(summary, "similarity") + figure_link(summary, "similarity"))


def per_task_section(summary: dict[str, Any], strength: float = 0.5, rule: str | None = None) -> str:
    """Per task over the cross-family additions: zero-shot, one term alone, the oracle, the sources' own fine-tunes."""
    oracle = f"the fixed strength {strength_str(strength)}" if rule is None else f"the strength {rule_name(rule)} chose per cell"
    rows = [[t, v["zero_shot"], v["single"], v["oracle"], v["finetuned"]] for t, v in summary["per_task"].items()]
    return (f"## Per task (cross-family addition cells; single term = single A/B, at the fixed strength {strength_str(strength)}; "
            f"oracle = the target's own descriptor, at {oracle})\n\n"
            + table(["task", "zero-shot (%)", "single term (%)", "oracle (%)", "source fine-tuned (%)"], rows)
            + figure_link(summary, "per_task"))


def figure_words(key: str) -> str:
    """What a headline figure (checks) measures, in words."""
    kind, _, rest = key.partition("_")
    fixed = {"similarity_ratio": "descriptor similarity ratio, raw descriptors", "similarity_ratio_centred": "descriptor similarity ratio, "
             "centred descriptors", "addition_gain_task_a": "addition: closed form minus zero-shot on task A",
             "addition_gain_task_b": "addition: closed form minus zero-shot on task B",
             "addition_share_of_oracle_gain": "addition: the closed form's gain on tasks A and B over the oracle's",
             "addition_share_of_label_reference": "addition: the closed form's gain on tasks A and B over the labelled reference's",
             "negation_share_of_label_reference": "negation: the closed form's removed-task drop over the labelled reference's",
             "random_below_closed_form": "addition: closed form minus Random-UTD, mean of tasks A and B",
             "negation_removed_drop": "negation: zero-shot minus closed form on the removed task",
             "held_out_gain": "held-out transfer: closed form minus zero-shot on the held-out task"}
    if key in fixed:
        return fixed[key]
    if rest.startswith("control_drop"):
        where = rest[len("control_drop_"):] or "the mean over the control sets"
        return f"{kind}: zero-shot minus closed form on {where}"
    if rest.startswith("other_task_drop_"):
        return f"{kind}: zero-shot minus closed form on the other task {rest[len('other_task_drop_'):]}"
    for part in ("task", "control"):
        if key.endswith(f"_{part}_minus_closed_form"):
            name = key[: -len(f"_{part}_minus_closed_form")]
            what = "mean of tasks A and B" if part == "task" else "control mean"
            return f"addition: {method_label(name)} minus closed form on the same cells, {what}"
    return key


def figure_unit(key: str) -> str:
    """A headline figure's unit: "ratio" (similarity), "share" (a fraction, shown in %) or "points" (accuracy points)."""
    return "ratio" if key.startswith("similarity_ratio") else "share" if "_share_" in key else "points"


def figures_section(summary: Mapping[str, Any]) -> str:
    """The headline figures (report.json's checks), one unit per column, then every contradiction of the paper's claims."""
    units = ("points", "share", "ratio")
    rows = [[key, figure_words(key), *(None if figure_unit(key) != u else 100 * v if u == "share" else v for u in units)]
            for key, v in summary["checks"].items()]
    lines = [line for found in contradictions(summary["checks"], modality(summary)).values() for line in found]
    return ("## Figures\n\nThe headline figures, cross-family cells (report.json's checks): accuracy points, shares in %, "
            "ratios of cosines.\n\n" + table(["figure", "what it measures", "points", "share (%)", "ratio"], rows)
            + "".join(f"\n\n{line}" for line in lines))
