"""What the cell methods read (a light module: the CLI takes its defaults from here)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import attrs

from ...errors import PlatonicError, check_strength
from ...spaces import check_space
from ...strength import AUTO, DEFAULT_STRENGTH_RULE, rule_or_fixed
from .presets import preset
from .registry import family_methods, method

KINDS = ("addition", "negation")
GROUPS = ("same-model", "same-architecture", "cross-family")
# all but the LoRA route (and the closed form in the other descriptor spaces, closed_form_<space>, which runs on request)
CACHED = ("zero_shot", "random_utd", "single_a", "single_b", "closed_form", "oracle", "label_reference", "alignment",
          "alignment_lstsq", "weight_space")
# every merging method on same-architecture cells, its strength chosen on validation (None on cross-family cells)
MERGED = tuple(f"weight_space_{m}" for m in ("task_arithmetic", "ties", "dare", "tsv", "iso_c"))
DEFAULT_METHODS = CACHED + MERGED
SWEEP_STRENGTHS = tuple(i / 4 for i in range(9))  # the strength sweep: 0, 0.25, ..., 2


def swept_methods() -> tuple[str, ...]:
    """The strength sweep's default methods: every method that transfers descriptors from cached features (the closed
    form in the run's space and in every registered space, plug-ins included; the oracle, the labelled reference,
    Random-UTD, the alignment baselines). "lora" added to them sweeps the LoRA route on the cells it ran on: one more
    fit per cell, and a forward pass of every evaluation set per strength."""
    return ("closed_form", *family_methods("closed_form_"), "oracle", "label_reference", "random_utd", "alignment", "alignment_lstsq")


DEFAULT_METHOD = preset("default").method  # the default method's settings, as data (presets/default.json)
DEFAULT_CENTRE = tuple(DEFAULT_METHOD["centre"])  # kinds whose descriptors are row-centred by default (docs/method.md: seeds 5-7)
DEFAULT_ANCHOR = tuple(DEFAULT_METHOD["anchor"])  # kinds whose solves anchor the other attributes' probes by default (docs/method.md)
KIND_CHOICES = {"none": (), "addition": ("addition",), "negation": ("negation",), "all": KINDS}  # --centre / --anchor values
# What the strength rule reads of the tasks a cell's edit must leave alone (docs/method.md sec. 18): "probes", the other
# transfer tasks' unlabelled probe grids; "labels", the labelled train splits of the controls and the other transfer tasks.
KEEP_CHOICES = ("probes", "labels")
BUDGET_SETTINGS = ("addition_budget", "negation_budget", "confidence")  # the budget rule's settings: read only with keep "labels"


def _cell_kinds(_: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    if not set(value) <= set(KINDS):
        raise PlatonicError(f"{attribute.name} lists cell kinds ({', '.join(KINDS)}), got {', '.join(map(str, value))}")


def _keep(value: Any) -> str:
    if value not in KEEP_CHOICES:
        raise PlatonicError(f"keep is {' or '.join(map(repr, KEEP_CHOICES))} (what the strength rule reads of the sets an edit "
                            f"must leave alone), got {value!r}")
    return value


def keep_refusal(keep: str, rule: str | None, given: Sequence[str], say: Callable[[str], str] = str) -> str | None:
    """Why settings that keep `keep` under the strength rule `rule` (its own name; None: the fixed strengths) with the
    budget settings `given` set are refused, a setting named as `say` names it; None where they are not. Labels are read
    by the default rule alone, as OperatorBank.strength_choice spends a budget under "auto" alone; a budget or confidence
    is spent on labels alone."""
    if keep == "labels" and rule != DEFAULT_STRENGTH_RULE:
        why = "the fixed strengths read no keep set" if rule is None else f"rule {rule} reads no labels"
        return f"{say('keep')} labels spends a budget through the default strength rule ({AUTO}); {say('strength_rule')}: {why}: drop one"
    if given and keep != "labels":
        return f"{', '.join(map(say, given))}: spent on labelled keep sets, which {say('keep')} {keep} does not read; give {say('keep')} labels"
    return None


def _budget(value: Any) -> float | None:
    """None, or a positive finite number of accuracy points (strength.budget.check_budget's rule, without torch)."""
    if value is None:
        return None
    points = check_strength(value, "a budget")
    if points <= 0:
        raise PlatonicError(f"a budget is the accuracy points a kept set may lose, a positive number; got {value!r}")
    return points


def _confidence(value: Any) -> float | None:
    """None, or a probability strictly between 0.5 and 1 (strength.budget.z_score's rule, without torch)."""
    if value is None:
        return None
    q = check_strength(value, "confidence")
    if not 0.5 < q < 1.0:
        raise PlatonicError(f"confidence is a probability between 0.5 and 1 (e.g. 0.84), got {value!r}")
    return q


@attrs.frozen
class CellSettings:
    """Edit strengths (of addition cells, negation cells and weight-space task vectors) and the LoRA route's
    recipe: `lora` holds LoraRouteConfig fields that differ from its defaults (a world's tuned lr and
    epochs, the closed form's ridge_b); `seed` seeds the LoRA route and the OrthoReg study's fine-tunes;
    `centre` lists the kinds whose descriptors are row-centred before the solve (UTD.centred); `anchor`
    the kinds whose solves hold the probes of the transfer tasks that read other attributes in place
    (Workspace.anchor_tasks; OperatorBank.operator's anchors); `space` is the descriptor space every
    descriptor-transferring method and study reads (spaces.space_names(); docs/method.md sec. 15); `strength_rule`
    (default: the default rule, "auto"; None or "fixed": the fixed strengths) is the rule with which the
    closed-form cell methods (closed_form, closed_form_<space>, the oracle and the labelled reference) choose
    each cell's strength from the target, the cell's descriptors and the other transfer tasks' unlabelled probes instead of addition_strength / negation_strength (strength.strength_rule;
    "auto" is recorded as the default rule's name; docs/method.md sec. 17). Every other method keeps the fixed
    strengths, and the strength sweep fixes each swept one. `keep` is what that rule reads of the sets a cell's edit
    must leave alone: "probes" (the default), the other transfer tasks' unlabelled probe grids; "labels", the labelled
    train splits of the controls and the other transfer tasks, as a user holds eval sets of their other tasks, on which
    the default rule spends `addition_budget` / `negation_budget` accuracy points at `confidence` (None: the library's,
    strength.DEFAULT_BUDGET and DEFAULT_CONFIDENCE; experiments on a world give its control limits) through
    OperatorBank.strength_choice (docs/method.md sec. 18). Labels need the default rule; the budgets and the confidence
    need labels."""

    addition_strength: float = attrs.field(default=0.5, converter=check_strength)
    negation_strength: float = attrs.field(default=1.0, converter=check_strength)
    weight_space_strength: float = attrs.field(default=0.5, converter=check_strength)
    lora: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    seed: int = 0
    centre: tuple[str, ...] = attrs.field(default=DEFAULT_CENTRE, converter=tuple, validator=_cell_kinds)
    anchor: tuple[str, ...] = attrs.field(default=DEFAULT_ANCHOR, converter=tuple, validator=_cell_kinds)
    space: str = attrs.field(default=DEFAULT_METHOD["space"], converter=check_space)
    strength_rule: str | None = attrs.field(default=DEFAULT_METHOD["strength_rule"], converter=rule_or_fixed)
    keep: str = attrs.field(default=attrs.Factory(lambda self: default_keep(self.strength_rule), takes_self=True), converter=_keep)
    addition_budget: float | None = attrs.field(default=None, converter=_budget)
    negation_budget: float | None = attrs.field(default=None, converter=_budget)
    confidence: float | None = attrs.field(default=None, converter=_confidence)

    def __attrs_post_init__(self) -> None:
        refused = keep_refusal(self.keep, self.strength_rule, [k for k in BUDGET_SETTINGS if getattr(self, k) is not None])
        if refused:
            raise PlatonicError(refused)

    @classmethod
    def preset(cls, name: str, **fields: Any) -> "CellSettings":
        """The settings of preset `name`'s method block (presets.preset: "default", "paper" or a JSON file), `fields`
        on top; a field the preset sets is refused (PlatonicError), so a preset always means what its file says."""
        method = preset(name).method
        clash = sorted(set(fields) & set(method))
        if clash:
            raise PlatonicError(f"preset {name} sets {', '.join(clash)} itself: drop {', '.join(clash)}")
        return cls(**method, **fields)

    @classmethod
    def paper(cls, lora: Mapping[str, Any] | None = None, seed: int = 0) -> "CellSettings":
        """The paper's exact method (`platonic demo|grid --paper`; presets/paper.json): the affinity UTD (docs/method.md
        sec. 2), no row-centring, no anchors, fixed strengths 0.5 on addition cells and 1.0 on negation cells; `lora` and
        `seed` as in the constructor."""
        return cls.preset("paper", lora=lora or {}, seed=seed)

    def with_rule(self, rule: str | None) -> "CellSettings":
        """These settings under the strength rule `rule` (None or "fixed": the fixed strengths) reading the other transfer
        tasks' unlabelled probes (keep "probes", no budget): what the strength sweep folds with (each strength fixed) and
        closed_form_strength_<rule> (a label-free rule, whatever the settings keep)."""
        return attrs.evolve(self, strength_rule=rule, keep="probes", **dict.fromkeys(BUDGET_SETTINGS))

    def centres(self, kind: str) -> bool:
        """Whether cells of `kind` transfer row-centred descriptors."""
        return kind in self.centre

    def anchors(self, kind: str) -> bool:
        """Whether the solves of cells of `kind` anchor the other attributes' probes."""
        return kind in self.anchor

    def strength_of(self, kind: str) -> float:
        """The closed form's strength on cells of `kind` (addition or negation)."""
        return self.addition_strength if kind == "addition" else self.negation_strength

    def budget_of(self, kind: str) -> float | None:
        """The accuracy points a kept set may lose on cells of `kind` under keep "labels" (None: the library's)."""
        return self.addition_budget if kind == "addition" else self.negation_budget

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class CellSelection:
    """The cells of one kind and group (at most `max_cells`, evenly spread), run with `methods`
    (None: the experiment's)."""

    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    group: str = attrs.field(default="cross-family", validator=attrs.validators.in_(GROUPS))
    max_cells: int | None = None
    methods: tuple[str, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))


def selections(kinds: Sequence[str] = KINDS, groups: Sequence[str] = ("cross-family",), max_cells: int | None = None) -> tuple[CellSelection, ...]:
    """Every kind x group, each capped at max_cells."""
    return tuple(CellSelection(k, g, max_cells) for k in kinds for g in groups)


def _floats(value: Sequence[float]) -> tuple[float, ...]:
    return tuple(float(v) for v in value)


@attrs.frozen
class ExperimentConfig:
    """What to run: cell selections, cell methods and their settings, and the studies.

    `method_cells` overrides a method's registered cell cap (per kind and group; None: every cell).
    `sweep_methods` are run at each of `sweep_strengths` on `sweep_cells` cells per kind (`swept`).
    `held_out` lists related tasks then the held-out task; `orthoreg_tasks` > 0 runs the OrthoReg
    weight-space study of the first family on that many tasks with `orthoreg_recipe`.
    """

    cells: tuple[CellSelection, ...] = attrs.field(default=selections(), converter=tuple)
    pairing: str = "auto"
    settings: CellSettings = attrs.field(factory=CellSettings)
    methods: tuple[str, ...] = attrs.field(default=DEFAULT_METHODS, converter=tuple)
    method_cells: Mapping[str, int | None] = attrs.field(factory=dict, converter=dict)
    sweep_strengths: tuple[float, ...] = attrs.field(default=SWEEP_STRENGTHS, converter=_floats)
    sweep_cells: int | None = 200  # per kind, evenly spaced over the cells (None: every cell)
    sweep_methods: tuple[str, ...] = attrs.field(factory=swept_methods, converter=tuple)
    accumulation: bool = True
    held_out: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    guarantee: bool = True
    similarity: bool = True
    similarity_probes: int | None = 64  # probes per task in the union grid (None: the whole grids)
    orthoreg_tasks: int = 0
    orthoreg_recipe: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)

    def __attrs_post_init__(self) -> None:
        if not self.cells:
            raise PlatonicError("an experiment needs at least one cell selection (kind and group)")
        for name in {*self.methods, *self.method_cells, *(m for s in self.cells for m in s.methods or ()), *self.sweep_methods}:
            method(name)  # unknown names fail here, listing the registered ones
        if self.held_out and len(self.held_out) < 2:
            raise PlatonicError("held_out lists the related tasks then the held-out task (at least two names)")
        for name in ("sweep_cells", "similarity_probes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise PlatonicError(f"{name} must be positive, got {value}")

    def cap(self, name: str) -> int | None:
        return self.method_cells[name] if name in self.method_cells else method(name).max_cells

    def swept(self) -> tuple[str, ...]:
        """The strength sweep's methods: `sweep_methods` but closed_form_<the settings' space> (closed_form
        itself) and a capped method the run does not run (it is swept on the cells it ran on)."""
        run = {m for s in self.cells for m in s.methods or self.methods}
        return tuple(m for m in self.sweep_methods
                     if m != f"closed_form_{self.settings.space}" and (self.cap(m) is None or m in run))

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def default_keep(rule: str | None) -> str:
    """What a strength rule reads of the sets an edit must leave alone when the settings do not say: under the default
    rule the default method's (presets/default.json: "labels"), under another rule or the fixed strengths "probes"
    (only the default rule spends a budget on labels)."""
    return DEFAULT_METHOD["keep"] if rule == DEFAULT_STRENGTH_RULE else "probes"


def world_fallback(world: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """The world's tuned CellSettings fields (`world`: its strengths and budgets) that `fields` leaves unset, its
    budgets only where the settings keep labels (the budgets are spent on labelled keep sets alone)."""
    rule = rule_or_fixed(fields.get("strength_rule", DEFAULT_METHOD["strength_rule"]))
    labels = fields.get("keep", default_keep(rule)) == "labels"
    return {k: v for k, v in world.items() if k not in fields and v is not None and (labels or k not in BUDGET_SETTINGS)}


def default(cls: type, name: str) -> Any:
    """The default of attrs class `cls`'s field `name` (so option help and docs quote the class)."""
    return getattr(attrs.fields(cls), name).default
