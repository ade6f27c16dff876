"""The decision runner (evaluate/decide/runner.py): protocol files checked in one line, confirmation seeds refused
unless the protocol file is committed in git and unchanged (a temporary repository), the commit written into the
output, and the report printed from it. Measuring is replaced by hand-built records (runner._measure)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.decide import runner
from platonic_sdk.evaluate.decide.__main__ import main
from platonic_sdk.evaluate.decide.protocol import load_protocol
from platonic_sdk.evaluate.decide.provenance import committed, git_state

ROUND_3 = Path(__file__).resolve().parents[1] / "benchmarks" / "protocols" / "round_3.json"
A, B = "affinity/fixed", "blend/least_squares_off_task"
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def protocol_data(**changes):
    data = json.loads(ROUND_3.read_text())
    data.update(worlds=["image"], candidates=[A, B], criteria=data["criteria"][:1], cells_per_kind=1, chosen=B,
                choice={"order": "controls", "modalities": {}}, seeds={"development": [1], "confirmation": [9]})
    data.update(changes)
    return data


def fake_measure(protocol, seeds, progress, say):
    """One addition and one negation cell per seed: A gains 5 at a worst drop of 3.5 (over the image limit, 3) and
    removes 6 at 1; B gains 3 (removes 5) at 0.5; every swept method reaches gain 4 (removal 6) at drop 1, from 0 at
    drop 0, so B lies above the frontier (2 at 0.5) and meets every criterion, and A breaks one control limit."""
    zero = {"t": 50.0, "c": 80.0}

    def record(method, kind, gain, drop, strengths=None):
        sign = 1 if kind == "addition" else -1
        acc = {"t": 50 + sign * gain, "c": 80 - drop}
        out = {"key": kind, "kind": kind, "target": "x", "group": "cross-family", "method": method, "tasks": ["t"], "controls": ["c"],
               "zero_shot": zero, "accuracy": acc}
        if strengths is not None:
            out.update(strengths=strengths, accuracy={s: [zero[s], v] for s, v in acc.items()})
        return out

    figures = {A: (5, 3.5, 6, 1), B: (3, 0.5, 5, 0.5)}
    runs = {}
    for w in protocol.worlds:
        runs[w] = [{"world": w, "seed": s, "describe": {}, "sweep": [record(protocol.cell_method(m), k, 4 if k == "addition" else 6, 1, [0.0, 1.0])
                                                                      for m in protocol.swept() for k in ("addition", "negation")],
                    "points": {c: [record(m, k, *(figures[c][:2] if k == "addition" else figures[c][2:]))
                                   for m in ("closed_form", "reference") for k in ("addition", "negation")] for c in figures}}
                   for s in seeds]
    return runs


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "_measure", fake_measure)
    for key, value in GIT.items():
        monkeypatch.setenv(key, value)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_confirmation_seeds_are_refused_unless_the_protocol_is_committed_and_unchanged(repo):
    path = repo / "protocol.json"
    path.write_text(json.dumps(protocol_data()))
    with pytest.raises(PlatonicError, match=r"protocol\.json is not committed: confirmation seeds run only from a protocol committed"):
        runner.decide(path, "confirmation")
    git(repo, "add", "protocol.json")  # staged, never committed
    with pytest.raises(PlatonicError, match="is not committed"):
        runner.decide(path, "confirmation")
    git(repo, "commit", "-q", "-m", "protocol")
    commit = git(repo, "rev-parse", "HEAD")
    out = runner.decide(path, "confirmation", say=lambda _: None)
    assert out["protocol"]["git"]["state"] == "clean" and out["protocol"]["git"]["commit"] == commit
    assert out["hold"]["chosen"] == B and out["hold"]["holds"] and out["seeds"] == [9]
    assert f"commit {commit}" in runner.markdown(out)
    (repo / "other.txt").write_text("x")  # a later commit of another file: the protocol is still unchanged since its own
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "other")
    assert committed(path).commit == commit and committed(path).head != commit
    path.write_text(json.dumps(protocol_data(cells_per_kind=2)))  # modified after the commit
    with pytest.raises(PlatonicError, match=f"has changes since its last commit \\({commit}\\)"):
        runner.decide(path, "confirmation")
    with pytest.raises(PlatonicError, match="has changes since"):
        runner.decide(path, "all")  # every seed, confirmation ones among them
    git(repo, "add", "protocol.json")  # staged but not committed: still changed since the commit
    with pytest.raises(PlatonicError, match="has changes since"):
        runner.decide(path, "confirmation")


def test_development_seeds_run_from_an_uncommitted_file(repo, capsys):
    path = repo / "protocol.json"
    path.write_text(json.dumps(protocol_data()))
    out = runner.decide(path, "development", say=lambda _: None)
    assert out["protocol"]["git"]["state"] == "untracked" and out["protocol"]["git"]["commit"] is None
    assert out["choice"]["candidate"] == B and out["choice"]["reason"] == "meets every criterion on every world"
    assert git_state(ROUND_3).state in ("clean", "modified", "untracked")


def test_a_confirmation_needs_the_chosen_candidate(repo):
    path = repo / "protocol.json"
    data = protocol_data()
    del data["chosen"]
    path.write_text(json.dumps(data))
    git(repo, "add", "protocol.json")
    git(repo, "commit", "-q", "-m", "protocol")
    with pytest.raises(PlatonicError, match="names no chosen candidate"):
        runner.decide(path, "confirmation")


def test_the_command_writes_json_and_markdown_and_reads_them_back(repo, capsys):
    path = repo / "protocol.json"
    path.write_text(json.dumps(protocol_data()))
    assert main([str(path), "--json", str(repo / "dev.json"), "--markdown", str(repo / "dev.md")]) == 0
    printed = capsys.readouterr().out
    assert printed == (repo / "dev.md").read_text() + "\n"
    assert f"**Choice: {B}** (meets every criterion on every world)" in printed
    assert "| image | closed_form_affinity |" not in printed and "| image | addition | closed_form_affinity | +4.0 | +4.0 |" in printed
    again = runner.decide(path, "development", read=[repo / "dev.json"])
    assert again["figures"] == json.loads((repo / "dev.json").read_text())["figures"]
    with pytest.raises(PlatonicError, match=r"the files hold seeds \[1\] of world image; the stage's seeds are \[9\]"):
        runner.decide(path, "confirmation", read=[repo / "dev.json"])
    assert main([str(path), "--seeds", "confirmation"]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line


@pytest.mark.parametrize("change, message", [
    ({"candidates": ["blend/auto"]}, "candidates[0]: candidate 'blend/auto': name the rule, not 'auto'"),
    ({"candidates": ["blnd/fixed"]}, "candidates[0]: unknown descriptor space 'blnd'"),
    ({"limits": {"audio": {"addition": 3, "negation": 3}}}, "limits: no control limits for world(s) image"),
    ({"seeds": {"development": [1, 2], "confirmation": [2, 3]}}, "seeds: 2 are both development and confirmation seeds"),
    ({"chosen": "probability/fixed"}, "chosen: 'probability/fixed' is none of the candidates"),
    ({"criteria": [{"type": "frontier", "method": "closed_form_probability"}]}, "criteria[0]: method 'closed_form_probability' is not swept"),
    ({"criterion": []}, "unknown key 'criterion' (did you mean 'criteria'?)"),
    ({"hold": {"max_control_limits": 0}}, "hold: missing key(s) ranked_first"),
    ({"sweep_strengths": [0, 1, 0.5]}, "sweep_strengths must ascend without repeats"),
])
def test_a_bad_protocol_file_is_refused_in_one_line_naming_the_file(tmp_path, change, message):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(protocol_data(**change)))
    with pytest.raises(PlatonicError) as info:
        load_protocol(path)
    assert str(info.value).startswith(f"protocol file {path}: ") and message in str(info.value) and "\n" not in str(info.value)


def test_the_shipped_round_3_protocol_loads():
    p = load_protocol(ROUND_3)
    assert [c.name for c in p.candidates] == [A, "blend/fixed", B, "affinity/least_squares_off_task"]
    assert p.seeds["confirmation"] == (301, 302, 303) and p.chosen == B
    assert (p.frontier_space, p.point_space) == ("affinity", "candidate")  # round 3 ran with affinity the default space
    assert p.limits["audio"] == {"addition": 3.0, "negation": 3.0} and p.limits["real_audio"] == {"addition": 3.0, "negation": 5.0}
