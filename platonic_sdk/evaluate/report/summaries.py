"""report.json: the means over cells that every table, figure and sentence of a report reads.

Every number is a mean over cells of percent accuracies. Per kind and cell group, each method's entry gives
task A, task B (negation: the removed task), each control set and the control mean (the paper's layout,
docs/method.md sec. 9), each other transfer task (over the cells it is not a task of), and the mean and range of
the strengths a method chose per cell (on validation, or by the run's strength rule). The strength sweep's methods are
compared on frontiers (frontier.py): gain against the worst kept set's drop (control sets and other tasks alike),
with the run's own point on each, at the strengths the run used.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..measure import frontier
from ..measure.methods import METHODS
from .names import DAMAGE_WORDS, ORDER, SLOTS, follows_rule, group_key, method_label
from .text import mean


def summarise(records: Sequence[dict[str, Any]], kind: str, methods: Sequence[str] | None = None) -> dict[str, Any]:
    """Mean accuracy over cells of each method on each slot (task_a, task_b or removed), each control and their mean, each
    other transfer task, each kept set's mean drop from zero-shot on the method's own cells ("drops", by DAMAGE field),
    and the strengths it chose per cell (mean and range) where it chose one on every cell."""
    out: dict[str, Any] = {"cells": len(records)}
    for name in methods or METHODS:
        rows = [r for r in records if name in r["results"]]
        if not rows:
            continue
        entry = {slot: mean([r["results"][name][r["tasks"][i]] for r in rows]) for i, slot in enumerate(SLOTS[kind])}
        entry["control"] = mean([mean([r["results"][name][c] for c in r["controls"]]) for r in rows])
        controls = dict.fromkeys(c for r in rows for c in r["controls"])
        entry["controls"] = {c: mean([r["results"][name][c] for r in rows if c in r["controls"]]) for c in controls}
        others = dict.fromkeys(t for r in rows for t in r.get("others", ()))
        entry["others"] = {t: mean([r["results"][name][t] for r in rows if t in r.get("others", ())]) for t in others}
        if all("zero_shot" in r["results"] for r in rows):  # each kept set's drop on this method's own cells (frontier.point)
            drops = frontier.point([frontier.outcome(r, name) for r in rows], kind).drops
            entry["drops"] = {field: {s: drops[s] for s in dict.fromkeys(s for r in rows for s in r.get(field, ()))} for field in frontier.DAMAGE}
        entry["cells"] = len(rows)
        if all("strength" in r["results"][name] for r in rows):  # chosen per cell (on validation, or by the strength rule)
            chosen = [r["results"][name]["strength"] for r in rows]
            entry["strength"], entry["strength_range"] = mean(chosen), [min(chosen), max(chosen)]
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
    """The held-out study's means over every (target, source assignment), overall and per target, and its strength."""
    held = records[0]["held_out"]
    at = lambda rs, method: mean([r[method][held] for r in rs])  # noqa: E731
    ctrl = lambda rs, method: mean([mean([r[method][c] for c in controls if c != held]) for r in rs])  # noqa: E731
    targets = list(dict.fromkeys(r["target"] for r in records))
    return {
        "related": records[0]["related"], "task": held, "records": len(records), "strength": records[0]["strength"],
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
    """Zero-shot minus closed form on the control mean, on each control set and on each other transfer task (its own figure)."""
    zero, ours = entry["zero_shot"], entry["closed_form"]
    out = {f"{kind}_control_drop": zero["control"] - ours["control"]}
    for field, key in (("controls", "control_drop"), ("others", "other_task_drop")):
        out.update({f"{kind}_{key}_{s}": drop for s, drop in set_drops(entry, "closed_form", field).items()})
    return out


def set_drops(entry: Mapping[str, Any], name: str, field: str) -> dict[str, float]:
    """Zero-shot minus method `name` on each set of a kind's entry listed under `field` ("controls" or "others"): over
    the method's own cells (`summarise`'s "drops"), else (a summary without them) between the two methods' means."""
    if "drops" in entry[name]:
        return dict(entry[name]["drops"].get(field, {}))
    zero, ours = entry["zero_shot"].get(field, {}), entry[name].get(field, {})
    return {s: zero[s] - ours[s] for s in ours if s in zero}


def worst(drops: Mapping[str, float]) -> tuple[float, str] | None:
    """(drop, name) of the set that loses most; None without a set."""
    return (drops[name := max(drops, key=drops.get)], name) if drops else None


def reference_share(entry: Mapping[str, Any], name: str, kind: str) -> float | None:
    """Method `name`'s share of the labelled reference: its gain over zero-shot on both tasks (addition) or its
    removed-task drop (negation), over the reference's; None without a reference or zero-shot, or for zero-shot."""
    if name in ("zero_shot", "label_reference") or not {"zero_shot", "label_reference"} <= set(entry):
        return None
    sign = 1.0 if kind == "addition" else -1.0
    moved = lambda m: sign * sum(entry[m][s] - entry["zero_shot"][s] for s in SLOTS[kind])  # noqa: E731
    whole = moved("label_reference")
    return moved(name) / whole if whole else None


def frontier_summary(sweep: Sequence[dict[str, Any]], settings: Any, records: Sequence[dict[str, Any]] = ()) -> dict[str, dict[str, Any]]:
    """report.json's frontiers (frontier.py): per kind and group (group_key), each swept method's curve, its
    gain within each budget, and the run's own point on it (`run_point`, from the run's cell `records`)."""
    out: dict[str, dict[str, Any]] = {}
    methods = list(dict.fromkeys(r["method"] for r in sweep))
    for kind, group in ORDER:
        for name in methods:
            found = frontier.curve(sweep, name, kind, group)
            if found is None:
                continue
            swept = [r for r in sweep if r["method"] == name and r["kind"] == kind and r["group"] == group]
            keys = {r["key"] for r in swept}
            cells = [r for r in records if r["key"] in keys and name in r["results"]]
            out.setdefault(group_key(kind, group), {})[name] = {
                **found.summary(), "label": method_label(name, settings.space), "point": run_point(found, swept, cells, settings)}
    return out


def run_point(curve: frontier.Curve, swept: Sequence[dict[str, Any]], cells: Sequence[dict[str, Any]], settings: Any) -> dict[str, Any] | None:
    """The run's own point of the curve's method on its swept cells: frontier.point over the run's cell records of
    those cells (`cells`: each at the strength the run used, the fixed one or the one its strength rule chose),
    else, where the method keeps the fixed strength, over the sweep's records (`swept`) at it. None where the
    method follows the run's strength rule but the run has no cell record of it (a sweep knows no rule), or the
    fixed strength was not swept. With each damage kind's worst set (names.DAMAGE_WORDS: the worst control set and the
    worst other task, each where the cells list one) and the gain the curve reaches within the point's worst drop
    (`frontier_gain`)."""
    rule = settings.strength_rule if follows_rule(curve.method) else None
    strength = settings.strength_of(curve.kind)
    if cells:
        outcomes = [frontier.outcome(r, curve.method) for r in cells]
    elif rule is None:
        outcomes = frontier.swept_at(swept, strength)
    else:
        return None
    found = frontier.point(outcomes, curve.kind)
    if found is None:
        return None
    drop = found.worst_drop
    return {"gain": found.gain, "worst_drop": drop, "worst_set": found.worst_set, "cells": found.cells,
            "damage": {field: list(found.worst(sets)) for field in DAMAGE_WORDS if (sets := {s for r in outcomes for s in r.get(field, ())})},
            "rule": rule, "strength": None if rule else strength, "frontier_gain": curve.gain_within(drop)}


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
        summary["frontier"] = frontier_summary(results["sweep"], config.settings, records)
    summary["per_task"] = per_task(records, ws)
    if "orthoreg" in results:
        summary["orthoreg"] = results["orthoreg"]
    summary["checks"] = checks(summary)
    return summary
