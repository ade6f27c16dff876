"""One switch for the paper's exact method: `CellSettings.paper()` in Python, `--paper` on `platonic demo` and
`platonic grid` (affinity descriptor, no centring, no anchors, strengths 0.5 / 1.0), and `--space` on the demo."""

from __future__ import annotations

import attrs
import pytest
from test_cli_errors import refused

from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.cli.demo import demo_config
from platonic_sdk.cli.values import kind_options
from platonic_sdk.evaluate.spec.settings import CellSettings
from platonic_sdk.spaces import DEFAULT_SPACE
from platonic_sdk.strength import DEFAULT_STRENGTH_RULE, FIXED
from platonic_sdk.worlds.registry import world_spec

PAPER_BY_HAND = {"space": "affinity", "centre": (), "anchor": (), "addition_strength": 0.5, "negation_strength": 1.0,
                 "strength_rule": None}


def test_the_python_preset_is_the_papers_method():
    paper = CellSettings.paper({"lr": 1e-3}, seed=3)
    assert {k: getattr(paper, k) for k in PAPER_BY_HAND} == PAPER_BY_HAND
    assert paper.lora == {"lr": 1e-3} and paper.seed == 3
    default = CellSettings()
    assert default.space == DEFAULT_SPACE and default.centre and default.anchor and default != CellSettings.paper()  # centring, anchors
    assert default.strength_rule == DEFAULT_STRENGTH_RULE  # the default pair (method page sec. 15.1, round 3)
    assert CellSettings(strength_rule=FIXED).strength_rule is None and CellSettings(strength_rule=None).strength_rule is None


def _args(*argv: str):
    args = cli_parser.parse(cli_parser.build_parser(), list(argv))
    cli_parser.apply_paper(args)
    return args


def test_paper_on_the_grid_is_the_flags_it_stands_for():
    paper = vars(_args("grid", "--paper", "--out", "run"))
    spelled = vars(_args("grid", "--space", "affinity", "--centre", "none", "--anchor", "none", "--addition-strength", "0.5",
                         "--negation-strength", "1.0", "--strength-rule", "fixed", "--out", "run"))
    assert paper.pop("paper") and not spelled.pop("paper")
    assert paper == spelled


def test_paper_on_the_demo_runs_the_preset_with_the_worlds_recipe():
    args = _args("demo", "--paper", "--world", "audio")
    config = demo_config("audio", args.seed, **kind_options(args), space=args.space, paper=args.paper)  # as demo.main calls it
    assert config.settings == CellSettings.paper(world_spec("audio").settings().lora, args.seed)
    plain = _args("demo")
    assert demo_config("image", **kind_options(plain), space=plain.space).settings.space == DEFAULT_SPACE
    spaced = _args("demo", "--space", "probability")
    assert demo_config("image", **kind_options(spaced), space=spaced.space).settings == attrs.evolve(
        demo_config("image").settings, space="probability")
    fixed = _args("demo", "--space", "affinity", "--strength-rule", "fixed")  # the paper's descriptor at the fixed strengths
    assert demo_config("image", **kind_options(fixed), space=fixed.space, strength_rule=fixed.strength_rule).settings == attrs.evolve(
        demo_config("image").settings, space="affinity", strength_rule=None)
    assert demo_config("image").settings.strength_rule == DEFAULT_STRENGTH_RULE


@pytest.mark.parametrize("command,flag", [("demo", ("--space", "blend")), ("demo", ("--centre", "all")),
                                          ("demo", ("--strength-rule", "auto")),
                                          ("grid", ("--negation-strength", "2"))])
def test_paper_is_refused_beside_a_flag_it_sets(command, flag, tmp_path, capsys):
    refused(capsys, tmp_path, f"drop {flag[0]}", command, "--paper", *flag, "--out", "run")


def test_reports_name_the_closed_form_by_its_space():
    """A run's tables name the closed form by the run's descriptor space (the run's space: the default, or blend under --space blend),
    never "ours" beside the paper's figures, which the paper measured with its own (affinity) descriptor."""
    from platonic_sdk.evaluate.report import render as report

    row = {"task_a": 60.0, "task_b": 55.0, "control": 70.0, "controls": {"c": 70.0}, "cells": 2}
    summary = {"addition": {"cells": 2, "zero_shot": row, "closed_form": {**row, "task_a": 70.0}}}
    for space in (DEFAULT_SPACE, "blend", "pseudo_label"):
        table = report.cells_section(summary, "addition", "cross-family", 0.5, space)
        assert f"| closed form, {space.replace('_', '-')} descriptors | 70.00 | 55.00 |" in table and "ours" not in table


def test_the_pages_name_the_default_space_and_the_paper_switch():
    """README and the user guide name the default space as the code has it, and the paper's switch."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for page in ("README.md", "docs/user_guide.md"):
        flat = " ".join((root / page).read_text().split())
        assert re.search(rf"`{DEFAULT_SPACE}`( space)? \(`platonic_sdk\.spaces\.DEFAULT_SPACE`", flat), page
        assert "--paper" in flat and "CellSettings.paper()" in flat and 'space="affinity"' in flat and "--strength-rule fixed" in flat, page
