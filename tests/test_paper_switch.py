"""One switch for the paper's exact method: `CellSettings.paper()` in Python, `--paper` on `platonic demo` and
`platonic grid` (affinity descriptor, no centring, no anchors, strengths 0.5 / 1.0), and `--space` on the demo."""

from __future__ import annotations

import attrs
import pytest

from platonic_sdk import cli
from platonic_sdk.cli_values import kind_options
from platonic_sdk.demo import demo_config
from platonic_sdk.evaluate.settings import CellSettings
from platonic_sdk.spaces import DEFAULT_SPACE
from platonic_sdk.worlds.registry import world_spec

from test_cli_errors import refused

PAPER_BY_HAND = {"space": "affinity", "centre": (), "anchor": (), "addition_strength": 0.5, "negation_strength": 1.0,
                 "strength_rule": None}


def test_the_python_preset_is_the_papers_method():
    paper = CellSettings.paper({"lr": 1e-3}, seed=3)
    assert {k: getattr(paper, k) for k in PAPER_BY_HAND} == PAPER_BY_HAND
    assert paper.lora == {"lr": 1e-3} and paper.seed == 3
    default = CellSettings()
    assert default.space == DEFAULT_SPACE and default.centre and default.anchor and default != CellSettings.paper()  # centring, anchors


def _args(*argv: str):
    args = cli.parse(cli.build_parser(), list(argv))
    cli.apply_paper(args)
    return args


def test_paper_on_the_grid_is_the_flags_it_stands_for():
    paper = vars(_args("grid", "--paper", "--out", "run"))
    spelled = vars(_args("grid", "--space", "affinity", "--centre", "none", "--anchor", "none", "--addition-strength", "0.5",
                         "--negation-strength", "1.0", "--out", "run"))
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
    ruled = _args("demo", "--space", "blend", "--strength-rule", "auto")  # the setting that kept every control limit (method page sec. 15.1)
    assert demo_config("image", **kind_options(ruled), space=ruled.space, strength_rule=ruled.strength_rule).settings == attrs.evolve(
        demo_config("image").settings, space="blend", strength_rule="least_squares_off_task")


@pytest.mark.parametrize("command,flag", [("demo", ("--space", "blend")), ("demo", ("--centre", "all")),
                                          ("demo", ("--strength-rule", "auto")),
                                          ("grid", ("--negation-strength", "2"))])
def test_paper_is_refused_beside_a_flag_it_sets(command, flag, tmp_path, capsys):
    refused(capsys, tmp_path, f"drop {flag[0]}", command, "--paper", *flag, "--out", "run")


def test_reports_name_the_closed_form_by_its_space():
    """A run's tables name the closed form by the run's descriptor space (the run's space: the default, or blend under --space blend),
    never "ours" beside the paper's figures, which the paper measured with its own (affinity) descriptor."""
    from platonic_sdk.evaluate import report

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
        assert "--paper" in flat and "CellSettings.paper()" in flat and 'space="affinity"' in flat, page
