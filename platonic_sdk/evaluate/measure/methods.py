"""Cell methods, by name: each evaluates one cell and returns accuracies (percent) by evaluation set.

A method is fn(workspace, cell, settings) -> {set: accuracy}, or None where it does not apply (an
oracle without the target's own fine-tunes, weight space across architectures). Built in:
zero_shot; closed_form (addition_strength * A(sum_l U_l), negation_strength * A(-U)); random_utd (Gaussian
descriptors of the same norms); single_a / single_b (one term of an addition); oracle (the target's
own descriptors); weight_space (theta + c sum_l tau_l on same-architecture cells, c the settings'
weight_space_strength) and weight_space_<method> for every merging method (finetune.merging:
task_arithmetic, ties, dare, tsv, iso_c; c chosen per cell on validation, merging.chosen_weight_space); lora (the LoRA
route fitted to the cell's composition, capped at 8 cells per kind and group: it re-encodes);
label_reference (label_reference.py: the closed form fed probe-label descriptors, a labelled reference).
Settings' `centre` kinds transfer row-centred descriptors in every solving method, and its `space` is the
descriptor space they transfer (docs/method.md sec. 15); closed_form_<space> runs the closed form in one space
whatever the settings say (one per space, plug-ins included: plan/registry.py's method families). Settings' `strength_rule`
has the closed form, the oracle and the labelled reference each choose the cell's strength for their own
descriptors without labels (cells.rule_folded; docs/method.md sec. 17), and
closed_form_strength_<rule> runs it at one rule's strength whatever the settings say. alignment /
alignment_lstsq (alignment.py): the representation-alignment baseline, a Procrustes or least-squares map of the
probe embeddings carrying the source's embedding change (docs/method.md sec. 16).
A new method is one function plus `register_method` (registry.py; docs/architecture.md shows an example).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import attrs

from ...descriptor import UTD, Composition
from ...edits.lora_edit import LoraEdit
from ...finetune.weightspace import merge_method
from ...linalg import unit_rows
from ...transfer.closed_form import GridState
from ...transfer.lora import LoraRouteConfig, fit_lora
from ..plan.registry import METHODS, CellMethod, MethodFn, method, register_method  # noqa: F401  (re-exported)
from ..plan.settings import CACHED, CellSettings
from .alignment import alignment
from .cells import Cell, cell_solve, eval_names, folded, kept_sets, rule_folded, signed_strength  # noqa: F401  (eval_names: for cell methods)
from .label_reference import label_reference
from .merging import chosen_weight_space, merged_weight_space
from .workspace import Workspace


def zero_shot(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float]:
    return ws.accuracies(cell.target, eval_names(ws, cell))


def closed_form(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float]:
    """sign * sum_l A(U_l) folded at the cell's strength: the settings' fixed one, or the one their strength_rule chooses."""
    terms = list(zip(cell.sources, cell.tasks))
    return rule_folded(ws, cell, settings, [ws.operator(cell.target, s, t, **cell_solve(ws, cell, settings, t)) for s, t in terms],
                       [ws.descriptor(s, t, settings.space) for s, t in terms])


def closed_form_at_rule(rule: str) -> CellMethod:
    """closed_form_strength_<rule>: the closed form at the strength `rule` chooses per cell from the other transfer tasks'
    probes, whatever the settings' rule and keep."""
    def fn(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float]:
        return closed_form(ws, cell, settings.with_rule(rule))
    return CellMethod(f"closed_form_strength_{rule}", fn, f"closed form, strength by rule {rule}")


def closed_form_in_space(space: str) -> CellMethod:
    """closed_form_<space>: the closed form transferring every descriptor in `space`, whatever the settings' space;
    None where a source is a descriptor stored in another space (without its fine-tune it cannot be recomputed)."""
    def fn(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float] | None:
        stored = [ws.finetuned.get((s, t)) for s, t in zip(cell.sources, cell.tasks)]
        if any(isinstance(f, UTD) and f.space != space for f in stored):
            return None
        return closed_form(ws, cell, attrs.evolve(settings, space=space))
    return CellMethod(f"closed_form_{space}", fn, f"closed form, {space.replace('_', '-')} descriptors")


def weight_space_chosen(merge: str) -> CellMethod:
    """weight_space_<merge>: the merging method `merge`, its strength chosen per cell on validation (merging.chosen_weight_space)."""
    return CellMethod(f"weight_space_{merge}", chosen_weight_space(merge),
                      f"weight space, {merge_method(merge).description} (strength on validation)")


def random_utd(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float]:
    terms = enumerate(zip(cell.sources, cell.tasks))
    return folded(ws, cell, settings, [ws.random_operator(cell.target, s, t, cell.seed + i, **cell_solve(ws, cell, settings, t))
                                       for i, (s, t) in terms])


def single(term: int) -> MethodFn:
    """One term of an addition cell alone (term 0: Single-A, 1: Single-B), solved as in the whole cell."""
    def fn(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float]:
        op = ws.operator(cell.target, cell.sources[term], cell.tasks[term], **cell_solve(ws, cell, settings, cell.tasks[term]))
        return folded(ws, cell, settings, [op])
    return fn


def oracle(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float] | None:
    """The closed form fed the target's own descriptors, at the cell's strength as the closed form's (under a strength
    rule: the strength the rule chooses for those descriptors); None where the target has no fine-tune of a task."""
    if not all((cell.target, task) in ws.finetuned for task in cell.tasks):
        return None
    return rule_folded(ws, cell, settings, [ws.operator(cell.target, cell.target, t, **cell_solve(ws, cell, settings, t)) for t in cell.tasks],
                       [ws.descriptor(cell.target, t, settings.space) for t in cell.tasks])


def lora(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float]:
    """The LoRA route's edit of the cell (lora_edit) at the cell's strength, the target re-encoded with it."""
    return ws.live_accuracies(cell.target, eval_names(ws, cell), lora_edit(ws, cell, settings).scaled(settings.strength_of(cell.kind)))


def lora_sweep(ws: Workspace, cell: Cell, settings: CellSettings, strengths: Sequence[float]) -> list[dict[str, float]]:
    """The LoRA route at each strength: one fit (lora_edit), its edit scaled by each strength (its LoRA scale)."""
    edit = lora_edit(ws, cell, settings)
    return [ws.live_accuracies(cell.target, eval_names(ws, cell), edit.scaled(c) if c else None) for c in strengths]


def lora_inputs(ws: Workspace, cell: Cell, settings: CellSettings) -> tuple[Composition, LoraRouteConfig, dict[str, GridState], tuple[str, ...]]:
    """What the cell's LoRA fit reads from the workspace: the composition sign * sum_l UTD_l (row-centred when the
    kind centres), the recipe (LoraRouteConfig(**settings.lora)), the target's bank states of the cell's grids
    and of the anchored tasks' grids, and the anchored tasks (when the kind anchors: the transfer tasks that read
    other attributes than every cell task; the joint fit already holds each term's own probes)."""
    sign = signed_strength(cell, settings)[0]
    terms = [sign * ws.descriptor(source, task, settings.space) for source, task in zip(cell.sources, cell.tasks)]
    composition = sum(terms[1:], terms[0])
    composition = composition.centred() if settings.centres(cell.kind) else composition
    anchors = ws.anchor_tasks(cell.tasks) if settings.anchors(cell.kind) else ()
    states = {t: ws.grid_state(cell.target, t) for t in (*cell.tasks, *anchors)}
    return composition, LoraRouteConfig(**settings.lora, seed=settings.seed), states, anchors


def lora_edit(ws: Workspace, cell: Cell, settings: CellSettings) -> LoraEdit:
    """Fit the cell's composition with the LoRA route on its grids (`lora_inputs`); the caller scales it by the
    cell's strength, as the closed form folds its operator. The fit starts from the target's bank states of
    those grids (their preprocessed items, unedited rows and landmarks): nothing unedited is encoded again."""
    composition, config, states, anchors = lora_inputs(ws, cell, settings)
    encoded = {s.grid.identity: (unit_rows(s.raw_embeddings), s.landmarks) for s in states.values()}
    return fit_lora(ws.models[cell.target], composition, [states[t].grid for t in cell.tasks], config, progress=False,
                    anchors=[states[t].grid for t in anchors], encoded=encoded)


register_method("zero_shot", zero_shot, "zero-shot")
register_method("random_utd", random_utd, "Random-UTD")
register_method("single_a", single(0), "single A", kinds=("addition",))
register_method("single_b", single(1), "single B", kinds=("addition",))
register_method("closed_form", closed_form, "closed form")  # reports add the run's space (report.method_label)
register_method("oracle", oracle, "oracle (own UTD)")
register_method("weight_space", merged_weight_space("task_arithmetic"), "weight-space task arithmetic")
register_method("lora", lora, "LoRA route", max_cells=8, sweep=lora_sweep)
register_method("alignment", alignment("procrustes"), "alignment baseline, Procrustes map (not the method)")
register_method("alignment_lstsq", alignment("lstsq"), "alignment baseline, least-squares map (not the method)")
register_method("label_reference", label_reference, "labelled reference (probe labels, not the method)")


def evaluate_cell(ws: Workspace, cell: Cell, settings: CellSettings = CellSettings(), methods: Sequence[str] = CACHED) -> dict[str, Any]:
    """The cell's record: accuracies of each applicable method on its evaluation sets (its tasks, then what it must leave
    alone, listed under `controls` and `others`: cells.kept_sets), and the strength a method chose where it chose one."""
    started = time.perf_counter()
    results = {}
    for name in methods:
        m = method(name)
        accs = m.fn(ws, cell, settings) if cell.kind in m.kinds else None
        if accs is not None:
            results[name] = dict(accs)
    return {
        "key": cell.key,
        **attrs.asdict(cell),
        "settings": settings.as_dict(),
        **kept_sets(ws, cell),
        "finetuned": {task: ws.finetuned_accuracy(cell.target, task) for task in cell.tasks},
        "results": results,
        "seconds": round(time.perf_counter() - started, 4),
    }
