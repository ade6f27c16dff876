"""The decision runner with keep sets (issue 33 item 4): a candidate may keep labels (SPACE/auto/labels, or an object in
the protocol file), spending each world's budgets; the damage a protocol judges is a field of its file (default: the
control sets, what round 3's limits were judged on; or the control sets and the other transfer tasks), and the tables
show the worst control set and the worst other task each on its own. Hand-built records, no model."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.decide.figures import figures
from platonic_sdk.evaluate.decide.judge import judge
from platonic_sdk.evaluate.decide.measure import candidate_settings
from platonic_sdk.evaluate.decide.protocol import Candidate, load_protocol, protocol_from
from platonic_sdk.evaluate.decide.tables import candidates_table
from platonic_sdk.strength import DEFAULT_STRENGTH_RULE
from platonic_sdk.worlds.registry import world_spec
from platonic_sdk.zoo_settings import MANIFEST

ROUND_3 = Path(__file__).resolve().parents[1] / "benchmarks" / "protocols" / "round_3.json"
LABELS = "blend/auto/labels"


def test_a_candidate_may_keep_labels_written_as_text_or_as_an_object():
    text = Candidate.parse(LABELS)
    assert (text.space, text.rule, text.keep, text.confidence, text.name) == ("blend", "auto", "labels", None, LABELS)
    sure = Candidate.parse("blend/auto/labels@0.84")
    assert sure == Candidate.parse({"space": "blend", "rule": "auto", "keep": "labels", "confidence": 0.84})
    assert (sure.confidence, sure.name) == (0.84, "blend/auto/labels@0.84")
    probes = Candidate.parse({"space": "affinity", "rule": "least_squares_off_task"})
    assert probes == Candidate.parse("affinity/least_squares_off_task") and probes.keep == "probes"


@pytest.mark.parametrize("value, words", [
    ("blend/least_squares/labels", "labelled keep sets are read by the budget rule, written auto (blend/auto/labels)"),
    ("blend/auto", "name the rule, not 'auto'"),
    ("blend/fixed@0.8", "a confidence is read with labelled keep sets alone"),
    ("blend/auto/labels@0.4", "confidence is a probability between 0.5 and 1"),
    ("blend/auto/labels@high", "the confidence after @ must be a finite number"),
    ("blend/auto/grids", "keep is probes or labels, got 'grids'"),
    ({"space": "blend", "rule": "auto", "keep": "labels", "budget": 3}, "a candidate: unknown key 'budget'"),
])
def test_a_candidate_that_cannot_be_run_is_refused_in_one_line(value, words):
    with pytest.raises(PlatonicError) as error:
        Candidate.parse(value)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_a_labels_candidate_spends_the_worlds_budgets():
    protocol = load_protocol(ROUND_3)
    settings = candidate_settings(protocol, Candidate.parse("blend/auto/labels@0.84"), "audio")
    manifest = json.loads((world_spec("audio").zoo / MANIFEST).read_text())["settings"]
    assert (settings.keep, settings.strength_rule, settings.confidence) == ("labels", DEFAULT_STRENGTH_RULE, 0.84)
    assert (settings.addition_budget, settings.negation_budget) == (manifest["addition_budget"], manifest["negation_budget"])
    assert (settings.centre, settings.anchor, settings.space) == (protocol.centre, protocol.anchor, "blend")
    plain = candidate_settings(protocol, protocol.candidates[2], "audio")  # blend/least_squares_off_task: the probes, no budget
    assert (plain.keep, plain.addition_budget) == ("probes", None)
    assert candidate_settings(protocol, Candidate.parse(LABELS)).addition_budget is None  # no world: the library's, at the bank


def test_round_3_judges_the_control_sets_and_a_protocol_may_judge_every_kept_set():
    data = json.loads(ROUND_3.read_text())
    assert load_protocol(ROUND_3).damage == ("controls",)  # the file names none: what its limits were judged on
    assert protocol_from({**data, "damage": ["controls", "others"]}).damage == ("controls", "others")
    for wrong in (["other"], ["controls", "controls"]):
        with pytest.raises(PlatonicError, match="damage lists the kinds of kept set whose drop is damage, each once, among controls, others"):
            protocol_from({**data, "damage": wrong})


def _runs(name: str) -> dict:
    """One image replicate, one addition and one negation cell: the closed form gains 5 (removes 6), its control c drops
    1 and its other task o drops 4; the labelled reference moves nothing."""
    zero = {"t": 50.0, "c": 80.0, "o": 60.0}

    def record(method, kind, moved, c, o, strengths=None):
        acc = {"t": 50.0 + (moved if kind == "addition" else -moved), "c": 80.0 - c, "o": 60.0 - o}
        out = {"key": kind, "kind": kind, "target": "x", "group": "cross-family", "method": method, "tasks": ["t"], "controls": ["c"],
               "others": ["o"], "zero_shot": zero, "accuracy": acc}
        return out if strengths is None else {**out, "strengths": strengths, "accuracy": {s: [zero[s], v] for s, v in acc.items()}}

    sweep = [record(m, k, 4.0, 0.5, 2.0, [0.0, 1.0]) for m in ("closed_form_affinity", "closed_form_blend", "label_reference_norm_affinity")
             for k in ("addition", "negation")]
    points = [record("closed_form", "addition", 5.0, 1.0, 4.0), record("closed_form", "negation", 6.0, 1.0, 4.0),
              record("reference", "addition", 0.0, 0.0, 0.0), record("reference", "negation", 0.0, 0.0, 0.0)]
    return {"image": [{"world": "image", "seed": 1, "describe": {}, "sweep": sweep, "points": {name: points}}]}


def test_the_damage_judged_is_the_protocols_and_the_tables_show_each_kind():
    base = attrs.evolve(load_protocol(ROUND_3), worlds=("image",), candidates=(Candidate.parse(LABELS),), criteria=())
    controls, every = base, attrs.evolve(base, damage=("controls", "others"))
    runs = _runs(LABELS)
    judged = {p.damage: figures(p, runs)["image"]["candidates"][LABELS]["addition"] for p in (controls, every)}
    assert (judged[("controls",)]["worst_drop"], judged[("controls",)]["worst_set"]) == (1.0, "c")
    assert (judged[("controls", "others")]["worst_drop"], judged[("controls", "others")]["worst_set"]) == (4.0, "o")
    assert judged[("controls",)]["damage"] == judged[("controls", "others")]["damage"] == {"controls": [1.0, "c"], "others": [4.0, "o"]}
    # the image addition limit is 3: the other task breaks it only where the protocol judges every kept set
    assert [v.met for v in judge(controls, figures(controls, runs))["image"][LABELS] if v.control_limit] == [True, True]
    assert [v.met for v in judge(every, figures(every, runs))["image"][LABELS] if v.control_limit] == [False, True]
    table = candidates_table(every, figures(every, runs), judge(every, figures(every, runs)))
    header, rule, row = table.splitlines()
    assert header.count("|") == rule.count("|") == row.count("|") == 8  # seven columns
    assert "| worst control set: addition; negation | worst other task: addition; negation |" in header
    assert f"| image | {LABELS} | " in row and "| 1.0 (c); 1.0 (c) | 4.0 (o); 4.0 (o) |" in row
