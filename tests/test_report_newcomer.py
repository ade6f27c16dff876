"""A report a newcomer reads (issue 35; issue 33 item 8): it opens with a summary in plain words, ends with the
settings in words after a glossary of exactly the terms it uses; its headings are true under every preset, a
method keeps its colour in every figure, and the run's own point sits on every frontier, in the figure and
the table, at the strengths the run used. Hand-made summaries, every figure worked out by hand."""

from __future__ import annotations

import re

import pytest
from test_report_wording import Settings, _cell_records, _sweep  # frontier_summary's settings; a sweep of two methods, its cells

from platonic_sdk.evaluate.report import cell_tables, plots, render, summaries, summary as opening
from platonic_sdk.evaluate.report.glossary import used_terms
from platonic_sdk.evaluate.report.style import colour
from platonic_sdk.strength import DEFAULT_STRENGTH_RULE

PAPER = {"space": "affinity", "strength_rule": None, "centre": [], "anchor": []}  # --paper's method block, as run.json records it
DEFAULT = {"space": "blend", "strength_rule": DEFAULT_STRENGTH_RULE, "centre": ["negation"], "anchor": ["negation"]}


# the run's closed form on the swept cells at the strengths a rule chose per cell: addition gains 10 and 20 (mean 15),
# control c2 drops 1 and 3 (mean 2, the worst), c1 0.5 and 0 (0.25); negation removes 30 and 10 (mean 20), c2 drops 1 and 2
# (mean 1.5, the worst), c1 0 and 1
RULED = {"addition0": {"a": 60.0, "c1": 69.5, "c2": 59.0}, "addition1": {"a": 70.0, "c1": 70.0, "c2": 57.0},
         "negation0": {"a": 20.0, "c1": 70.0, "c2": 59.0}, "negation1": {"a": 40.0, "c1": 69.0, "c2": 58.0}}


def _entry(a: float, b: float, controls: dict[str, float], cells: int = 4) -> dict:
    return {"task_a": a, "task_b": b, "removed": a, "control": sum(controls.values()) / len(controls), "controls": controls, "cells": cells}


def _summary(method: dict, sweep_methods: bool = True) -> dict:
    """A run of two image families under `method` (PAPER or DEFAULT): addition, negation, held-out, similarity, frontier."""
    rule = method["strength_rule"]
    fixed = {r["key"]: {n: v[1 if r["kind"] == "addition" else 2] for n, v in r["accuracy"].items()} for r in _sweep() if r["method"] == "closed_form"}
    out = {
        "modality": "image",
        "addition": {"cells": 4, "zero_shot": _entry(50.0, 40.0, {"c1": 70.0, "c2": 60.0}),
                     "random_utd": _entry(49.0, 40.0, {"c1": 69.0, "c2": 60.0}),
                     "closed_form": _entry(60.0, 46.0, {"c1": 69.5, "c2": 57.0}), "oracle": _entry(64.0, 50.0, {"c1": 69.0, "c2": 58.0}),
                     "label_reference": _entry(58.0, 48.0, {"c1": 69.0, "c2": 58.0})},
        "negation": {"cells": 2, "zero_shot": _entry(50.0, 0.0, {"c1": 70.0, "c2": 60.0}, 2),
                     "closed_form": _entry(30.0, 0.0, {"c1": 66.0, "c2": 59.0}, 2)},
        "held_out": {"related": ["a", "b"], "task": "c", "records": 2, "strength": 0.5, "zero_shot": 40.0, "closed_form": 47.5,
                     "control_zero_shot": 65.0, "control_closed_form": 64.0, "per_target": {"clip": {"zero_shot": 40.0, "closed_form": 47.5}}},
        "similarity": {"same_task_cross_model": 0.6, "same_model_cross_task": 0.2, "ratio": 3.0},
        "config": {"families": ["clip", "siglip"], "describe": {"world": "image, seed 0"},
                   "cells": [{"kind": k, "group": "cross-family", "max_cells": None, "methods": None} for k in ("addition", "negation")],
                   "settings": {"addition_strength": 0.5, "negation_strength": 1.0, "weight_space_strength": 0.5, "lora": {"lr": 0.003},
                                **method}},
        "cells": {"records": 6, "passes": 6, "resumed": 0}, "timings": {"total": 1.0},
    }
    if sweep_methods:
        out["frontier"] = summaries.frontier_summary(_sweep(), Settings(method["space"], rule), _cell_records(RULED if rule else fixed))
    out["checks"] = summaries.checks(out)
    return out


def _sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.M)


@pytest.mark.parametrize("method", [PAPER, DEFAULT], ids=["paper", "default"])
def test_a_report_opens_with_its_summary_and_ends_with_its_glossary_then_settings(method):
    text = render.render(_summary(method), "platonic demo", {"sweep": _sweep()})
    sections = _sections(text)
    assert sections[0] == "Summary" and sections[-2:] == ["Glossary", "Settings"]
    assert sections.count("Settings") == 1 and text.index("## Settings") > text.index("## Frontiers")


def test_the_summary_says_what_moved_the_gains_the_damage_and_the_frontier_in_plain_words():
    said = opening.summary_section(_summary(DEFAULT))
    assert "2 image-text models (clip, siglip)" in said and "4 two-task addition cells" in said and "2 negation cells" in said
    assert "blend descriptors; strengths chosen per cell by auto" in said
    # gains over zero-shot, and the oracle's: (10 + 6) / (14 + 10) = 67%
    assert "task A 50.0 -> 60.0 (+10.0), task B 40.0 -> 46.0 (+6.0) over zero-shot" in said
    assert "the oracle, the target's own descriptors, gains +12.0 on average: the closed form reaches 67% of it" in said
    assert "the removed task 50.0 -> 30.0 (-20.0 points)" in said
    # damage: the worst control set (c2: 60 -> 57), not the mean over the sets (1.75); negation: c1 loses 4
    assert "additions: 3.00 points on c2 (mean over the sets 1.75)" in said and "negations: 4.00 points on c1" in said
    # the run's point on the swept cells: gain 15 at worst drop 2 (c2); the fixed strengths' frontier gains 10 within 2
    assert ("additions (2 swept cells): at the strengths chosen per cell by auto, a gain of +15.0 points for a worst control set drop "
            "of 2.00 (c2): 5.00 points above its frontier (the best of its fixed strengths within that drop gains +10.0, 150% of the "
            "frontier's gain)") in said
    assert "c, a task whose items and class names entered no fit, 40.0 -> 47.5 (+7.5 points)" in said
    assert "3.0 times as alike" in said and "no figure contradicts them" in said
    paper = opening.summary_section(_summary(PAPER))
    assert "affinity descriptors; strengths fixed: 0.5 addition / 1.0 negation" in paper and "auto" not in paper
    # at a fixed strength the point is the sweep's own: on the frontier (gain 10 at drop 2)
    assert "at strength 0.5, a gain of +10.0 points for a worst control set drop of 2.00 (c2): on its frontier" in paper


def test_a_run_without_a_frontier_or_a_method_setting_still_gets_a_summary():
    s = _summary(PAPER, sweep_methods=False)
    del s["config"]["settings"]["space"]
    said = opening.summary_section(s)
    assert "On the frontier" not in said and "The method" not in said and "**Addition**" in said


# Jargon a newcomer cannot guess, written independently of the glossary's own patterns: each one a report uses is defined.
JARGON = {"cell": "cell", "zero-shot": "zero-shot", "closed form": "closed form", "descriptor": "descriptor", "blend": "blend",
          "affinity": "affinity", "oracle": "oracle", "Random-UTD": "Random-UTD", "labelled reference": "labelled reference",
          "auto": "auto", "frontier": "frontier", "worst control set": "worst control set", "held-out": "held-out transfer",
          "control set": "control set", "strength": "strength", "cross-family": "cross-family", "points": "points",
          "single A": "single A", "sweep": "strength sweep", "run's point": "run's point", "centre": "centre", "anchor": "anchor",
          "LoRA": "LoRA route", "similarity": "similarity ratio", "guarantee": "guarantee", "accumulation": "accumulation"}


@pytest.mark.parametrize("method", [PAPER, DEFAULT], ids=["paper", "default"])
def test_every_term_the_report_uses_is_in_its_glossary_and_no_other(method):
    text = render.render(_summary(method), "platonic demo", {"sweep": _sweep()})
    body, glossary = text.split("## Glossary")[0], text.split("## Glossary")[1].split("## Settings")[0]
    defined = re.findall(r"^- \*\*(.+?)\*\*: ", glossary, flags=re.M)
    for word, term in JARGON.items():
        if re.search(rf"\b{re.escape(word)}\b", body):
            assert any(term in d for d in defined), f"{word!r} is used but not defined"
    assert ("auto" in defined) == (method is DEFAULT)  # the rule is defined where the run used it
    assert "weight space" not in defined and "OrthoReg" not in defined  # no term the report does not use
    assert not [t for t, _ in used_terms("nothing here")]


def test_under_paper_the_settings_say_in_words_what_was_used():
    paper = render.render(_summary(PAPER), "platonic demo")
    settings = paper.split("## Settings")[1]
    assert "| centre | none |" in settings and "| anchor | none |" in settings
    assert "| strength_rule | fixed: 0.5 addition / 1.0 negation |" in settings and "None" not in settings
    default = render.render(_summary(DEFAULT), "platonic demo").split("## Settings")[1]
    assert (f"| strength_rule | auto ({DEFAULT_STRENGTH_RULE}): the closed form, the oracle and the labelled reference at the strength "
            "it chose per cell, the other methods fixed: 0.5 addition / 1.0 negation |") in default
    assert "| lora lr | 0.003 |" in default and "| cell records | 6 cells from 6 passes" in default


@pytest.mark.parametrize("method", [PAPER, DEFAULT], ids=["paper", "default"])
def test_headings_are_true_under_every_preset(method):
    text = render.render(_summary(method), "platonic demo", {"sweep": _sweep()})
    headings = _sections(text)
    ruled = method["strength_rule"] is not None
    cells = [h for h in headings if h.startswith(("Two-task addition", "Negation"))]
    assert len(cells) == 2
    for h in cells:  # a heading names one strength only where every method of its table used it
        assert ("strength per method" in h) == ruled and (re.search(r"strength \d", h) is None) == ruled
    if not ruled:
        assert "auto" not in text and "chosen per cell" not in text


def test_the_figures_table_gives_each_unit_its_own_column():
    text = cell_tables.figures_section(_summary(DEFAULT))
    header = next(line for line in text.splitlines() if line.startswith("| figure"))
    assert header == "| figure | what it measures | points | share (%) | ratio |"
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[2:] for line in text.splitlines() if line.startswith("| ") and line != header}
    assert rows["addition_gain_task_a"] == ["10.00", "-", "- |"]
    assert rows["addition_share_of_oracle_gain"] == ["-", f"{100 * 16 / 24:.2f}", "- |"]  # a share in %, never a fraction
    assert rows["similarity_ratio"] == ["-", "-", "3.00 |"]


def _drawn(monkeypatch) -> list:
    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path, extra=(): figures.append(fig) or save(fig, path, extra))
    monkeypatch.setattr(plots._pyplot(), "close", lambda fig: None)
    return figures


def test_the_run_s_point_is_on_every_frontier_figure_and_table_at_the_strengths_it_used(monkeypatch, tmp_path):
    figures = _drawn(monkeypatch)
    s = _summary(DEFAULT)
    point = s["frontier"]["addition"]["closed_form"]["point"]
    assert [point["worst_drop"], point["gain"], point["worst_set"]] == [pytest.approx(2.0), pytest.approx(15.0), "c2"]
    assert point["rule"] == DEFAULT_STRENGTH_RULE and point["frontier_gain"] == pytest.approx(10.0)
    # affinity follows the rule too, but no cell record holds it at the rule's strengths: no point, none made up
    assert s["frontier"]["addition"]["closed_form_affinity"]["point"] is None
    table = render.render(s, "platonic demo", {"sweep": _sweep()}).split("### Addition, cross-family")[1]
    assert "| closed form, blend descriptors | 2 | 5.00 | 13.33 | chosen per cell by auto | 15.00 | 2.00 | c2 | 10.00 |" in table
    plots.frontier_curves(s["frontier"], tmp_path / "frontier.png", "blend")
    stars = [line for ax in figures[0].axes for line in ax.lines if line.get_marker() == "*" and len(line.get_xdata())]
    assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in stars] == [pytest.approx((2.0, 15.0)), pytest.approx((1.5, 20.0))]
    assert stars[0].get_color() == colour("closed_form_blend")
    assert "the run's point (strengths chosen per cell by auto)" in [t.get_text() for t in figures[0].legends[0].get_texts()]


def test_the_sweep_figure_marks_the_run_s_strength_only_where_it_was_fixed(monkeypatch, tmp_path):
    figures = _drawn(monkeypatch)
    plots.sweep_curves(_sweep(), tmp_path / "fixed.png", {"addition": 0.5, "negation": 1.0}, space="affinity")
    plots.sweep_curves(_sweep(), tmp_path / "ruled.png", None, space="blend", rule=DEFAULT_STRENGTH_RULE)
    fixed, ruled = ([line.get_label() for ax in fig.axes for line in ax.lines] for fig in figures)
    assert "the run's strength (0.5)" in fixed and "the run's strength (1.0)" in fixed
    assert not [label for label in ruled if "strength" in label]  # no strength of the run to mark
    assert all("chosen per cell by auto" in ax.get_title() for ax in figures[1].axes)


def test_a_method_keeps_its_colour_in_every_figure_of_every_preset(monkeypatch, tmp_path):
    figures = _drawn(monkeypatch)
    by_label = {}
    for method in (PAPER, DEFAULT):  # the run's closed form is affinity in one, blend in the other: the lines swap order
        plots.frontier_curves(_summary(method)["frontier"], tmp_path / "frontier.png", method["space"])
        lines = {line.get_label(): line.get_color() for ax in figures[-1].axes for line in ax.lines if not line.get_label().startswith("_")}
        for label, shade in lines.items():
            assert by_label.setdefault(label, shade) == shade, label
    assert by_label["closed form, blend descriptors"] != by_label["closed form, affinity descriptors"]
    plots.sweep_curves(_sweep(), tmp_path / "sweep.png", None, space="blend", rule=DEFAULT_STRENGTH_RULE)
    assert figures[-1].axes[0].lines[0].get_color() == by_label["closed form, blend descriptors"]
    plots.accumulation_curves([{"target": "t", "J": 1, "schedule": s, "strength": 0.5, "mean_normalised": 70.0, "mean_accuracy": 60.0,
                                "zero_shot_normalised": 60.0, "zero_shot_mean": 50.0} for s in ("fixed", "divided")],
                              tmp_path / "accumulation.png", "affinity")
    assert figures[-1].axes[0].lines[0].get_color() == by_label["closed form, affinity descriptors"]
    assert colour("my_plugin_method") == colour("my_plugin_method")  # a plug-in's colour: from its name, the same every run
