"""The report says in words when a figure contradicts the paper, next to that figure (hand-made summaries)."""

from __future__ import annotations

import pytest

from platonic_sdk.evaluate import report


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
    summary["checks"] = report.checks(summary)
    return summary


def test_agreeing_figures_say_nothing_and_the_ceiling_share_is_reported():
    s = _summary(ratio=2.5, gain_a=5.0, removed_drop=20.0)
    assert report.contradictions(s["checks"]) == {}
    assert s["checks"]["addition_share_of_label_ceiling"] == pytest.approx((5.0 + 10.0) / (20.0 + 20.0))
    assert s["checks"]["negation_share_of_label_ceiling"] == pytest.approx(20.0 / 40.0)
    assert s["checks"]["negation_control_drop_control_x"] == pytest.approx(4.0)
    text = report.cells_section(s, "addition", "cross-family", 0.5) + report._said(s, "addition")
    assert "Contradicts" not in text and "reach 38% of its gain." in text and "labelled ceiling" in text and "no ceiling" not in text


def test_each_contradiction_is_said_beside_its_figure():
    s = _summary(ratio=0.76, gain_a=-1.0, removed_drop=-0.5)
    said = report.contradictions(s["checks"])
    assert set(said) == {"similarity", "addition", "negation"}
    sim = report.similarity_section(s)
    assert "similarity ratio (raw descriptors) is 0.76, below 1" in sim
    assert "centred descriptors) is" not in sim  # the centred ratio, 2.0, agrees with the paper
    assert "| centred (within each task's prompts) | 0.50 | 0.25 | 2.00 |" in sim
    assert "addition gain on task A is -1.00 points" in report._said(s, "addition")
    assert "task B" not in " ".join(said["addition"])  # +10 on task B agrees
    assert "negation spares the task" in report._said(s, "negation") and "+0.50 points" in report._said(s, "negation")


def test_a_gain_of_exactly_zero_and_a_ratio_just_below_one_are_contradictions():
    said = report.contradictions({"addition_gain_task_b": 0.0, "similarity_ratio": 0.999, "negation_removed_drop": 0.01})
    assert set(said) == {"addition", "similarity"}


def test_a_reference_that_the_transfer_beats_is_called_no_ceiling():
    s = _summary(ratio=2.5, gain_a=30.0, removed_drop=20.0)  # gains 30 + 10 against the reference's 20 + 20
    assert "reach 100% of its gain." in report._said(s, "addition")
    s = _summary(ratio=2.5, gain_a=35.0, removed_drop=20.0)
    assert "reach 112% of its gain: above 100%, so on this run it is no ceiling" in report._said(s, "addition")
