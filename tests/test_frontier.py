"""Frontiers of a strength sweep (evaluate/frontier.py) against hand-worked examples."""

from __future__ import annotations

import math

import pytest

from platonic_sdk.evaluate.measure.frontier import DAMAGE, Curve, curve, curves, distance, gain_within, outcome, point, swept_at


def test_gain_within_takes_sweep_points_and_interpolates_between_two_of_them():
    # strengths 0, 0.5, 1, 2: (drop, gain) = (0, 0), (0.5, 6), (2, 10), (5, 14)
    drops, gains = [0.0, 0.5, 2.0, 5.0], [0.0, 6.0, 10.0, 14.0]
    assert gain_within(drops, gains, 2.0) == 10.0  # a sweep point exactly on the budget
    assert gain_within(drops, gains, 1.0) == pytest.approx(6.0 + (1.0 - 0.5) / (2.0 - 0.5) * 4.0)  # 7.333...
    assert gain_within(drops, gains, 3.0) == pytest.approx(10.0 + (3.0 - 2.0) / (5.0 - 2.0) * 4.0)  # 11.333...
    assert gain_within(drops, gains, 9.0) == 14.0


def test_gain_within_is_the_best_of_a_curve_that_turns_back():
    # past strength 1 the controls recover while the gain falls: the best within 3 is the peak at drop 2.5
    drops, gains = [0.0, 2.5, 4.0, 1.0], [0.0, 12.0, 9.0, 3.0]
    assert gain_within(drops, gains, 3.0) == pytest.approx(12.0)
    # within 1: the point (1, 3), and the first segment's crossing at drop 1: 12 * 1 / 2.5 = 4.8
    assert gain_within(drops, gains, 1.0) == pytest.approx(4.8)


def test_no_point_meets_the_budget():
    assert gain_within([1.5, 3.0, 6.0], [4.0, 8.0, 12.0], 1.0) is None  # a sweep without strength 0
    assert gain_within([], [], 3.0) is None
    with pytest.raises(ValueError, match="differ in length"):
        gain_within([0.0], [0.0, 1.0], 1.0)


def _record(key, method, kind, tasks, controls, zero, strengths, accuracy):
    return {"key": key, "method": method, "kind": kind, "group": "cross-family", "target": "t", "tasks": tasks,
            "controls": controls, "zero_shot": zero, "strengths": strengths, "accuracy": accuracy}


def test_curve_reads_the_worst_control_set_not_the_mean():
    zero = {"a": 50.0, "b": 40.0, "c1": 80.0, "c2": 60.0}
    # cell 1: tasks a, b; control c1 drops 0 then 4, c2 drops 0 then 1
    r1 = _record("x", "closed_form", "addition", ["a", "b"], ["c1", "c2"], zero, [0.0, 1.0],
                 {"a": [50.0, 60.0], "b": [40.0, 44.0], "c1": [80.0, 76.0], "c2": [60.0, 59.0]})
    # cell 2: control c1 drops 2, c2 drops 6
    r2 = _record("y", "closed_form", "addition", ["a", "b"], ["c1", "c2"], zero, [0.0, 1.0],
                 {"a": [50.0, 52.0], "b": [40.0, 42.0], "c1": [80.0, 78.0], "c2": [60.0, 54.0]})
    c = curve([r1, r2], "closed_form", "addition", "cross-family")
    assert c.strengths == (0.0, 1.0) and c.cells == 2
    assert c.gain == pytest.approx((0.0, ((10 + 4) / 2 + (2 + 2) / 2) / 2))  # 4.5
    # per set over cells: c1 (4 + 2) / 2 = 3, c2 (1 + 6) / 2 = 3.5: the worst is c2 (the mean over sets is 3.25)
    assert c.worst_drop == pytest.approx((0.0, 3.5)) and c.worst_set[1] == "c2"
    assert c.gain_within(1.0) == pytest.approx(4.5 / 3.5)
    assert c.point(0.5) == pytest.approx((1.75, 2.25)) and c.point(3.0) is None


def test_negation_gain_is_the_removal_and_each_method_gets_its_curve():
    zero = {"a": 70.0, "c": 90.0}
    records = [_record("n", m, "negation", ["a"], ["c"], zero, [0.0, 1.0, 2.0],
                       {"a": [70.0, 70.0 - 10 * k, 70.0 - 20 * k], "c": [90.0, 90.0 - k, 90.0 - 3 * k]})
               for m, k in (("closed_form", 1.0), ("oracle", 2.0))]
    found = {c.method: c for c in curves(records)}
    assert found["closed_form"].gain == pytest.approx((0.0, 10.0, 20.0))
    assert found["oracle"].worst_drop == pytest.approx((0.0, 2.0, 6.0))
    assert found["oracle"].gain_within(3.0) == pytest.approx(20.0 + (3.0 - 2.0) / (6.0 - 2.0) * 20.0)  # 25
    assert curve(records, "lora", "negation", "cross-family") is None


def test_distance_of_a_point_from_a_frontier():
    ref = Curve("closed_form", "addition", "cross-family", 3, (0.0, 0.5, 1.0), (0.0, 8.0, 12.0), (0.0, 1.0, 3.0), (None, "c", "c"))
    d = distance(ref, (2.0, 7.0))
    assert d["frontier_gain"] == pytest.approx(10.0) and d["below_frontier"] == pytest.approx(3.0)
    assert distance(ref, (-1.0, 0.0))["frontier_gain"] is None
    summary = ref.summary()
    assert summary["within"] == {"1": pytest.approx(8.0), "3": pytest.approx(12.0)}
    assert not math.isnan(summary["gain"][1])


def test_a_point_is_the_mean_gain_and_each_damage_set_s_mean_drop_over_cells_each_at_its_own_strength():
    # two addition cells edited at strengths of their own: cell x gains 10 on a and 4 on b, cell y 2 on a;
    # control c1 drops 4 (x) and 2 (y), c2 1 (x only); the other task o (a second kind of damage set) drops 5 on y
    x = {"tasks": ["a", "b"], "controls": ["c1", "c2"], "zero_shot": {"a": 50.0, "b": 40.0, "c1": 80.0, "c2": 60.0},
         "accuracy": {"a": 60.0, "b": 44.0, "c1": 76.0, "c2": 59.0}}
    y = {"tasks": ["a"], "controls": ["c1"], "others": ["o"], "zero_shot": {"a": 50.0, "c1": 80.0, "o": 70.0},
         "accuracy": {"a": 52.0, "c1": 78.0, "o": 65.0}}
    p = point([x, y], "addition", damage=("controls",))  # the control sets alone (the switch back)
    assert p.cells == 2 and p.gain == pytest.approx(((10 + 4) / 2 + 2) / 2)  # 4.5: each cell's mean over its tasks
    assert p.per_task == {"a": pytest.approx(6.0), "b": pytest.approx(4.0)}
    assert p.drops == {"c1": pytest.approx(3.0), "c2": pytest.approx(1.0)} and p.worst() == (pytest.approx(3.0), "c1")
    assert p.xy == (pytest.approx(3.0), pytest.approx(4.5))
    both = point([x, y], "addition")  # by default the other task's drop counts too (frontier.DAMAGE)
    assert DAMAGE == ("controls", "others") and both.drops == {**p.drops, "o": pytest.approx(5.0)}
    assert both.worst() == (pytest.approx(5.0), "o") and both.worst(["c1", "c2"]) == (pytest.approx(3.0), "c1")
    removal = point([x], "negation")  # negation: the removal, zero-shot minus edited
    assert removal.gain == pytest.approx(-7.0) and point([], "addition") is None
    assert math.isnan(point([{**y, "controls": [], "others": []}], "addition").worst_drop)


def test_a_curve_is_the_point_of_its_cells_at_each_strength_and_a_cell_record_reads_as_one():
    zero = {"a": 50.0, "c": 90.0}
    records = [_record(k, "closed_form", "addition", ["a"], ["c"], zero, [0.0, 1.0], {"a": [50.0, 50.0 + g], "c": [90.0, 90.0 - d]})
               for k, g, d in (("x", 10.0, 2.0), ("y", 6.0, 4.0))]
    c = curve(records, "closed_form", "addition", None)
    at_one = point(swept_at(records, 1.0), "addition")
    assert (c.gain[1], c.worst_drop[1], c.worst_set[1]) == (pytest.approx(at_one.gain), pytest.approx(at_one.worst_drop), "c")
    assert at_one.xy == (pytest.approx(3.0), pytest.approx(8.0))
    cell = {"tasks": ["a"], "controls": ["c"], "results": {"zero_shot": zero, "closed_form": {"a": 58.0, "c": 89.0}}}
    assert point([outcome(cell, "closed_form")], "addition").xy == (pytest.approx(1.0), pytest.approx(8.0))
