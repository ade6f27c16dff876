"""The decision protocol's criteria, choice and hold (evaluate/decide/judge.py), on hand-built figures tables whose
answers are worked out by hand in each test; and the figures themselves (figures.py) from hand-built records."""

from __future__ import annotations

import copy

import pytest

from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.decide.figures import figures
from platonic_sdk.evaluate.decide.judge import broken, choose, hold, judge, ranking
from platonic_sdk.evaluate.decide.protocol import protocol_from

A, B, C = "affinity/fixed", "blend/fixed", "blend/least_squares_off_task"
# one frontier for every swept method: (drop, gain) = (0, 0), (1, 5), (4, 10) in strength order
LINE = {"drops": [0.0, 1.0, 4.0], "gains": [0.0, 5.0, 10.0]}


def make_protocol(**changes):
    data = {
        "worlds": ["image", "audio"], "candidates": [A, B, C],
        "settings": {"centre": ["negation"], "anchor": ["negation"], "fixed_strengths": {"addition": 0.5, "negation": 1.0}},
        "reference": {"frontier_space": "affinity", "point_space": "candidate"}, "frontiers": ["affinity"],
        "sweep_strengths": [0, 0.5, 1], "cells_per_kind": 2,
        "limits": {"image": {"addition": 3, "negation": 5}, "audio": {"addition": 3, "negation": 3}},
        "criteria": [{"type": "frontier", "name": "paper's frontier", "method": "closed_form_affinity", "tolerance": 1e-6}],
        "choice": {"order": "controls", "modalities": {"image": ["image"], "audio": ["audio"]}},
        "hold": {"max_control_limits": 0, "ranked_first": True},
        "seeds": {"development": [1, 2], "confirmation": [301]},
    }
    data.update(changes)
    return protocol_from(data)


def pt(gain, drop, per_task=None, reference=None):
    return {"gain": gain, "worst_drop": drop, "worst_set": "control", "cells": 1, "per_task": per_task or {},
            "reference_per_task": reference or {}, "seeds": {}}


def world(points):
    """A world's table: `points` {candidate: (addition point, negation point)}, LINE as every frontier."""
    frontiers = {k: {"closed_form_affinity": LINE, "reference": LINE} for k in ("addition", "negation")}
    return {"frontiers": frontiers, "candidates": {c: {"addition": a, "negation": n} for c, (a, n) in points.items()}}


def on_frontier(drop):
    """A point exactly on LINE at `drop` (0 <= drop <= 4)."""
    return pt(5 * drop if drop <= 1 else 5 + (drop - 1) * 5 / 3, drop)


def passing_table():
    """Every candidate on the frontier within every limit: A scores 2 x (5 + 5), B 2 x (8.33 + 8.33), C 2 x (0 + 0)."""
    return {w: world({A: (on_frontier(1), on_frontier(1)), B: (on_frontier(3), on_frontier(3)), C: (on_frontier(0), on_frontier(0))})
            for w in ("image", "audio")}


def names(verdicts, world, candidate):
    return [v.name for v in verdicts[world][candidate] if not v.met]


def test_control_limits_are_per_world_and_kind_and_inclusive():
    p, table = make_protocol(), passing_table()
    table["image"]["candidates"][A]["negation"] = on_frontier(4) | {"worst_drop": 4.0}  # image negation limit 5: met
    table["audio"]["candidates"][A]["negation"] = on_frontier(3) | {"worst_drop": 3.0}  # audio limit 3, exactly: met
    table["audio"]["candidates"][B]["negation"] = on_frontier(3.5)  # 3.5 > 3: broken on audio only
    v = judge(p, table)
    assert names(v, "image", A) == names(v, "audio", A) == []
    assert names(v, "audio", B) == ["control limit (3)"] and names(v, "image", B) == []
    limit = next(x for x in v["audio"][B] if x.control_limit and not x.met)
    assert (limit.kind, limit.value, limit.bound) == ("negation", 3.5, 3.0)


def test_frontier_criterion_interpolates_at_the_candidates_drop():
    p, table = make_protocol(), passing_table()
    table["image"]["candidates"][A]["addition"] = pt(7.5, 2.5)  # the frontier at 2.5: 5 + 1.5 * 5 / 3 = 7.5: on it
    table["image"]["candidates"][B]["addition"] = pt(7.4, 2.5)  # 0.1 below
    table["image"]["candidates"][C]["addition"] = pt(-1.0, -0.5)  # no swept point within -0.5: met
    v = judge(p, table)
    assert names(v, "image", A) == [] and names(v, "image", C) == []
    miss = [x for x in v["image"][B] if not x.met]
    assert [(x.kind, x.name, x.bound) for x in miss] == [("addition", "paper's frontier", pytest.approx(7.5))]


def test_a_frontier_share_scales_the_bound():
    p = make_protocol(criteria=[{"type": "frontier", "method": "reference", "share": 0.9, "worlds": ["audio"], "kinds": ["negation"]}])
    table = passing_table()
    table["audio"]["candidates"][A]["negation"] = pt(4.5, 1.0)  # 0.9 x 5 = 4.5: met
    table["audio"]["candidates"][B]["negation"] = pt(4.4, 1.0)
    table["image"]["candidates"][B]["negation"] = pt(0.0, 1.0)  # the criterion is audio's only
    v = judge(p, table)
    assert names(v, "audio", A) == [] and names(v, "image", B) == []
    assert names(v, "audio", B) == ["reference"]


def test_a_frontier_share_at_the_limit_reads_the_frontier_within_the_worlds_limit():
    """at "limit": share x the best gain within the world's limit (image addition 3: 5 + 2 x 5/3 = 8.33), whatever the
    candidate's own drop; at "drop" (the default) the same candidate, at drop 1, is judged against 5 only."""
    criterion = {"type": "frontier", "method": "closed_form_affinity", "share": 0.7, "kinds": ["addition"], "worlds": ["image"]}
    table = passing_table()
    table["image"]["candidates"][A]["addition"] = pt(5.9, 1.0)  # 0.7 x 8.33 = 5.83: met at the limit
    table["image"]["candidates"][B]["addition"] = pt(5.8, 1.0)  # under 5.83 at the limit; over 0.7 x 5 = 3.5 at its drop
    at_limit = judge(make_protocol(criteria=[{**criterion, "at": "limit"}]), table)
    assert names(at_limit, "image", A) == [] and names(at_limit, "image", B) == ["closed_form_affinity"]
    miss = next(x for x in at_limit["image"][B] if not x.met)
    assert miss.bound == pytest.approx(0.7 * (5 + 2 * 5 / 3)) and "within the limit 3" in miss.detail
    assert names(judge(make_protocol(criteria=[criterion]), table), "image", B) == []
    with pytest.raises(PlatonicError, match="at is one of drop, limit"):
        make_protocol(criteria=[{**criterion, "at": "ceiling"}])


def test_reference_share_reads_tasks_where_the_reference_gains_enough():
    p = make_protocol(criteria=[{"type": "reference_share", "name": "share", "share": 0.8, "floor": 3, "kinds": ["addition"]}])
    table = passing_table()
    # t1: 8 / 10 = 80% (met, inclusive); t2: the reference gains 2.5 < 3, ignored; t3: 1 / 1, ignored
    table["image"]["candidates"][A]["addition"] = pt(5, 1, {"t1": 8, "t2": 0, "t3": 1}, {"t1": 10, "t2": 2.5, "t3": 1})
    table["image"]["candidates"][B]["addition"] = pt(8.3, 3, {"t1": 7.9, "t2": 0}, {"t1": 10, "t2": 2.5})  # 79%
    table["image"]["candidates"][C]["addition"] = pt(0, 0, {"t2": 0}, {"t2": 2.5})  # no task qualifies: met
    v = judge(p, table)
    assert names(v, "image", A) == [] and names(v, "image", C) == []
    (miss,) = [x for x in v["image"][B] if not x.met]
    assert miss.value == pytest.approx(0.79) and "t1 79%" in miss.detail


def test_choice_among_candidates_meeting_everything_is_the_best_score_ties_in_protocol_order():
    p, table = make_protocol(), passing_table()
    assert choose(p, table, judge(p, table)).candidate == B  # 33.3 against 20 and 0
    tied = copy.deepcopy(table)
    for w in tied:
        tied[w]["candidates"][A] = copy.deepcopy(tied[w]["candidates"][B])
    assert choose(p, tied, judge(p, tied)).candidate == A  # equal scores: the first listed


def test_choice_per_modality_when_no_candidate_meets_every_world():
    p, table = make_protocol(), passing_table()
    table["audio"]["candidates"][B]["addition"] = on_frontier(3.2)  # B breaks audio's addition limit
    table["image"]["candidates"][A]["addition"] = pt(0, 1)  # A below the frontier on image
    table["image"]["candidates"][C]["addition"] = pt(-1, 1)  # C too: none meets every criterion on both worlds
    choice = choose(p, table, judge(p, table))
    assert choice.candidate is None and dict(choice.per_modality) == {"image": B, "audio": A}


def test_fallback_order_controls_first_or_criteria_first():
    """A breaks one control limit and nothing else; B breaks no limit but two frontier criteria; C breaks a limit
    and a criterion. Round 2's order (controls) prefers B; round 1's (task) prefers A."""
    table = passing_table()
    table["image"]["candidates"][A]["addition"] = on_frontier(3.2)
    table["image"]["candidates"][B]["addition"] = pt(0, 1)
    table["image"]["candidates"][B]["negation"] = pt(0, 1)
    table["image"]["candidates"][C]["addition"] = pt(0, 3.5)
    for order, first, rest in (("controls", B, [A, C]), ("task", A, [B, C])):
        p = make_protocol(choice={"order": order, "modalities": {}})
        v = judge(p, table)
        assert [len(broken(v, c, p.worlds, True)) for c in (A, B, C)] == [1, 0, 1]
        assert [len(broken(v, c, p.worlds)) for c in (A, B, C)] == [1, 2, 2]
        assert choose(p, table, v).candidate == first and ranking(p, table, v) == [first, *rest]


def test_fallback_ties_break_on_the_score_then_the_protocol_order():
    table = passing_table()
    for c in (A, B, C):  # each breaks one image addition limit; scores differ only through that point
        table["image"]["candidates"][c]["addition"] = pt({A: 20.0, B: 21.0, C: 21.0}[c], 3.5)
    p = make_protocol(choice={"order": "controls", "modalities": {}})
    v = judge(p, table)
    assert ranking(p, table, v)[0] == B  # B and C tie on broken counts and score: B is listed first
    assert choose(p, table, v).candidate == B


def test_hold_follows_round_3s_condition():
    table = passing_table()
    holds = hold(make_protocol(chosen=B), table, judge(make_protocol(), table))
    assert holds.holds and holds.reasons == ("breaks 0 control limit(s) (at most 0)", "ranked first by the order of preference")
    # the chosen one ranks below a candidate that meets more, though it breaks no limit
    lower = hold(make_protocol(chosen=C), table, judge(make_protocol(), table))
    assert not lower.holds and lower.reasons[1] == f"ranked below {A}, {B}"
    # the chosen one ranks first but breaks a control limit (every candidate does)
    broke = copy.deepcopy(table)
    for c in (A, B, C):
        broke["audio"]["candidates"][c]["negation"] = on_frontier(3.3)
    p = make_protocol(chosen=B)
    result = hold(p, broke, judge(p, broke))
    assert ranking(p, broke, judge(p, broke))[0] == B and not result.holds
    assert result.reasons[0] == "breaks 1 control limit(s) (at most 0): audio negation control limit (3)"
    with pytest.raises(PlatonicError, match="names no chosen candidate"):
        hold(make_protocol(), table, judge(make_protocol(), table))


def _record(method, kind, tasks, zero, acc, key="k"):
    return {"key": key, "kind": kind, "target": "t", "group": "cross-family", "method": method, "tasks": tasks,
            "controls": ["c1", "c2"], "zero_shot": zero, "accuracy": acc}


def test_figures_pool_cells_over_seeds_and_keep_each_seed():
    """Two seeds, one addition and one negation cell each. Seed 1's addition: tasks a, b move +10, +6 (gain 8), c1
    drops 3; seed 2's: +4, +4 (gain 4), c2 drops 5. Pooled: gain 6, c1 1.5, c2 2.5: worst c2."""
    zero = {"a": 50, "b": 50, "c1": 80, "c2": 70}
    p = make_protocol(worlds=["image"], limits={"image": {"addition": 3, "negation": 5}}, candidates=[A], choice={"order": "controls", "modalities": {}})

    def run(seed, acc_add, acc_neg, ref_add):
        sweep = [{**_record(m, k, ["a"], zero, {s: [zero[s], zero[s] - d] for s, d in (("a", 9), ("b", 0), ("c1", 1), ("c2", 0))}),
                  "strengths": [0.0, 1.0]} for m in ("closed_form_affinity", "label_reference_norm_affinity") for k in ("addition", "negation")]
        points = [_record("closed_form", "addition", ["a", "b"], zero, acc_add), _record("reference", "addition", ["a", "b"], zero, ref_add),
                  _record("closed_form", "negation", ["a"], zero, acc_neg), _record("reference", "negation", ["a"], zero, acc_neg)]
        return {"world": "image", "seed": seed, "sweep": sweep, "points": {A: points}}

    runs = {"image": [run(1, {"a": 60, "b": 56, "c1": 77, "c2": 70}, {"a": 40, "b": 50, "c1": 80, "c2": 69}, {"a": 55, "b": 55, "c1": 80, "c2": 70}),
                      run(2, {"a": 54, "b": 54, "c1": 80, "c2": 65}, {"a": 30, "b": 50, "c1": 81, "c2": 70}, {"a": 60, "b": 50, "c1": 80, "c2": 70})]}
    table = figures(p, runs)["image"]
    add = table["candidates"][A]["addition"]
    assert (add["gain"], add["worst_drop"], add["worst_set"], add["cells"]) == (6.0, 2.5, "c2", 2)
    assert add["per_task"] == {"a": 7.0, "b": 5.0} and add["reference_per_task"] == {"a": 7.5, "b": 2.5}
    assert add["seeds"]["1"]["gain"] == 8.0 and add["seeds"]["1"]["worst_set"] == "c1" and add["seeds"]["2"]["worst_drop"] == 5.0
    neg = table["candidates"][A]["negation"]
    assert (neg["gain"], neg["worst_drop"], neg["worst_set"]) == (15.0, 0.5, "c2")  # removal 10 and 20; c1 -0.5, c2 0.5
    assert table["frontiers"]["addition"]["reference"] == {"drops": [0.0, 1.0], "gains": [0.0, -9.0], "strengths": [0.0, 1.0]}
    assert table["frontiers"]["negation"]["closed_form_affinity"]["gains"] == [0.0, 9.0]
