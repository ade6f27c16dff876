"""The opening of a report, in plain words: what moved from which models to which, the headline gains, the
damage (the worst control set's drop and the worst other task's, each its own), where the run's own point sits on
its frontier, and whether a figure contradicts the paper. Read from report.json alone, so a run of any preset, or a
summary made by hand, gets one.
"""

from __future__ import annotations

from typing import Any, Mapping

from .names import DAMAGE_WORDS, KEPT, KEPT_DROP, ORDER, SLOTS, chosen_words, fixed_words, group_key, rule_name, space_label, strength_str
from .paper import PAPER_RATIO, contradictions, modality
from .summaries import set_drops, worst
from .text import finite, percent, plural, signed

KIND_WORDS = {"addition": ("two-task addition cell", "two tasks added to a target"), "negation": ("negation cell", "one task removed")}
GROUP_WORDS = {"cross-family": "each source of another family than its target", "same-architecture": "sources of the target's architecture",
               "same-model": "the target's own fine-tunes as sources"}


def what_moved(summary: Mapping[str, Any]) -> str:
    """The run in one paragraph: the models, the cells, the method and its strengths."""
    config, settings = summary.get("config", {}), summary.get("config", {}).get("settings", {})
    families = list(config.get("families", ()))
    kind = modality(summary)
    models = f"{kind}-text models" if kind else "models"
    cells = [f"{plural(summary[key]['cells'], KIND_WORDS[k][0])} ({KIND_WORDS[k][1]}; {GROUP_WORDS[g]})"
             for k, g in ORDER if (key := group_key(k, g)) in summary]
    text = (f"What fine-tuning taught one model was moved into another of a different architecture or width, without the target's "
            f"own fine-tune and without a label of the moved tasks: {len(families)} {models} ({', '.join(families)}), each a source for the others "
            "and a target. In each cell a target receives the descriptors of what its sources' fine-tunes learnt on the cell's "
            "tasks; every figure is a mean over cells.")
    if cells:
        text += " Cells: " + "; ".join(cells) + "."
    if "space" in settings:
        rule = settings.get("strength_rule")
        strengths = (fixed_words(settings["addition_strength"], settings["negation_strength"]) if rule is None
                     else f"{chosen_words(rule)}{keep_words(settings)} (the oracle and the labelled reference too; the other methods "
                          f"{fixed_words(settings['addition_strength'], settings['negation_strength'])})")
        text += f" The method: the closed form with {space_label(settings['space'])} descriptors; strengths {strengths}."
        if rule is not None and (chose := chosen_strengths(summary)):
            text += f" The strengths {rule_name(rule)} chose for the closed form: {chose}."
    return text


def keep_words(settings: Mapping[str, Any]) -> str:
    """What the strength rule read of the sets the edits must leave alone (settings' keep), for what_moved."""
    if settings.get("keep") != "labels":
        return " from the other transfer tasks' unlabelled probes"
    budgets = " / ".join(f"{strength_str(b)} {k}" if (b := settings.get(f"{k}_budget")) is not None else f"the default on {k}s"
                         for k in SLOTS)
    q = settings.get("confidence")
    return (f", spending a budget of {budgets} points on the labelled train splits of the controls and the other transfer tasks"
            f" (at {'the default confidence' if q is None else f'confidence {q:g}'})")


def chosen_strengths(summary: Mapping[str, Any]) -> str | None:
    """The closed form's chosen strengths per kind (headline group): mean and range over the cells; None where none was recorded."""
    said = []
    for kind in SLOTS:
        found = _headline(summary, kind)
        entry = found[1]["closed_form"] if found else {}
        if "strength" in entry:
            low, high = entry.get("strength_range", (entry["strength"], entry["strength"]))
            said.append(f"{kind}s {entry['strength']:.2f} on average ({low:.2f} to {high:.2f} over the cells)")
    return "; ".join(said) or None


def _headline(summary: Mapping[str, Any], kind: str) -> tuple[str, Mapping[str, Any]] | None:
    """The group whose table gives `kind`'s headline (cross-family first) and its entry; None without the closed form."""
    for k, group in ORDER:
        entry = summary.get(group_key(k, group), {})
        if k == kind and {"closed_form", "zero_shot"} <= set(entry):
            return group, entry
    return None


def damage_words(entry: Mapping[str, Any], kind: str) -> str:
    """The worst control set's drop on cells of `kind` (zero-shot minus closed form, mean over the cells), then the worst
    other transfer task's, where the cells list others."""
    found = worst(set_drops(entry, "closed_form", "controls"))
    if found is None:
        text = f"{kind}s: no control set"
    else:
        mean_drop = entry["zero_shot"]["control"] - entry["closed_form"]["control"]
        text = (f"{kind}s: no control set lost accuracy (mean over the sets {signed(-mean_drop)} points)" if found[0] <= 0
                else f"{kind}s: {found[0]:.2f} points on {found[1]} (mean over the sets {mean_drop:.2f})")
    other = worst(set_drops(entry, "closed_form", "others"))
    if other is not None:
        text += (", no other task lost accuracy" if other[0] <= 0 else f", and {other[0]:.2f} points on the other task {other[1]}")
    return text


def point_words(point: Mapping[str, Any]) -> str:
    """Where a run's point sits against its method's own frontier, in words."""
    best = point["frontier_gain"]
    if best is None:
        return "no swept strength keeps the kept sets within its drop"
    gap = point["gain"] - best
    if abs(gap) < 0.05:
        return "on its frontier: no fixed strength gains more for that damage"
    share = f", {percent(point['gain'] / best)} of the frontier's gain" if best > 0 else ""
    return (f"{abs(gap):.2f} points {'above' if gap > 0 else 'below'} its frontier (the best of its fixed strengths within that "
            f"drop gains {signed(best)}{share})")


def frontier_words(summary: Mapping[str, Any], kind: str) -> str | None:
    """Where the run's closed form sits on its frontier for `kind` (its headline group), or None without one."""
    headline = _headline(summary, kind)
    found = summary.get("frontier", {}).get(group_key(kind, headline[0]) if headline else kind, {}).get("closed_form")
    point = found and found.get("point")
    if not point:
        return None
    at = f"strength {strength_str(point['strength'])}" if point["rule"] is None else f"the strengths {chosen_words(point['rule'])}"
    what = "gain" if kind == "addition" else "removal"
    kinds = [(word, *found) for field, word in DAMAGE_WORDS.items() if (found := point["damage"].get(field)) and found[1] is not None]
    damage = (f"a worst {kinds[0][0]} drop of {kinds[0][1]:.2f} ({kinds[0][2]})" if len(kinds) == 1 else
              f"a worst {KEPT}'s drop of {point['worst_drop']:.2f} (" + ", ".join(f"the worst {w} {d:.2f} on {n}" for w, d, n in kinds) + ")")
    return f"{kind}s ({plural(point['cells'], 'swept cell')}): at {at}, a {what} of {signed(point['gain'])} points for {damage}: {point_words(point)}"


def summary_section(summary: Mapping[str, Any]) -> str:
    """## Summary: the run in a paragraph, then the headline figures in bullets, each in plain words."""
    bullets = []
    if found := _headline(summary, "addition"):
        group, entry = found
        zero, ours = entry["zero_shot"], entry["closed_form"]
        moves = ", ".join(f"{n} {zero[s]:.1f} -> {ours[s]:.1f} ({signed(ours[s] - zero[s])})" for s, n in zip(SLOTS["addition"], ("task A", "task B")))
        text = f"**Addition** ({group}, {plural(entry['cells'], 'cell')}, accuracy %): {moves} over zero-shot"
        if "oracle" in entry:
            gain = sum(ours[s] - zero[s] for s in SLOTS["addition"])
            whole = sum(entry["oracle"][s] - zero[s] for s in SLOTS["addition"])
            share = percent(gain / whole) if whole else None
            text += f"; the oracle, the target's own descriptors, gains {signed(whole / 2)} on average" + (
                f": the closed form reaches {share} of it" if share else "")
        bullets.append(text + ".")
    if found := _headline(summary, "negation"):
        group, entry = found
        zero, ours = entry["zero_shot"]["removed"], entry["closed_form"]["removed"]
        bullets.append(f"**Negation** ({group}, {plural(entry['cells'], 'cell')}): the removed task {zero:.1f} -> {ours:.1f} "
                       f"({signed(ours - zero)} points).")
    damage = [damage_words(found[1], kind) for kind in SLOTS if (found := _headline(summary, kind))]
    if damage:
        bullets.append("**Damage**, the worst control set's drop from zero-shot and the worst other transfer task's (the set "
                       "that loses most; a mean over the sets hides it): " + "; ".join(damage) + ".")
    frontier = [words for kind in SLOTS if (words := frontier_words(summary, kind))]
    if frontier:
        bullets.append(f"**On the frontier** (gain against the {KEPT_DROP}, over fixed strengths, on the swept "
                       "cells), the run's own point: " + "; ".join(frontier) + ".")
    if held := summary.get("held_out"):
        bullets.append(f"**Held-out transfer**: {held['task']}, a task whose items and class names entered no fit, "
                       f"{held['zero_shot']:.1f} -> {held['closed_form']:.1f} ({signed(held['closed_form'] - held['zero_shot'])} points) "
                       f"from the operators of {' + '.join(held['related'])}.")
    if finite(summary.get("similarity", {}).get("ratio")):
        bullets.append(f"**Descriptors**: one task's descriptors on different models are {summary['similarity']['ratio']:.1f} times "
                       f"as alike (cosine) as one model's descriptors of different tasks (the paper: {PAPER_RATIO:.1f}).")
    said = sum(len(v) for v in contradictions(summary.get("checks", {}), modality(summary)).values())
    bullets.append("**The paper's claims**: " + ("no figure contradicts them." if not said else
                   f"{plural(said, 'figure')} contradict{'s' if said == 1 else ''} them; each is said beside its table."))
    return "## Summary\n\n" + what_moved(summary) + "\n\n" + "\n".join(f"- {b}" for b in bullets)
