"""One switch for the paper's exact method, one source: presets/paper.json, read by `CellSettings.paper()` in Python,
`--paper` (`--preset paper`) on `platonic demo` and `platonic grid` (affinity descriptor, no centring, no anchors,
strengths 0.5 / 1.0), and `preset="paper"` in `Experiment.from_config`; and `--space` on the demo."""

from __future__ import annotations

import attrs
import pytest
from test_cli_errors import refused

from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.cli.demo import demo_settings
from platonic_sdk.cli.grid import grid_settings
from platonic_sdk.evaluate.plan.demo import demo_config
from platonic_sdk.evaluate.plan.presets import preset
from platonic_sdk.evaluate.plan.settings import CellSettings
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
    return cli_parser.parse(cli_parser.build_parser(), list(argv))


def test_the_paper_is_one_data_file():
    """What CellSettings.paper() holds is paper.json's method block, read as CellSettings fields."""
    method = preset("paper").method
    assert CellSettings(**method) == CellSettings.paper()
    assert {k: getattr(CellSettings.paper(), k) for k in PAPER_BY_HAND} == PAPER_BY_HAND
    assert preset("default").method["space"] == DEFAULT_SPACE  # the experiments' default space is the library's


def test_paper_on_the_grid_is_the_settings_it_stands_for():
    paper = grid_settings(_args("grid", "--paper", "--out", "run"))
    spelled = grid_settings(_args("grid", "--space", "affinity", "--centre", "none", "--anchor", "none", "--addition-strength", "0.5",
                                  "--negation-strength", "1.0", "--strength-rule", "fixed", "--out", "run"))
    assert paper.preset == "paper" and spelled.preset is None
    assert paper.cell_settings() == spelled.cell_settings() == CellSettings.paper()
    assert grid_settings(_args("grid", "--preset", "paper", "--out", "run")) == paper


def test_paper_on_the_demo_runs_the_preset_with_the_worlds_recipe():
    settings = demo_settings(_args("demo", "--paper", "--world", "audio"))
    config = demo_config("audio", 0, method=settings.preset, settings=settings.method_settings())  # as demo.main calls it
    assert config.settings == CellSettings.paper(world_spec("audio").settings().lora, 0)
    assert demo_config("image").settings.space == DEFAULT_SPACE
    spaced = demo_settings(_args("demo", "--space", "probability"))
    assert demo_config("image", settings=spaced.method_settings()).settings == attrs.evolve(demo_config("image").settings, space="probability")
    fixed = demo_settings(_args("demo", "--space", "affinity", "--strength-rule", "fixed"))  # the paper's descriptor at the fixed strengths
    assert demo_config("image", settings=fixed.method_settings()).settings == attrs.evolve(
        demo_config("image").settings, space="affinity", strength_rule=None, keep="probes", addition_budget=None, negation_budget=None)
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
