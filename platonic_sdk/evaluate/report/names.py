"""What a report calls things: the slots of a cell's table, the methods, the strength rules, the damage sets.

One place for the words, so that the summary, the tables, the figures and the glossary say the same thing.
"""

from __future__ import annotations

from typing import Iterable

from ...errors import PlatonicError
from ...strength import DEFAULT_STRENGTH_RULE
from ..measure.cells import GROUPS
from ..measure.methods import method

SLOTS = {"addition": ("task_a", "task_b"), "negation": ("removed",)}
ORDER = [(kind, group) for kind in SLOTS for group in reversed(GROUPS)]  # cross-family first
SLOT_NAMES = {"task_a": "task A", "task_b": "task B", "removed": "removed task", "control": "control"}
# The sets whose drop is damage, by the field of a cell that lists them (frontier.DAMAGE, cells.kept_sets), as the
# report names them: one column each where damage is shown.
DAMAGE_WORDS = {"controls": "control set", "others": "other task"}
KEPT = "kept set"  # a set of either kind, where damage is the worst over both


def damage_fields(listed: Iterable[str]) -> list[str]:
    """The damage kinds (DAMAGE_WORDS' fields) among `listed`, the fields a report's cells list, in DAMAGE_WORDS' order:
    a run made before the other tasks were kept shows its control sets alone."""
    listed = set(listed)
    return [f for f in DAMAGE_WORDS if f in listed] or list(DAMAGE_WORDS)[:1]

KEPT_DROP = f"worst {KEPT}'s drop (control sets and other transfer tasks alike)"  # the damage a frontier reads, in words
# The methods that fold at the strength a strength rule chooses per cell (the settings' strength_rule); every
# other method keeps the fixed strengths (CellSettings' docstring); closed_form_<space> follow it too.
RULED = ("closed_form", "oracle", "label_reference")
METHODS_RULED_WORDS = "the closed form, the oracle and the labelled reference"  # RULED, in words


def group_key(kind: str, group: str) -> str:
    """report.json's key of a kind's summary in a group: `addition`, `addition_same_model`, ..."""
    return kind if group == "cross-family" else f"{kind}_{group.replace('-', '_')}"


def space_label(space: str) -> str:
    """A descriptor space as reports write it: `pseudo_label` -> `pseudo-label`."""
    return space.replace("_", "-")


def method_label(name: str, space: str | None = None) -> str:
    """A method's name in reports (its registered label; a method this process does not know, by its name); the
    closed form's names its descriptor space (`space`, the run's)."""
    try:
        label = method(name).label
    except PlatonicError:
        label = name
    return f"{label}, {space_label(space)} descriptors" if name == "closed_form" and space else label


def follows_rule(name: str) -> bool:
    """Whether method `name` folds at the strength the run's strength rule chooses per cell (when it has one)."""
    return name in RULED or (name.startswith("closed_form_") and not name.startswith("closed_form_strength_"))


def rule_name(rule: str | None) -> str:
    """A strength rule by the name a user gives it: the default rule is `auto`; None is `fixed`."""
    return "fixed" if rule is None else "auto" if rule == DEFAULT_STRENGTH_RULE else rule


def fixed_words(addition: float, negation: float) -> str:
    """The fixed strengths in words: "fixed: 0.5 addition / 1.0 negation"."""
    return f"fixed: {strength_str(addition)} addition / {strength_str(negation)} negation"


def chosen_words(rule: str) -> str:
    """Strengths a rule chose: "chosen per cell by auto"."""
    return f"chosen per cell by {rule_name(rule)}"

def strength_str(value: float) -> str:
    """A fixed strength as reports write it: 0.5, 1.0, 0.25 (whole numbers keep their ".0")."""
    text = f"{value:g}"
    return text if "." in text or "e" in text else f"{text}.0"
