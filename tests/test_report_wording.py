"""The report says in words when a figure contradicts the paper, next to that figure (hand-made summaries)."""

from __future__ import annotations

import pytest
from PIL import Image

from platonic_sdk.evaluate.report import cell_tables, paper, settings_table, study_tables, summaries, text


def _entry(a: float, b: float, control: float) -> dict:
    return {"task_a": a, "task_b": b, "removed": a, "control": control, "controls": {"control_x": control}, "cells": 2}


def _summary(ratio: float, gain_a: float, removed_drop: float) -> dict:
    sim = {"same_task_cross_model": ratio * 0.2, "same_model_cross_task": 0.2, "ratio": ratio,
           "centred_same_task_cross_model": 0.5, "centred_same_model_cross_task": 0.25, "centred_ratio": 2.0}
    summary = {
        "similarity": sim,
        "addition": {"cells": 2, "zero_shot": _entry(50.0, 50.0, 70.0), "closed_form": _entry(50.0 + gain_a, 60.0, 69.0),
                     "label_reference": _entry(70.0, 70.0, 68.0)},
        "negation": {"cells": 2, "zero_shot": _entry(50.0, 50.0, 70.0), "closed_form": _entry(50.0 - removed_drop, 0.0, 66.0),
                     "label_reference": _entry(10.0, 0.0, 60.0)},
    }
    summary["checks"] = summaries.checks(summary)
    return summary


def test_agreeing_figures_say_nothing_and_the_reference_share_is_reported():
    s = _summary(ratio=2.5, gain_a=5.0, removed_drop=20.0)
    assert paper.contradictions(s["checks"]) == {}
    assert s["checks"]["addition_share_of_label_reference"] == pytest.approx((5.0 + 10.0) / (20.0 + 20.0))
    assert s["checks"]["negation_share_of_label_reference"] == pytest.approx(20.0 / 40.0)
    assert s["checks"]["negation_control_drop_control_x"] == pytest.approx(4.0)
    text = cell_tables.cells_section(s, "addition", "cross-family", 0.5) + cell_tables.said(s, "addition")
    assert "Contradicts" not in text and "reaches 38% of its gain." in text and "labelled reference" in text
    assert "ceiling" not in text.replace("no ceiling", "")  # a reference, never called a ceiling


def test_each_contradiction_is_said_beside_its_figure():
    s = _summary(ratio=0.76, gain_a=-1.0, removed_drop=-0.5)
    said = paper.contradictions(s["checks"])
    assert set(said) == {"similarity", "addition", "negation"}
    sim = cell_tables.similarity_section(s)
    assert "similarity ratio (raw descriptors) is 0.76, below 1" in sim
    assert "centred descriptors) is" not in sim  # the centred ratio, 2.0, agrees with the paper
    assert "| centred (within each task's prompts) | 0.50 | 0.25 | 2.00 |" in sim
    assert "addition gain on task A is -1.00 points" in cell_tables.said(s, "addition")
    assert "task B" not in " ".join(said["addition"])  # +10 on task B agrees
    assert "negation spares the task" in cell_tables.said(s, "negation") and "+0.50 points" in cell_tables.said(s, "negation")


def test_a_gain_of_exactly_zero_and_a_ratio_just_below_one_are_contradictions():
    said = paper.contradictions({"addition_gain_task_b": 0.0, "similarity_ratio": 0.999, "negation_removed_drop": 0.01})
    assert set(said) == {"addition", "similarity"}


def test_a_reference_that_the_transfer_beats_is_said_to_be_passed():
    s = _summary(ratio=2.5, gain_a=30.0, removed_drop=20.0)  # gains 30 + 10 against the reference's 20 + 20
    assert "reaches 100% of its gain." in cell_tables.said(s, "addition")
    s = _summary(ratio=2.5, gain_a=35.0, removed_drop=20.0)
    assert "reaches 112% of its gain: more than the reference itself" in cell_tables.said(s, "addition")


# ---------------------------------------------------------------- counts, shares, the closing reference
def test_fresh_and_resumed_cells_are_worded_for_what_happened():
    assert settings_table.cells_run({"records": 1026, "resumed": 0, "passes": 1042}) == (
        "1026 cells from 1042 passes (a pass runs one cell with a set of methods): all run fresh, none resumed")
    assert settings_table.cells_run({"records": 1, "resumed": 1, "passes": 1}).endswith("1 cell from 1 pass (a pass runs one cell with a set "
                                                                                 "of methods): all resumed from cells.jsonl, none run fresh")
    assert settings_table.cells_run({"records": 8, "resumed": 3, "passes": 9}).endswith(": 6 run fresh, 3 resumed from cells.jsonl")


def test_counts_are_singular_or_plural_as_they_should_be():
    assert [text.plural(n, "cell") for n in (0, 1, 2)] == ["0 cells", "1 cell", "2 cells"]
    assert text.plural(1, "pass", "passes") == "1 pass" and text.plural(3, "pass", "passes") == "3 passes"
    s = _summary(ratio=2.5, gain_a=5.0, removed_drop=20.0)
    s["addition"]["cells"] = 1
    assert "strength 0.5 (1 cell)\n" in cell_tables.cells_section(s, "addition", "cross-family", 0.5)
    assert "(2 cells)" in cell_tables.cells_section(s, "negation", "cross-family", 1.0)
    s["addition"]["random_utd"] = _entry(50.0, 50.0, 70.0)
    ruled = cell_tables.cells_section(s, "addition", "cross-family", 0.5, rule="least_squares_off_task").splitlines()
    # under a strength rule no one strength is true of the table: the heading says so, a column gives each method's
    assert ruled[0] == "## Two-task addition, cross-family, strength per method (1 cell)"
    strengths = {row.split(" | ")[0].lstrip("| "): row.split(" | ")[1] for row in ruled[4:] if row.startswith("| ")}
    assert strengths == {"zero-shot": "none (unedited)", "closed form": "auto, per cell", "labelled reference (probe labels, not the method)":
                         "auto, per cell", "Random-UTD": "0.5 (fixed)"}
    assert " | strength | " not in cell_tables.cells_section(s, "addition", "cross-family", 0.5)  # fixed: the heading says it
    held = {"related": ["a", "b"], "task": "c", "records": 1, "zero_shot": 50.0, "closed_form": 55.0, "control_zero_shot": 70.0,
            "control_closed_form": 69.0, "per_target": {"clip": {"zero_shot": 50.0, "closed_form": 55.0}}}
    assert "1 target x source pair)" in study_tables.held_out_section(held)


def test_every_method_shows_its_share_of_the_labelled_reference():
    s = _summary(ratio=2.5, gain_a=5.0, removed_drop=20.0)
    add = cell_tables.cells_section(s, "addition", "cross-family", 0.5)
    header = next(line for line in add.splitlines() if line.startswith("| method"))
    assert header.split(" | ")[-2] == "share of labelled reference"
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[-2] for line in add.splitlines() if line.startswith("| ") and line != header}
    assert rows["zero-shot"] == "-" and rows["closed form"] == "38%" and rows["labelled reference (probe labels, not the method)"] == "-"
    neg = cell_tables.cells_section(s, "negation", "cross-family", 1.0)
    assert "| closed form | 30.00 | 66.00 | 66.00 | 50% | 2 |" in neg  # drop 20 of the reference's 40
    assert "ceiling" not in add + neg
    del s["addition"]["label_reference"]  # without the reference, no column
    assert "share of labelled reference" not in cell_tables.cells_section(s, "addition", "cross-family", 0.5)


def _config(families, benchmark=None):
    return {"families": families, "describe": {"benchmark": f"{benchmark}: ..."} if benchmark else {}}


def test_each_benchmark_ends_with_its_own_papers_figures():
    image = paper.paper_reference({"config": _config(["clip"], "paper-image"), "checks": {}})
    assert "## The image paper's reference figures (docs/method.md sec. 9)" in image and "| ours, closed form | 79.08 |" in image
    assert "not the paper's study" not in image and "60.98 -> 25.76" in image
    audio = paper.paper_reference({"config": _config(["clap-general"], "paper-audio"), "checks": {}})
    assert audio.startswith("## The audio paper's reference figures (docs/method.md sec. 9)")
    assert "states no figure" in audio and "CIFAR" not in audio and "ImageNet" not in audio and "|" not in audio
    world = paper.paper_reference({"config": _config(["clip", "siglip"]), "checks": {}})  # the image world: figures for orientation
    assert "not the paper's study" in world and "audio paper" not in world
    assert "CIFAR" not in paper.paper_reference({"config": _config(["clap-general", "clap-music"]), "checks": {}})
    # the real world's members (lit_s, lit_m) are no family names: the run records its models' modality
    real = paper.paper_reference({"config": _config(["lit_s", "lit_m"]), "modality": "image", "checks": {}})
    assert "not the paper's study" in real and "audio paper" not in real
    assert paper.paper_reference({"config": _config(["lit_s", "lit_m"]), "checks": {}}) is None  # unknown: no paper quoted


def test_json_for_people_rounds_every_float_as_the_tables_do():
    rows = {"shapes": {"zero_shot": 33.33333432674408, "edited": 100.0}, "n": [1, 2.0049999], "nan": float("nan")}
    out = text.rounded(rows)
    assert out["shapes"] == {"zero_shot": 33.33, "edited": 100.0} and out["n"] == [1, 2.0] and out["nan"] != out["nan"]
    assert text.table(["a"], [[33.33333432674408]]).endswith(f"| {out['shapes']['zero_shot']} |")
    assert text.table(["a", "b"], [[-0.001, -0.004999]]).endswith("| 0.00 | 0.00 |")  # no -0.00


def test_an_audio_contradiction_quotes_the_image_paper_as_such():
    said = paper.contradictions({"addition_gain_task_a": -1.0}, "audio")["addition"][0]
    assert "(the image paper: +18.1; the audio paper states no figure)" in said
    assert "(the paper: +18.1)" in paper.contradictions({"addition_gain_task_a": -1.0})["addition"][0]


# ---------------------------------------------------------------- figures: legends cover no data, no group hides
@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """The figures the plot functions make, drawn and kept open (their files are written as usual)."""
    from platonic_sdk.evaluate.report import plots

    figures = []
    save = plots._save

    def keep(fig, path, extra=()):
        fig.canvas.draw()
        figures.append((fig, save(fig, path, extra)))
        return figures[-1][1]

    monkeypatch.setattr(plots, "_save", keep)
    monkeypatch.setattr(plots._pyplot(), "close", lambda fig: None)
    return plots, figures


def _data_extents(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Rectangle

    boxes = [p.get_window_extent() for p in ax.patches if isinstance(p, Rectangle) and p.get_height()]
    for c in ax.collections:
        if isinstance(c, PathCollection):
            boxes += [c.get_transform().transform(o) for o in c.get_offsets()]
    for line in ax.lines:
        boxes += list(line.get_transform().transform(line.get_xydata()))
    return boxes


def _covers(legend_box, item) -> bool:
    if hasattr(item, "overlaps"):
        return legend_box.overlaps(item)
    return legend_box.contains(*item)


def test_no_legend_covers_a_bar_a_marker_or_a_line(drawn, tmp_path):
    plots, figures = drawn
    per_task = {t: {"zero_shot": 40.0 + i, "single": 60.0, "oracle": 85.0, "finetuned": 98.0}
                for i, t in enumerate(["amber_shapes", "teal_backgrounds", "violet_shapes"])}
    per_task["teal_backgrounds"].update(oracle=99.0, finetuned=99.5)  # tall bars at the right, where a legend used to sit
    plots.per_task_bars(per_task, tmp_path / "per_task.png")
    records = [{"kind": "addition", "group": g, "tasks": ["a", "b"], "finetuned": {"a": 90.0, "b": 90.0},
                "results": {"zero_shot": {"a": 40.0 + i, "b": 50.0}, "closed_form": {"a": 60.0 + i, "b": 65.0}}}
               for g in ("cross-family", "same-model") for i in range(6)]
    plots.two_task_scatter(records, tmp_path / "scatter.png")
    plots.sweep_curves(_sweep(), tmp_path / "sweep.png", {"addition": 0.5, "negation": 1.0})
    accumulation = [{"target": "clip", "J": J, "schedule": s, "strength": 0.5, "mean_normalised": 80.0 - J, "mean_accuracy": 60.0,
                     "zero_shot_normalised": 60.0, "zero_shot_mean": 50.0} for J in (1, 2, 3) for s in ("fixed", "divided")]
    plots.accumulation_curves(accumulation, tmp_path / "accumulation.png")
    assert len(figures) == 4
    for fig, path in figures:
        with Image.open(path) as png:  # the saved image grows to hold the legends beside or below the axes
            assert png.width > fig.get_figwidth() * 130 or png.height > fig.get_figheight() * 130, path.name
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box = legend.get_window_extent()
            # beside or below its axes, over no panel of the figure (the sweep's left legend lay over the right panel)
            assert not any(box.overlaps(other.get_window_extent()) for other in fig.axes), ax.get_title()
            assert not any(_covers(box, item) for item in _data_extents(ax)), ax.get_title()


def _sweep():
    """Sweep records (studies.strength_sweep's layout) of two methods on two cells of each kind."""
    return [{"key": f"{k}{i}", "kind": k, "group": "cross-family", "target": "t", "method": m, "tasks": ["a"], "controls": ["c1", "c2"],
             "zero_shot": {"a": 50.0, "c1": 70.0, "c2": 60.0}, "strengths": [0.0, 0.5, 1.0],
             "accuracy": {"a": [50.0, 50.0 + 10 * s, 50.0 + 20 * s], "c1": [70.0, 70.0 - s, 70.0 - 2 * s], "c2": [60.0, 60.0 - 2 * s, 60.0 - 5 * s]}}
            for k in ("addition", "negation") for i in range(2) for m, s in (("closed_form", 1.0), ("closed_form_affinity", 0.5))]


class Settings:
    """What frontier_summary reads of CellSettings: the run's space, strength rule and fixed strengths."""

    def __init__(self, space: str = "blend", strength_rule: str | None = None):
        self.space, self.strength_rule = space, strength_rule

    @staticmethod
    def strength_of(kind):
        return 0.5 if kind == "addition" else 1.0


def _cell_records(at: dict[str, dict[str, float]]) -> list[dict]:
    """The run's cell records of _sweep's cells: zero-shot, and the closed form's accuracies `at` (by cell key)."""
    zero = {"a": 50.0, "c1": 70.0, "c2": 60.0}
    return [{"key": key, "kind": "addition" if key.startswith("addition") else "negation", "group": "cross-family", "tasks": ["a"],
             "controls": ["c1", "c2"], "results": {"zero_shot": zero, "closed_form": accs}} for key, accs in at.items()]


def test_the_frontier_figure_and_table_show_each_method_against_the_worst_set(drawn, tmp_path):
    plots, figures = drawn
    # the run's cell records at the fixed strengths (0.5 on additions, 1.0 on negations): the sweep's own accuracies there
    fixed = {r["key"]: {n: v[1 if r["kind"] == "addition" else 2] for n, v in r["accuracy"].items()}
             for r in _sweep() if r["method"] == "closed_form"}
    frontiers = summaries.frontier_summary(_sweep(), Settings(), _cell_records(fixed))
    add = frontiers["addition"]
    assert list(add) == ["closed_form", "closed_form_affinity"] and add["closed_form"]["label"].endswith("blend descriptors")
    # the worst set is c2 (drops 0, 2, 5), not the mean of c1 and c2 (0, 1.5, 3.5); addition gains 0, 10, 20
    assert add["closed_form"]["worst_drop"] == [0.0, 2.0, 5.0] and add["closed_form"]["worst_set"][1:] == ["c2", "c2"]
    assert add["closed_form"]["within"] == {"1": pytest.approx(5.0), "3": pytest.approx(10.0 + 10.0 / 3)}
    point = add["closed_form"]["point"]  # from the cell records: at a fixed strength, the sweep's own point there
    assert [point["worst_drop"], point["gain"]] == pytest.approx([2.0, 10.0]) and point["worst_set"] == "c2" and point["cells"] == 2
    assert point["rule"] is None and point["strength"] == 0.5 and point["frontier_gain"] == pytest.approx(10.0)
    assert point["damage"] == {"controls": [pytest.approx(2.0), "c2"]}
    neg = frontiers["negation"]["closed_form_affinity"]  # negation: the removal, -(accuracy change): 0, -5, -10
    assert neg["gain"] == [0.0, -5.0, -10.0]  # no cell record of it: the sweep's point at the fixed strength 1.0
    assert [neg["point"]["worst_drop"], neg["point"]["gain"]] == pytest.approx([2.5, -10.0])
    text = study_tables.frontier_section({"frontier": frontiers, "figures": {"frontier": "figures/frontier.png"}})
    assert "### Addition, cross-family" in text and "### Negation, cross-family" in text
    assert "| closed form, blend descriptors | 2 | 5.00 | 13.33 | 0.5 | 10.00 | 2.00 | c2 | 10.00 |" in text
    assert text.endswith("![frontier](figures/frontier.png)")
    plots.frontier_curves(frontiers, tmp_path / "frontier.png", "blend")
    (fig, path), = figures
    first, second = fig.axes
    assert [line.get_label() for line in first.lines if not line.get_label().startswith("_")][:2] == [
        "closed form, blend descriptors", "closed form, affinity descriptors"]
    assert first.lines[0].get_color() == second.lines[0].get_color()  # one colour per method in every panel
    legend = fig.legends[0].get_window_extent()
    assert not any(legend.overlaps(ax.get_window_extent()) for ax in fig.axes)
    with Image.open(path) as png:  # the legend below the panels is saved, not cut
        assert png.height > fig.get_figheight() * 130


def test_the_scatter_draws_the_few_same_model_cells_on_top_and_edged(drawn, tmp_path):
    plots, figures = drawn
    records = [{"kind": "addition", "group": g, "tasks": ["a", "b"], "finetuned": {"a": 90.0, "b": 90.0},
                "results": {"zero_shot": {"a": 50.0, "b": 50.0}, "closed_form": {"a": 60.0, "b": 60.0}}}  # every cell at one point
               for g in ("same-model",) * 6 + ("cross-family",) * 40]
    plots.two_task_scatter(records, tmp_path / "scatter.png")
    (ax,) = figures[0][0].axes
    by_label = {c.get_label().split(" (")[0]: c for c in ax.collections}
    same, cross = by_label["same-model"], by_label["cross-family"]
    assert same.get_zorder() > cross.get_zorder()
    assert same.get_sizes()[0] > cross.get_sizes()[0] and same.get_linewidths()[0] > 0
    assert "same-model (6 cells, 100% above)" == same.get_label()
