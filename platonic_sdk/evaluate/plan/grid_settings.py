"""The settings of a grid experiment (`platonic grid`'s options, or a mapping in Python) and every check of them
that needs no model and no dataset. A light module: the command line checks its options through it before
any model library loads; `plan.Experiment.from_config` builds the experiment from it."""

from __future__ import annotations

import difflib
from typing import Any, Callable, Mapping, Sequence

import attrs

from ...data.specs import TaskOptions
from ...errors import PlatonicError
from ...strength import rule_or_fixed
from ...worlds.registry import checked_world
from .presets import preset
from .registry import method_name
from .settings import BUDGET_SETTINGS, KINDS, CellSettings, default, default_keep, keep_refusal, world_fallback

METHOD_KEYS = ("addition_strength", "negation_strength", "weight_space_strength", "strength_rule", "space", "centre", "anchor", "keep",
               "addition_budget", "negation_budget", "confidence")

Words = Callable[[str], str]  # a setting's key -> the words its user knows it by (the CLI: its flag)


def python_words(key: str) -> str:
    return key


def _names(value: Sequence[str] | None) -> tuple[str, ...] | None:
    """A list of names (a lone string is refused: it would be read as its letters)."""
    if value is None:
        return None
    if isinstance(value, str):
        raise PlatonicError(f"expected a list of names, got the string {value!r}; write [{value!r}]")
    return tuple(str(v) for v in value)


def _mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value or {})


@attrs.frozen(kw_only=True)
class GridSettings:
    """The settings of a grid experiment; None leaves a value to its class's default (or a world's tuned one).

    Where the models come from, one of: `world`'s shipped zoo (`families` of its members, fine-tuned on
    `tasks`, default its transfer tasks, with its `controls`); `models` ({name: {"family", "checkpoint"}}) with
    `finetuned` ([{"model", "task", "checkpoint" or "utd"}]) and task specs `tasks` / `controls`; or the
    registered `benchmark` on `data_root`, `checkpoints` {family: checkpoint} and the fine-tunes folder
    `finetunes` (default `out`/finetunes; missing ones are made with `recipe`, FinetuneConfig fields).
    The cells: `kinds` x `groups` (at most `max_cells` each), `methods`, `method_cells` {method: cap}; the
    strengths (a world's by default), `strength_rule`, `centre` / `anchor` (cell kinds), `space`, `keep` ("probes" or
    "labels"), `addition_budget` / `negation_budget` and `confidence` (with keep "labels"; the budgets by default a
    world's control limits) and `lora` (LoraRouteConfig fields) of CellSettings;
    the studies: `held_out` (related tasks, then the held-out one; default the world's trio or the
    benchmark's), `sweep_strengths`, `sweep_cells` and `similarity_probes` (0: every cell / probe), `similarity`.
    `preset` names a preset (evaluate.plan.presets: "paper", "default", "demo", or a JSON file): its method settings
    (a setting it fixes is refused beside it) and, for "demo", its experiment on a world's zoo.
    """

    world: str = "image"
    preset: str | None = None
    families: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    tasks: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    controls: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    held_out: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    models: dict[str, Any] = attrs.field(factory=dict, converter=_mapping)
    finetuned: tuple[Mapping[str, str], ...] = attrs.field(default=(), converter=lambda v: tuple(v or ()))
    benchmark: str | None = None
    data_root: str | None = None
    checkpoints: dict[str, str] = attrs.field(factory=dict, converter=_mapping)
    finetunes: str | None = None
    out: str | None = None
    recipe: dict[str, Any] = attrs.field(factory=dict, converter=_mapping)
    templates: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    test_fraction: float = 0.2
    seed: int = 0
    world_seed: int = 0
    train_per_class: int | None = None
    test_per_class: int | None = None
    per_class: int = 30
    grid_seed: int = 0
    batch_size: int = 64
    device: str | None = None
    ridge_a: float | None = None
    ridge_b: float | None = None
    kinds: tuple[str, ...] = attrs.field(default=KINDS, converter=_names)
    groups: tuple[str, ...] = attrs.field(default=("cross-family",), converter=_names)
    pairing: str = "auto"
    max_cells: int | None = None
    methods: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    method_cells: dict[str, int | None] = attrs.field(factory=dict, converter=_mapping)
    addition_strength: float | None = None
    negation_strength: float | None = None
    weight_space_strength: float | None = None
    strength_rule: str | None = None
    centre: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    anchor: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    space: str | None = None
    keep: str | None = None
    addition_budget: float | None = None
    negation_budget: float | None = None
    confidence: float | None = None
    lora: dict[str, Any] = attrs.field(factory=dict, converter=_mapping)
    sweep_strengths: tuple[float, ...] | None = None
    sweep_cells: int | None = None
    similarity: bool = True
    similarity_probes: int | None = None

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> "GridSettings":
        """The settings of `mapping`'s keys; an unknown key is refused, naming the nearest known one."""
        known = [f.name for f in attrs.fields(cls)]
        for key in mapping:
            if key not in known:
                near = difflib.get_close_matches(key, known, n=1)
                raise PlatonicError(f"unknown grid setting {key!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                                    + f"; known: {', '.join(known)}")
        return cls(**mapping)

    def checked(self, say: Words = python_words) -> "GridSettings":
        """These settings with canonical names, after every check that needs no model and no dataset: the
        methods, the benchmark or world, and the settings that belong to one source of models only. `say`
        names a setting in the caller's words."""
        for name in [*(self.methods or ()), *self.method_cells]:
            method_name(name)
        self.cell_settings(say=say)  # the method's settings, checked where they are built
        if self.preset and preset(self.preset).experiment and (self.benchmark or self.models):
            raise PlatonicError(f"{say('preset')} {self.preset} runs on a world's zoo: drop {say('benchmark' if self.benchmark else 'models')}")
        if self.benchmark:
            from ...data.benchmark import benchmark_name  # numpy and the dataset readers: only for a benchmark

            name = benchmark_name(self.benchmark)
            clash = [say(k) for k in ("tasks", "controls", "models") if getattr(self, k)]
            if clash:
                raise PlatonicError(f"benchmark {name} brings its own tasks, controls and families: drop {', '.join(clash)}")
            if not self.data_root:
                raise PlatonicError(f"benchmark {name} reads its datasets under {say('data_root')}: give it")
            if not (self.finetunes or self.out):
                raise PlatonicError(f"benchmark {name} keeps its fine-tunes in {say('finetunes')} (default: {say('out')}/finetunes): give one")
            return attrs.evolve(self, benchmark=name)
        if self.checkpoints or self.finetunes or self.recipe:
            given = [say(k) for k in ("checkpoints", "finetunes", "recipe") if getattr(self, k)]
            raise PlatonicError(f"{', '.join(given)}: only a benchmark's run takes these (its checkpoints, fine-tunes and their "
                                f"recipe); give {say('benchmark')} NAME")
        if self.models:
            for name, entry in self.models.items():
                if not entry.get("family"):
                    raise PlatonicError(f"{say('models')}: model {name!r} names no family")
            for entry in self.finetuned:
                if entry.get("model") not in self.models or not ("utd" in entry or entry.get("checkpoint")):
                    raise PlatonicError(f"{say('finetuned')}: entry {dict(entry)} needs a model of {say('models')} "
                                        "and a checkpoint or utd")
            return self
        return attrs.evolve(self, world=checked_world(self.world))

    def method_settings(self) -> dict[str, Any]:
        """The CellSettings fields these settings give (None ones left to the preset, the world or the class)."""
        return {k: getattr(self, k) for k in METHOD_KEYS if getattr(self, k) is not None}

    def cell_settings(self, strengths: Mapping[str, float | None] | None = None, lora: Mapping[str, Any] | None = None,
                      say: Words = python_words) -> CellSettings:
        """The CellSettings of these settings: `preset`'s method (default: the default preset), the given settings on top
        (one the preset fixes is refused), `strengths` (a world's tuned strengths and budgets: settings.world_fallback)
        where neither sets them, the LoRA-route recipe `lora` with the settings' own `lora` on top, and the seed."""
        given = self.method_settings()
        method = preset(self.preset).method if self.preset else {}
        clash = [say(k) for k in given if k in method]
        if clash:
            raise PlatonicError(f"preset {self.preset} sets {', '.join(clash)} itself: drop {', '.join(clash)}")
        fields = {**method, **given}
        rule = rule_or_fixed(fields.get("strength_rule", default(CellSettings, "strength_rule")))
        keep = fields.get("keep", default_keep(rule))
        if refused := keep_refusal(keep, rule, [k for k in BUDGET_SETTINGS if k in given], say):  # in the caller's words
            raise PlatonicError(refused)
        return CellSettings(**world_fallback(strengths or {}, fields), **fields, lora={**(lora or {}), **self.lora}, seed=self.seed)

    def task_options(self) -> TaskOptions:
        return TaskOptions(self.data_root, self.templates, self.test_fraction, self.seed, self.world_seed,
                           self.train_per_class, self.test_per_class)
