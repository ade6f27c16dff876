"""Each default is written once, on its class; the docs and the CLI quote the same values."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from platonic_sdk import OperatorBank, linalg, ridge
from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.evaluate.measure.workspace import Workspace
from platonic_sdk.evaluate.plan.settings import CellSettings, ExperimentConfig
from platonic_sdk.worlds.registry import world_spec

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _default(fn, name):
    import inspect

    return inspect.signature(fn).parameters[name].default


def test_library_ridges_are_read_from_one_place():
    for fn in (Workspace.__init__, linalg.ridge_solver):
        assert (_default(fn, "ridge_a"), _default(fn, "ridge_b")) == (ridge.RIDGE_A, ridge.RIDGE_B)
    # OperatorBank and `platonic bank` / `edit` leave the choice to the one rule (ridge.ridge_rule): the paper's
    # factors for a model outside the worlds' zoos
    assert (_default(OperatorBank.__init__, "ridge_a"), _default(OperatorBank.__init__, "ridge_b")) == (None, None)
    bank = cli_parser.build_parser().parse_args(["bank"])
    assert (bank.ridge_a, bank.ridge_b) == (None, None)
    assert ridge.ridge_rule(None)[:2] == (ridge.RIDGE_A, ridge.RIDGE_B)


def test_grid_options_default_to_the_classes_and_the_worlds():
    args = cli_parser.build_parser().parse_args(["grid", "--out", "x"])
    for name in ("addition_strength", "negation_strength", "weight_space_strength", "ridge_a", "ridge_b", "sweep_strengths", "sweep_cells", "similarity_probes",
                 "train_per_class", "test_per_class"):
        assert getattr(args, name) is None, name  # None: the classes' (or the world's) value is used
    help_text = " ".join(cli_parser._subparser(cli_parser.build_parser(), "grid").format_help().split())
    assert f"fixed strength on addition cells (under a strength rule, that of the methods the rule does not choose for) " \
           f"({attrs.fields(CellSettings).addition_strength.default})" in help_text
    assert f"({ExperimentConfig().sweep_cells}; 0: all)" in help_text


def test_the_docs_quote_the_worlds_and_the_librarys_ridges():
    image, audio = world_spec("image").settings(), world_spec("audio").settings()
    quoted = f"image {image.ridge_a:g} / {image.ridge_b:g} and audio {audio.ridge_a:g} / {audio.ridge_b:g}"
    for page in ("user_guide.md", "method.md"):
        assert quoted in " ".join((DOCS / page).read_text().split()), page
    guide = " ".join((DOCS / "user_guide.md").read_text().split())
    library = re.search(r"the library's defaults \(ridges (\S+) / (\S+)\)", guide)
    assert library and (float(library[1]), float(library[2])) == (ridge.RIDGE_A, ridge.RIDGE_B)
    assert not re.search(r"RIDGE_A/B|world's ridge \(0\.1\)", guide)
