"""The report of a run: summaries (report.json) and their markdown (report.md) with the figures.

Every number is a mean over cells of percent accuracies. Per kind and cell group, each method's
row gives task A, task B (negation: the removed task), each control set and the control mean;
the paper's layout (docs/method.md sec. 9), with each method's share of the labelled reference. A figure
that contradicts the paper's claim (similarity ratio below 1, addition gain at or below zero, a negation
that spares its task) is said so in words beside it. The strength sweep's methods are compared on
frontiers: gain against the worst control set's drop (frontier.py). The report ends with the reference
figures of the paper of the run's modality: the image paper's tables, or, for audio, the statement that
the audio paper gives no figure (a run of unknown or mixed modality quotes neither).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..measure import frontier
from ..measure.cells import GROUPS
from ..measure.methods import METHODS

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
SLOTS = {"addition": ("task_a", "task_b"), "negation": ("removed",)}
ORDER = [(kind, group) for kind in SLOTS for group in reversed(GROUPS)]  # cross-family first
SLOT_NAMES = {"task_a": "task A", "task_b": "task B", "removed": "removed task", "control": "control"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 cell`, `2 cells`, `0 cells` (`many` for irregular plurals)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def rounded(value: Any, digits: int = 2) -> Any:
    """`value` (JSON-like: dicts, lists, numbers) with every float rounded to `digits` decimals, as the tables
    print them: 33.33333432674408 -> 33.33. For JSON printed for people; the run's files keep every digit."""
    if isinstance(value, float):
        return round(value, digits) if np.isfinite(value) else value
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    return value


def percent(share: float | None) -> str | None:
    return None if share is None or not np.isfinite(share) else f"{100 * share:.0f}%"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; floats print with two decimals (a value that rounds to zero as 0.00, never -0.00), None and NaN as a dash."""
    fmt = lambda v: "-" if v is None or (isinstance(v, float) and np.isnan(v)) else (  # noqa: E731
        f"{v:.2f}".replace("-0.00", "0.00") if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def group_key(kind: str, group: str) -> str:
    """report.json's key of a kind's summary in a group: `addition`, `addition_same_model`, ..."""
    return kind if group == "cross-family" else f"{kind}_{group.replace('-', '_')}"


def summarise(records: Sequence[dict[str, Any]], kind: str, methods: Sequence[str] | None = None) -> dict[str, Any]:
    """Mean accuracy over cells of each method on each slot (task_a, task_b or removed), each control and their mean."""
    out: dict[str, Any] = {"cells": len(records)}
    for name in methods or METHODS:
        rows = [r for r in records if name in r["results"]]
        if not rows:
            continue
        entry = {slot: mean([r["results"][name][r["tasks"][i]] for r in rows]) for i, slot in enumerate(SLOTS[kind])}
        entry["control"] = mean([mean([r["results"][name][c] for c in r["controls"]]) for r in rows])
        controls = dict.fromkeys(c for r in rows for c in r["controls"])
        entry["controls"] = {c: mean([r["results"][name][c] for r in rows if c in r["controls"]]) for c in controls}
        entry["cells"] = len(rows)
        if all("strength" in r["results"][name] for r in rows):  # chosen per cell (on validation)
            entry["strength"] = mean([r["results"][name]["strength"] for r in rows])
        out[name] = entry
    return out


def per_task(records: Sequence[dict[str, Any]], ws: Any) -> dict[str, dict[str, float]]:
    """Per task over cross-family addition cells: zero-shot, single-term closed form, oracle, the sources' fine-tunes."""
    out = {}
    for task in ws.transfer_tasks:
        single, zero, oracle = [], [], []
        for r in records:
            if r["kind"] != "addition" or r["group"] != "cross-family" or task not in r["tasks"]:
                continue
            results = r["results"]
            zero.append(results["zero_shot"][task])
            for method, values in (("single_a" if r["tasks"].index(task) == 0 else "single_b", single), ("oracle", oracle)):
                if method in results:  # runs without these methods (grid --methods ...) leave them NaN
                    values.append(results[method][task])
        fts = [ws.finetuned_accuracy(f, task) for f in ws.families if (f, task) in ws.finetuned]
        if zero:
            out[task] = {"zero_shot": mean(zero), "single": mean(single), "oracle": mean(oracle),
                         "finetuned": mean([v for v in fts if v is not None])}
    return out


def held_out_summary(records: Sequence[dict[str, Any]], controls: Sequence[str]) -> dict[str, Any]:
    """The held-out study's means over every (target, source assignment), overall and per target."""
    held = records[0]["held_out"]
    at = lambda rs, method: mean([r[method][held] for r in rs])  # noqa: E731
    ctrl = lambda rs, method: mean([mean([r[method][c] for c in controls if c != held]) for r in rs])  # noqa: E731
    targets = list(dict.fromkeys(r["target"] for r in records))
    return {
        "related": records[0]["related"], "task": held, "records": len(records),
        "zero_shot": at(records, "zero_shot"), "closed_form": at(records, "closed_form"),
        "control_zero_shot": ctrl(records, "zero_shot"), "control_closed_form": ctrl(records, "closed_form"),
        "per_target": {t: {m: at([r for r in records if r["target"] == t], m) for m in ("zero_shot", "closed_form")} for t in targets},
    }


def task_mean(entry: Mapping[str, float]) -> float:
    return (entry["task_a"] + entry["task_b"]) / 2


def checks(summary: dict[str, Any]) -> dict[str, float]:
    """The headline figures, from the cross-family summaries that the run has (no thresholds are tuned here)."""
    out: dict[str, float] = {}
    add, neg = summary.get("addition", {}), summary.get("negation", {})
    if "similarity" in summary:
        sim = summary["similarity"]
        out["similarity_ratio"] = sim["ratio"]
        if "centred_ratio" in sim:
            out["similarity_ratio_centred"] = sim["centred_ratio"]
    share = lambda part, whole: part / whole if whole else float("nan")  # noqa: E731
    if {"closed_form", "zero_shot"} <= set(add):
        gain = {s: add["closed_form"][s] - add["zero_shot"][s] for s in SLOTS["addition"]}
        out.update({f"addition_gain_{s}": g for s, g in gain.items()})
        for name, key in (("oracle", "addition_share_of_oracle_gain"), ("label_reference", "addition_share_of_label_reference")):
            if name in add:
                out[key] = share(sum(gain.values()), sum(add[name][s] - add["zero_shot"][s] for s in SLOTS["addition"]))
        if "random_utd" in add:
            out["random_below_closed_form"] = task_mean(add["closed_form"]) - task_mean(add["random_utd"])
        out.update(control_drops(add, "addition"))
    if {"closed_form", "zero_shot"} <= set(neg):
        out["negation_removed_drop"] = neg["zero_shot"]["removed"] - neg["closed_form"]["removed"]
        if "label_reference" in neg:
            out["negation_share_of_label_reference"] = share(out["negation_removed_drop"],
                                                           neg["zero_shot"]["removed"] - neg["label_reference"]["removed"])
        out.update(control_drops(neg, "negation"))
    if "held_out" in summary:
        out["held_out_gain"] = summary["held_out"]["closed_form"] - summary["held_out"]["zero_shot"]
    for name, same in summary.get("same_cells", {}).items():
        cells = same.get("addition", {})
        if name in cells and "closed_form" in cells:
            out[f"{name}_task_minus_closed_form"] = task_mean(cells[name]) - task_mean(cells["closed_form"])
            out[f"{name}_control_minus_closed_form"] = cells[name]["control"] - cells["closed_form"]["control"]
    return out


def control_drops(entry: Mapping[str, Any], kind: str) -> dict[str, float]:
    """Zero-shot minus closed form on the control mean and on each control set (its own figure)."""
    zero, ours = entry["zero_shot"], entry["closed_form"]
    out = {f"{kind}_control_drop": zero["control"] - ours["control"]}
    out.update({f"{kind}_control_drop_{c}": zero["controls"][c] - ours["controls"][c] for c in ours["controls"] if c in zero["controls"]})
    return out


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
    source = paper
    for slot, figure in PAPER_GAINS.items():
        gain = figures.get(f"addition_gain_{slot}")
        if gain is not None and gain <= 0:
            say("addition", f"the closed form's addition gain on {SLOT_NAMES[slot]} is {gain:+.2f} points, at or below zero: the transferred "
                            f"edit does not add the task ({source}: {figure:+.1f}{no_figure}).")
    drop = figures.get("negation_removed_drop")
    if drop is not None and drop <= 0:
        say("negation", f"negation spares the task: the removed task's accuracy moves by {-drop:+.2f} points, no drop "
                        f"({paper}: {-PAPER_REMOVED_DROP:+.1f}{no_figure}).")
    return out


def _said(summary: Mapping[str, Any], section: str) -> str:
    """The contradiction sentences of a section, then (cell sections) what share of the labelled reference the closed form reached."""
    figures = summary.get("checks", {})
    lines = contradictions(figures, modality(summary)).get(section, [])
    reached = figures.get(f"{section}_share_of_label_reference")
    if reached is not None and np.isfinite(reached):
        what = "gain" if section == "addition" else "removed-task drop"
        lines.append(f"The labelled reference feeds the closed form descriptors built from the probes' labels (one-hot minus 1/M, "
                     f"norm-matched to the transferred ones): labels the method never sees, so it shows what a labelled grid "
                     f"gives; it is not a baseline to beat, and no ceiling. The closed form reaches {100 * reached:.0f}% of its {what}"
                     + (": more than the reference itself (one-hot rows ask as much of probes the target already gets right as "
                        "of those it misses)." if reached > 1 else "."))
    return "".join(f"\n\n{line}" for line in lines)


def method_label(name: str, space: str | None = None) -> str:
    """A method's name in reports; the closed form's names its descriptor space (`space`, the run's)."""
    label = METHODS[name].label if name in METHODS else name
    return f"{label}, {space.replace('_', '-')} descriptors" if name == "closed_form" and space else label


def frontier_summary(sweep: Sequence[dict[str, Any]], settings: Any) -> dict[str, dict[str, Any]]:
    """report.json's frontiers (frontier.py): per kind and group (group_key), each swept method's curve,
    its gain within each budget, and its (worst drop, gain) point at the run's strength of that kind (none for
    the closed form's methods when a strength rule chose each cell's strength: that point is on no curve)."""
    out: dict[str, dict[str, Any]] = {}
    methods = list(dict.fromkeys(r["method"] for r in sweep))
    for kind, group in ORDER:
        for name in methods:
            found = frontier.curve(sweep, name, kind, group)
            if found is not None:
                ruled = settings.strength_rule is not None and name.startswith("closed_form")
                point = None if ruled else found.point(settings.strength_of(kind))
                out.setdefault(group_key(kind, group), {})[name] = {
                    **found.summary(), "label": method_label(name, settings.space),
                    "strength": settings.strength_of(kind), "at_strength": None if point is None else list(point)}
    return out


def summarise_run(ws: Any, records: Sequence[dict[str, Any]], results: dict[str, Any], config: Any) -> dict[str, Any]:
    """report.json: per kind and group summaries, capped methods against the closed form on their own
    cells, the studies' summaries, per-task means and the checks."""
    summary: dict[str, Any] = {}
    found = {getattr(m, "modality", None) for m in ws.models.values()}
    summary["modality"] = found.pop() if len(found) == 1 else None
    for kind, group in ORDER:
        rows = [r for r in records if r["kind"] == kind and r["group"] == group]
        if rows:
            summary[group_key(kind, group)] = summarise(rows, kind)
    capped = [m for m in dict.fromkeys(m for s in config.cells for m in s.methods or config.methods) if config.cap(m) is not None]
    summary["same_cells"] = {m: {group_key(kind, group): summarise(rows, kind, ["zero_shot", "closed_form", m])
                                 for kind, group in ORDER
                                 if (rows := [r for r in records if r["kind"] == kind and r["group"] == group and m in r["results"]])}
                             for m in capped}
    if "similarity" in results:
        summary["similarity"] = results["similarity"]
    if results.get("held_out"):
        summary["held_out"] = held_out_summary(results["held_out"], ws.controls)
    if results.get("sweep"):
        summary["frontier"] = frontier_summary(results["sweep"], config.settings)
    summary["per_task"] = per_task(records, ws)
    if "orthoreg" in results:
        summary["orthoreg"] = results["orthoreg"]
    summary["checks"] = checks(summary)
    return summary


# ---------------------------------------------------------------------------- markdown
def _figure(summary: dict[str, Any], name: str) -> str:
    path = summary.get("figures", {}).get(name)
    return f"\n\n![{name}]({path})" if path else ""


def reference_share(entry: Mapping[str, Any], name: str, kind: str) -> float | None:
    """Method `name`'s share of the labelled reference: its gain over zero-shot on both tasks (addition) or its
    removed-task drop (negation), over the reference's; None without a reference or zero-shot, or for zero-shot."""
    if name in ("zero_shot", "label_reference") or not {"zero_shot", "label_reference"} <= set(entry):
        return None
    sign = 1.0 if kind == "addition" else -1.0
    moved = lambda m: sign * sum(entry[m][s] - entry["zero_shot"][s] for s in SLOTS[kind])  # noqa: E731
    whole = moved("label_reference")
    return moved(name) / whole if whole else None


def _method_rows(entry: dict[str, Any], kind: str, controls: Sequence[str], space: str | None = None) -> list[list[Any]]:
    names = [m for m in entry if isinstance(entry[m], dict)]
    shares = "label_reference" in names and "zero_shot" in names
    return [[method_label(m, space), *(entry[m][s] for s in SLOTS[kind]),
             *(entry[m]["controls"].get(c) for c in controls), entry[m]["control"],
             *([percent(reference_share(entry, m, kind))] if shares else []), entry[m]["cells"]] for m in names]


def strength_words(strength: float, rule: str | None = None) -> str:
    """"strength 0.5", and where a strength rule chose the closed form's, the oracle's and the labelled reference's, which rule."""
    return f"strength {strength:g}" + (f"; the closed form, the oracle and the labelled reference at the strength rule {rule} "
                                       "chose per cell" if rule else "")


def cells_section(summary: dict[str, Any], kind: str, group: str, strength: float, space: str | None = None,
                  rule: str | None = None) -> str:
    """A kind and group's table of methods; the closed form is named by the run's descriptor `space`, and the
    heading says which strength rule, if any, chose the closed form's strengths (`rule`)."""
    entry = summary[group_key(kind, group)]
    controls = list(dict.fromkeys(c for m in entry.values() if isinstance(m, dict) for c in m["controls"]))
    title = "Two-task addition" if kind == "addition" else "Negation"
    chosen = [f"{METHODS[m].label if m in METHODS else m} {v['strength']:.2f}" for m, v in entry.items() if isinstance(v, dict) and "strength" in v]
    shares = {"label_reference", "zero_shot"} <= set(entry)
    moved = "gain on tasks A and B" if kind == "addition" else "removed-task drop"
    return (f"## {title}, {group}, {strength_words(strength, rule)} ({plural(entry['cells'], 'cell')})\n\n"
            + table(["method", *(SLOT_NAMES[s] for s in SLOTS[kind]), *controls, "control mean",
                     *(["share of labelled reference"] if shares else []), "cells"], _method_rows(entry, kind, controls, space))
            + (f"\n\nShare of labelled reference: each method's {moved} over the labelled reference's (same cells' zero-shot)."
               if shares else "")
            + (f"\n\nStrengths chosen on validation (mean over cells): {'; '.join(chosen)}." if chosen else ""))


def same_cells_sections(summary: dict[str, Any], strengths: Mapping[str, str], space: str | None = None) -> list[str]:
    out = []
    for name, by_key in summary.get("same_cells", {}).items():
        for key, entry in by_key.items():
            kind = key.split("_")[0]
            label = METHODS[name].label if name in METHODS else name
            out.append(f"## {label} vs closed form on the same {key.replace('_', ' ')} cells ({plural(entry['cells'], 'cell')}, "
                       f"{strengths[kind]})\n\n" + table(["method", *(SLOT_NAMES[s] for s in SLOTS[kind]), "control"],
                                                         [[method_label(m, space), *(entry[m][s] for s in (*SLOTS[kind], "control"))]
                                                          for m in ("zero_shot", "closed_form", name) if m in entry]))
    return out


def similarity_section(summary: dict[str, Any]) -> str:
    sim = summary["similarity"]
    rows = [["raw", sim["same_task_cross_model"], sim["same_model_cross_task"], sim["ratio"]]]
    if "centred_ratio" in sim:
        rows.append(["centred (within each task's prompts)", sim["centred_same_task_cross_model"], sim["centred_same_model_cross_task"],
                     sim["centred_ratio"]])
    header = ["descriptors", "same task, other models (own grid)", "same model, other tasks (union grid)", "ratio"]
    return "## Descriptor similarity\n\n" + table(header, rows) + _said(summary, "similarity") + _figure(summary, "similarity")


def sweep_section(records: Sequence[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The closed form's sweep: per strength and kind the mean accuracy on the tasks, the control sets' mean, and
    the worst control set's drop (its name: the set a mean over the sets hides)."""
    ours = [r for r in records if r["method"] == "closed_form"]
    worst = {kind: frontier.curve(ours, "closed_form", kind, None) for kind in SLOTS}
    rows = []
    for c in sorted({c for r in ours for c in r["strengths"]}):
        row: list[Any] = [f"{c:g}"]
        for kind, curve in worst.items():
            sel = [(r, r["strengths"].index(c)) for r in ours if r["kind"] == kind and c in r["strengths"]]
            if not sel:
                row += [None, None, None]
                continue
            i = curve.strengths.index(c)
            row += [mean([mean([r["accuracy"][t][j] for t in r["tasks"]]) for r, j in sel]),
                    mean([mean([r["accuracy"][n][j] for n in r["controls"]]) for r, j in sel]),
                    f"{curve.worst_drop[i]:.2f} ({curve.worst_set[i]})" if curve.worst_set[i] else None]
        rows.append(row)
    header = ["strength", "addition: tasks", "addition: controls (mean)", "addition: worst control drop",
              "negation: removed task", "negation: controls (mean)", "negation: worst control drop"]
    return ("## Strength sweep (closed form)\n\nMean accuracy over the swept cells; the worst control drop is the largest "
            "mean drop from zero-shot of one control set, named beside it.\n\n" + table(header, rows) + _figure(summary, "sweep"))


def frontier_section(summary: dict[str, Any]) -> str:
    """Per kind and group: each swept method's best gain within 1 and 3 points of worst control drop, and its point at
    the run's strength; then the figure."""
    parts = ["## Frontiers: gain against the worst control set's drop",
             "Each method that transfers descriptors, swept over the strengths above on the same cells: per strength, the mean "
             "gain on the cells' tasks over zero-shot (negation: the removed task's drop) against the worst control set's "
             "drop (the control set that loses most, mean over the cells; not the mean over the sets). \"within 1\" and "
             "\"within 3\": the best gain whose worst control drop is at most 1 or 3 points, linear between two swept "
             "strengths (a dash: no swept strength keeps within it). A fixed strength cannot tell a better direction from "
             "a bigger push; the frontier can. The LoRA route, when swept (it is on request: sweep_methods), is fitted once "
             "per cell and its edit scaled by each strength, as the run scales it."]
    for key, methods in summary["frontier"].items():
        first = next(iter(methods.values()))
        kind, group = first["kind"], first["group"]
        strength = f"{first['strength']:g}"
        rows = [[v["label"], v["cells"], v["within"].get("1"), v["within"].get("3"),
                 *(v["at_strength"][::-1] if v["at_strength"] else (None, None)), v["worst_set"][-1]] for v in methods.values()]
        what = "gain" if kind == "addition" else "removal"
        parts.append(f"### {kind.capitalize()}, {group}\n\n" + table(
            ["method", "cells", f"{what} within 1", f"{what} within 3", f"{what} at strength {strength}",
             f"worst control drop at {strength}", f"worst set at strength {first['strengths'][-1]:g}"], rows))
    return "\n\n".join(parts) + _figure(summary, "frontier")


def accumulation_section(records: Sequence[dict[str, Any]], summary: dict[str, Any]) -> str:
    rows = []
    for J in sorted({r["J"] for r in records}):
        row: list[Any] = [J]
        for schedule in ("fixed", "divided"):
            sel = [r for r in records if r["J"] == J and r["schedule"] == schedule]
            norm = [r["mean_normalised"] for r in sel if r["mean_normalised"] is not None]
            row += [mean([r["mean_accuracy"] for r in sel]), mean(norm), mean([r["control_mean"] for r in sel])]
        zero = [r["zero_shot_normalised"] for r in records if r["J"] == J and r["schedule"] == "fixed" and r["zero_shot_normalised"] is not None]
        rows.append(row + [mean(zero)])
    header = ["J", "strength: acc", "strength: normalised", "strength: controls", "strength/J: acc", "strength/J: normalised",
              "strength/J: controls", "zero-shot normalised"]
    targets = sorted({r["target"] for r in records})
    return f"## Accumulation (targets: {', '.join(targets)})\n\n" + table(header, rows) + _figure(summary, "accumulation")


def held_out_section(held: dict[str, Any]) -> str:
    rows = [[t, v["zero_shot"], v["closed_form"], None, None] for t, v in held["per_target"].items()]
    rows.append(["all", held["zero_shot"], held["closed_form"], held["control_zero_shot"], held["control_closed_form"]])
    return (f"## Held-out transfer ({' + '.join(held['related'])} -> {held['task']}, never fitted; "
            f"{plural(held['records'], 'target x source pair')})\n\n"
            + table(["target", "held-out: zero-shot", "held-out: closed form", "control: zero-shot", "control: closed form"], rows))


def guarantee_section(records: Sequence[dict[str, Any]]) -> str:
    rows = []
    keys = ("guaranteed", "changed", "bound", "lost", "observed_loss")
    for kind, group in ORDER:
        sel = [r["pooled"] for r in records if r["kind"] == kind and r["group"] == group]
        if sel:
            rows.append([kind, group, len(sel)] + [mean([s[k] for s in sel]) for k in keys] + [sum(s["violations"] for s in sel)])
    holds = all(r["pooled"]["lost"] <= r["pooled"]["bound"] + 1e-9 and r["pooled"]["violations"] == 0 for r in records)
    header = ["kind", "group", "cells", "guaranteed %", "changed %", "bound (points)", "lost (points)", "net loss (points)", "violations"]
    return (
        "## Guarantee diagnostic (closed form)\n\n"
        "An item is guaranteed when its top-1 margin exceeds 2 ||f' - f|| (unit landmarks move no logit by more).\n"
        "bound = correct items without the guarantee; lost = correct items that became wrong; net loss = accuracy before - after.\n\n"
        + table(header, rows) + f"\n\nThe bound {'holds on every record' if holds else 'VIOLATED on some record'} ({plural(len(records), 'record')})."
    )


def orthoreg_section(study: dict[str, Any]) -> str:
    """Per merging method and lambda: task-vector cosine, the strength chosen on validation, the merged model's
    accuracy; with a negation part, per method and lambda the means over negated tasks."""
    methods = list(dict.fromkeys(r["method"] for r in study["runs"]))
    runs = sorted(study["runs"], key=lambda r: methods.index(r["method"]))  # by method, then lambda
    rows = [[r["method"], r["orthoreg"], r["mean_cosine"], f"{r['strength']:.2f}" + (" (grid top)" if r["strength"] >= r["grid_top"] else ""),
             r["merged_mean"], r["normalised"]] for r in runs]
    out = (f"## OrthoReg study ({study['family']}, weight-space addition of {', '.join(study['tasks'])}; "
           "strength chosen on validation per method, the grid grown while the pick is its top)\n\n"
           + table(["merging method", "lambda", "mean pairwise cosine", "strength", "merged accuracy", "normalised accuracy"], rows))
    if study.get("negation"):
        groups = {(r["method"], r["orthoreg"]): [] for r in sorted(study["negation"], key=lambda r: methods.index(r["method"]))}
        for r in study["negation"]:
            groups[(r["method"], r["orthoreg"])].append(r)
        rows = [[m, lam, mean([r["strength"] for r in rs]), mean([r["zero_shot"][r["task"]] for r in rs]), mean([r["removed"] for r in rs]),
                 mean([r["zero_shot"][study["control"]] for r in rs]), mean([r["control"] for r in rs])] for (m, lam), rs in groups.items()]
        out += (f"\n\nNegation: each task removed alone (theta - c merge(tau_task)), control {study['control']}; strength chosen on "
                "validation (lowest removed-task accuracy keeping the control at 95% of zero-shot); means over the tasks\n\n"
                + table(["merging method", "lambda", "strength", "removed: zero-shot", "removed: edited", "control: zero-shot",
                         "control: edited"], rows))
    return out


def per_task_section(summary: dict[str, Any]) -> str:
    rows = [[t, v["zero_shot"], v["single"], v["oracle"], v["finetuned"]] for t, v in summary["per_task"].items()]
    return ("## Per task (cross-family single term = Single-A/B; oracle = the target's own descriptor)\n\n"
            + table(["task", "zero-shot", "single term", "oracle", "source fine-tuned"], rows) + _figure(summary, "per_task"))


def _setting(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


def cells_run(cells: Mapping[str, int]) -> str:
    """What the run did with its cells: how many records, from how many (cell, methods) passes, run now or resumed."""
    records, passes, resumed = cells["records"], cells["passes"], cells.get("resumed", 0)
    ran = passes - resumed
    how = ("all run fresh, none resumed" if not resumed else "all resumed from cells.jsonl, none run fresh" if not ran
           else f"{ran} run fresh, {resumed} resumed from cells.jsonl")
    return f"{plural(records, 'cell')} from {plural(passes, 'pass', 'passes')} (a pass runs one cell with a set of methods): {how}"


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


def render(summary: dict[str, Any], title: str = "platonic grid", studies: Mapping[str, Any] | None = None) -> str:
    """The whole report.md of a run from its report.json content (and studies.json for the study tables)."""
    studies = studies or summary.get("studies", {})
    config = summary["config"]
    settings = config["settings"]
    rule = settings.get("strength_rule")
    strengths = {kind: strength_words(settings[f"{kind}_strength"], rule) for kind in ("addition", "negation")}
    flat = {**config.get("describe", {}), **{k: v for k, v in config.items() if k not in ("describe", "settings", "cells")},
            **{k: v for k, v in settings.items() if k != "lora"}, **{f"lora {k}": v for k, v in settings["lora"].items()},
            "cells": "; ".join(f"{c['kind']} {c['group']}" + (f" (at most {c['max_cells']})" if c["max_cells"] is not None else "")
                               + (f" [{', '.join(c['methods'])}]" if c["methods"] else "") for c in config["cells"]),
            "cell records": cells_run(summary["cells"])}
    parts = [f"# {title}", "## Settings", table(["setting", "value"], [[k, _setting(v)] for k, v in flat.items()])]
    if "similarity" in summary:
        parts.append(similarity_section(summary))
    for kind, group in ORDER:
        if group_key(kind, group) in summary:
            parts.append(cells_section(summary, kind, group, settings[f"{kind}_strength"], settings.get("space"), rule)
                         + (_said(summary, kind) if group == "cross-family" else "")
                         + (_figure(summary, "scatter") if kind == "addition" and group == "cross-family" else ""))
    parts += same_cells_sections(summary, strengths, settings.get("space"))
    if any(r["method"] == "closed_form" for r in studies.get("sweep") or ()):
        parts.append(sweep_section(studies["sweep"], summary))
    if summary.get("frontier"):
        parts.append(frontier_section(summary))
    if studies.get("accumulation"):
        parts.append(accumulation_section(studies["accumulation"], summary))
    if "held_out" in summary:
        parts.append(held_out_section(summary["held_out"]))
    if studies.get("guarantee"):
        parts.append(guarantee_section(studies["guarantee"]))
    if "orthoreg" in summary:
        parts.append(orthoreg_section(summary["orthoreg"]))
    if summary.get("per_task"):
        parts.append(per_task_section(summary))
    said = [line for lines in contradictions(summary["checks"], modality(summary)).values() for line in lines]
    parts.append("## Figures\n\n" + table(["figure", "value"], [[k, v] for k, v in summary["checks"].items()])
                 + "".join(f"\n\n{line}" for line in said))
    reference = paper_reference(summary)
    if reference is not None:
        parts.append(reference)
    parts.append("## Wall times\n\n" + table(["stage", "wall time (s)"], [[k, v] for k, v in summary.get("timings", {}).items()]))
    return "\n\n".join(parts) + "\n"
