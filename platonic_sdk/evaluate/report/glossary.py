"""The glossary at the end of a report: each term the report uses, in a line of plain words, and only those.

A term is listed when its pattern occurs in the report's text (the results and the settings), in the order of
TERMS, which goes from the cells to the studies. Sections cite docs/method.md.
"""

from __future__ import annotations

import re
from typing import Sequence

from ...errors import PlatonicError
from ...strength import DEFAULT_STRENGTH_RULE, STRENGTH_RULES, strength_rule

AUTO = ("auto", f"the default strength rule ({DEFAULT_STRENGTH_RULE}): per cell, the strength that best fits the "
        "descriptor on the task's probes by least squares while the other tasks' probes are held still; it reads the target and "
        "unlabelled probes, never a label, a control set or a test item (sec. 17), unless the run keeps labels (keep labels). The closed form, the oracle and the labelled "
        "reference follow it; the other methods keep the fixed strengths.")
# (term, the pattern that shows it is used, its definition)
TERMS: tuple[tuple[str, str, str], ...] = (
    ("cell", r"\bcells?\b", "one edit, evaluated: a target model, the source model(s) whose descriptors it receives, and the "
     "task(s) (docs/method.md sec. 8). Every table is a mean over cells."),
    ("addition, negation", r"\b(addition|negation)\b", "a two-task addition adds to the target the descriptors of two tasks, each "
     "from a source model; a negation subtracts one task's descriptor, to remove that task."),
    ("task A, task B, removed task", r"task A|removed task", "an addition cell's two tasks; a negation cell's task, whose accuracy "
     "should fall."),
    ("cross-family, same-architecture, same-model", r"cross-family|same-architecture|same-model", "cell groups, by what the sources "
     "are to the target: models of another family (the paper's setting), of the target's architecture, or the target itself."),
    ("zero-shot", r"zero-shot", "the target as pretrained, classifying an item by its similarity to each class's text prompt; "
     "every gain and drop is measured from it."),
    ("points", r"\bpoints?\b", "percentage points of accuracy."),
    ("descriptor (UTD)", r"descriptor|UTD", "the Universal Task Descriptor: how a fine-tune moved a model's affinities between "
     "the probes and the task's class prompts; a probes x classes matrix of the same shape on every model, so it moves between "
     "models (sec. 2)."),
    ("probe, grid", r"\bprobes?\b|\bgrids?\b", "probes: unlabelled train items of a task (the setting per_class per class); the grid: "
     "the probes with the task's class prompts, where descriptors are measured (sec. 1)."),
    ("closed form", r"closed form", "the method: a descriptor solved by ridge least squares into a linear operator A, folded into "
     "the target's last affine map as z -> z + strength A s (sec. 4)."),
    ("affinity", r"\baffinity\b", "affinity descriptors, the paper's: the change of the raw probe-prompt affinities (sec. 2)."),
    ("blend", r"\bblend\b", "blend descriptors, the default: the row-centred affinity change plus the confidence-weighted change "
     "of predictions, each normalised, then scaled to the affinity descriptor's norm (sec. 15)."),
    ("probability, pseudo-label, confidence", r"\b(probability|pseudo-label|confidence) descriptors", "descriptors measured on "
     "the target's predictions instead of its affinities (sec. 15)."),
    ("strength", r"\bstrengths?\b", "how far an edit is folded in: z -> z + strength A s. Fixed strengths are the same for every "
     "cell: the paper's 0.5 on additions and 1.0 on negations."),
    ("Random-UTD", r"Random-UTD", "random descriptors of the same norms, solved and folded like the real ones: they should not "
     "help, so that a gain comes from what a descriptor says, not from its size."),
    ("single A, single B", r"single [AB]|single term", "the closed form with only one of an addition cell's two descriptors."),
    ("oracle", r"\boracle\b", "the closed form fed the target's own fine-tune's descriptor instead of a transferred one: it needs "
     "the target's fine-tune, so it locates the transfer's error; it is not deployable."),
    ("labelled reference", r"labelled reference", "the closed form fed descriptors made from the probes' true labels (one-hot "
     "minus 1/M, norm-matched): labels the method never sees; a reference for what a labelled grid gives, neither a baseline to "
     "beat nor a ceiling (sec. 12). A method's share of it: its gain (negation: removed-task drop) over the reference's."),
    ("alignment baseline", r"alignment baseline", "a Procrustes or least-squares map between two models' probe embeddings "
     "carries the source's embedding change into the target: the obvious alternative, not the method (sec. 16)."),
    ("weight space", r"weight[- ]space", "a source's fine-tune's weight change added to the target's weights (task arithmetic and "
     "other merging methods); only between models of one architecture (sec. 7)."),
    ("LoRA route", r"LoRA", "the paper's second route: a low-rank adapter fitted on the grid to realise the descriptor, its edit "
     "scaled by the strength (sec. 5)."),
    ("control set", r"\bcontrols?\b|control_", "a data set no edit is about, never probed or fitted: its drop from zero-shot is "
     "what an edit breaks (sec. 8)."),
    ("other task", r"other tasks?\b", "a transfer task of the run that a cell does not edit (the bank's other tasks): its drop "
     "from zero-shot is damage too, as a control set's is."),
    ("kept set", r"kept sets?\b", "a set a cell's edit must leave alone: a control set or another transfer task. Damage is the "
     "worst kept set's drop; reports show the worst control set and the worst other task each on its own."),
    ("worst control set", r"worst control", "the control set whose mean accuracy drops most: the damage that a mean over the "
     "sets hides."),
    ("keep labels", r"keep labels|labelled train splits", "the strength rule reads the labelled train splits of the controls and "
     "the other transfer tasks, as a user holds eval sets of their other tasks, and spends a budget of accuracy points on "
     "them at a stated confidence (sec. 18); never a scored test item, nor a label of the edited task."),
    ("strength sweep", r"\bsweep|\bswept\b", "every swept cell evaluated again at each of a list of fixed strengths."),
    ("frontier", r"\bfrontiers?\b", "a method's mean gain (negation: removal) against the worst kept set's drop (control sets "
     "and other tasks alike) over the strength sweep; \"within 1\" and \"within 3\": the best gain whose worst drop stays "
     "within 1 or 3 points. A point above a method's frontier gains more than any of its fixed strengths for the same damage."),
    ("run's point", r"run's (own )?point|run's strengths", "the run's own place on a frontier: the swept cells, each edited at the "
     "strength the run used (the fixed one, or the one its strength rule chose for that cell)."),
    ("held-out transfer", r"[Hh]eld-out", "two related tasks' operators summed and evaluated on a third task whose items and class "
     "names entered no fit (sec. 8)."),
    ("accumulation", r"[Aa]ccumulation", "J tasks composed on one target, at the fixed strength and at the strength divided by J."),
    ("normalised accuracy", r"normalised", "accuracy over the target's own fine-tuned accuracy on the task."),
    ("guarantee", r"[Gg]uarantee", "an item is guaranteed when its top-1 margin exceeds twice the most an edit can move one of its "
     "logits: its prediction cannot change (sec. 8)."),
    ("similarity ratio", r"similarity", "the mean cosine of one task's descriptors on different models over that of one model's "
     "descriptors of different tasks: above 1, a descriptor carries the task more than the model (sec. 2)."),
    ("centre", r"\bcentred?\b", "centred descriptors: each probe's row centred over the task's prompts, dropping an offset no "
     "prediction reads (sec. 12); the setting lists the cell kinds that centre."),
    ("anchor", r"\banchor", "anchored solves hold still the probes of the tasks that read other attributes (sec. 13); the setting "
     "lists the cell kinds that anchor."),
    ("ridge_a, ridge_b", r"ridge_[ab]", "the closed form's ridge on the probes' side and on the prompts' side (sec. 4)."),
    ("OrthoReg", r"OrthoReg", "fine-tuning with a penalty that keeps task vectors orthogonal, so that merged ones interfere less "
     "(sec. 7)."),
)


def rule_terms(names: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    """Strength rules other than auto's, by name, each with its registered summary (an unregistered plug-in's: none)."""
    out = []
    for name in dict.fromkeys(names):
        if name != DEFAULT_STRENGTH_RULE:
            try:
                summary = f": {strength_rule(name).summary}"
            except PlatonicError:  # a plug-in rule this process has not registered
                summary = ""
            out.append((name, rf"\b{re.escape(name)}\b", f"a strength rule{summary} (sec. 17)."))
    return tuple(out)


def used_terms(text: str, rule: str | None = None) -> list[tuple[str, str]]:
    """(term, definition) of each term whose pattern occurs in `text`, in the glossary's order; then the run's strength
    `rule` (auto by that name), and the other built-in rules that `text` names."""
    found = [(term, definition) for term, pattern, definition in TERMS if re.search(pattern, text)]
    found += [AUTO] if rule == DEFAULT_STRENGTH_RULE else []
    return found + [(term, definition) for term, pattern, definition in rule_terms([*STRENGTH_RULES, *([rule] if rule else [])])
                    if term == rule or re.search(pattern, text)]


def glossary_section(text: str, rule: str | None = None) -> str:
    """## Glossary of the terms `text` uses (`rule`: the run's strength rule)."""
    return "## Glossary\n\n" + "\n".join(f"- **{term}**: {definition}" for term, definition in used_terms(text, rule))
