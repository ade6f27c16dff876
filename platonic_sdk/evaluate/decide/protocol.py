"""A decision protocol as data (docs/method.md sec. 15.1): what is compared, how, and on which seeds.

A protocol file is JSON with these keys (every one required but `name`, `damage` and `chosen`; unknown keys are refused):

    name             free text
    worlds           registered worlds the candidates are measured on
    candidates       "SPACE/RULE": a descriptor space and a strength rule ("fixed": `fixed_strengths`) that reads the
                     other transfer tasks' unlabelled probes; never "auto", which follows the default being decided.
                     "SPACE/auto/labels" (optionally "@Q", a confidence): the default rule spending each world's budgets
                     (its zoo's control limits) on the labelled train splits of the controls and the other transfer tasks
                     (CellSettings keep "labels", docs/method.md sec. 18); "auto" here names the budget rule, the only one
                     that reads labels. Or an object {"space", "rule", "keep": "probes" | "labels", "confidence"}
    settings         {"centre": [kinds], "anchor": [kinds], "fixed_strengths": {"addition": c, "negation": c}}:
                     what every candidate and frontier solves with
    reference        {"frontier_space": SPACE, "point_space": SPACE or "candidate"}: the labelled reference's norm
                     (matched to the descriptor of that space) on the frontier sweep and at each candidate's point
    frontiers        spaces whose closed form is swept (with the labelled reference) at `sweep_strengths`
    sweep_strengths  the strengths of the frontier sweep
    cells_per_kind   cross-family cells per kind and replicate, evenly spread
    limits           {world: {"addition": points, "negation": points}}: the worst damage set's largest mean drop
    criteria         [{"type": "frontier", "method": M, "share": s, "tolerance": t} or
                      {"type": "reference_share", "share": s, "floor": f}], each with optional "name", "worlds", "kinds"
    choice           {"order": "controls" or "task", "modalities": {name: [worlds]}}
    hold             {"max_control_limits": n, "ranked_first": bool}
    seeds            {"development": [seeds], "confirmation": [seeds]} (disjoint)
    damage           optional: the fields of a cell record listing its damage sets, among "controls" (the control sets)
                     and "others" (the other transfer tasks; frontier.DAMAGE); default ["controls"], what the limits of
                     rounds 1-3 were judged on (frontier.point)
    chosen           the development choice, written (and committed) before the confirmation seeds run

`load_protocol(path)` reads and checks one; each error is one line naming the file and the key.
"""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs

from ...errors import PlatonicError
from ...spaces import check_space
from ...strength import AUTO, FIXED, check_strength_rule
from ...worlds.registry import WORLDS
from ..measure.frontier import DAMAGE
from ..plan.settings import KEEP_CHOICES, KINDS, CellSettings

REFERENCE = "reference"  # a frontier criterion's method naming the swept labelled reference
ORDERS = ("controls", "task")  # choice orders: fewest control limits broken first (rounds 2-3), or fewest criteria (round 1)
CRITERIA = ("frontier", "reference_share")
FRONTIER_AT = ("drop", "limit")  # where a frontier criterion reads the frontier: the candidate's worst drop, or the world's limit
CONTROL_DAMAGE = ("controls",)  # a protocol's damage when its file names none: the control sets, as rounds 1-3 judged
LABELS = "labels"


@attrs.frozen
class Candidate:
    """A descriptor space and a strength rule (`FIXED`: the protocol's fixed strengths) reading the other transfer tasks'
    unlabelled probes; or, with `keep` "labels", the default rule ("auto") spending each world's budgets on the labelled
    train splits of the controls and the other transfer tasks at `confidence` (None: the library's)."""

    space: str
    rule: str
    keep: str = "probes"
    confidence: float | None = None

    @property
    def name(self) -> str:
        if self.keep != LABELS:
            return f"{self.space}/{self.rule}"
        return f"{self.space}/{self.rule}/{LABELS}" + ("" if self.confidence is None else f"@{self.confidence:g}")

    @classmethod
    def parse(cls, value: str | Mapping[str, Any]) -> "Candidate":
        """"SPACE/RULE", "SPACE/auto/labels[@Q]" or {"space", "rule", "keep", "confidence"}, checked: a known space, FIXED or
        a registered rule named as itself (not "auto") on probes, "auto" on labels, a confidence only on labels."""
        if isinstance(value, Mapping):
            entry = _keys(value, "a candidate", ("space", "rule"), ("keep", "confidence"))
            keep, q = entry.get("keep", "probes"), entry.get("confidence")
            text = f"{entry['space']}/{entry['rule']}" + (f"/{keep}" if keep != "probes" else "")
        elif isinstance(value, str) and value.count("/") in (1, 2):
            text, _, confidence = value.partition("@")
            keep, q = (text.split("/") + ["probes"])[2], (_number(_float(confidence), "the confidence after @", 0.0) if confidence else None)
        else:
            raise PlatonicError(f"a candidate is written SPACE/RULE (e.g. blend/least_squares_off_task) or SPACE/auto/labels, got {value!r}")
        space, rule = text.split("/")[:2]
        if keep not in KEEP_CHOICES:
            raise PlatonicError(f"candidate {text!r}: keep is {' or '.join(KEEP_CHOICES)}, got {keep!r}")
        if keep == LABELS:
            if rule != AUTO:
                raise PlatonicError(f"candidate {text!r}: labelled keep sets are read by the budget rule, written {AUTO} "
                                    f"({space}/{AUTO}/{LABELS})")
            CellSettings(strength_rule=AUTO, keep=LABELS, confidence=q)  # the confidence, checked where experiments check it
            return cls(check_space(space), AUTO, LABELS, None if q is None else float(q))
        if rule == AUTO:
            raise PlatonicError(f"candidate {text!r}: name the rule, not {AUTO!r} (it follows the default being decided)")
        if q is not None:
            raise PlatonicError(f"candidate {text!r}: a confidence is read with labelled keep sets alone ({space}/{AUTO}/{LABELS}@Q)")
        return cls(check_space(space), rule if rule == FIXED else check_strength_rule(rule))


@attrs.frozen
class Criterion:
    """One criterion beyond the control limits, judged per world in `worlds` and kind in `kinds`.

    frontier:        gain >= share * F(x) - tolerance, F the swept `method`'s best gain within a worst drop of x
                     (frontier.gain_within; met where no swept point is that low): x the candidate's own worst drop
                     (`at` "drop", the default: on or above the frontier) or the world's limit (`at` "limit": a share of
                     the best the method reaches within the limit);
    reference_share: per task, gain >= share * the labelled reference's gain at the candidate's point, on every task
                     where that reference gains `floor` points or more.
    """

    type: str
    name: str
    worlds: tuple[str, ...]
    kinds: tuple[str, ...]
    share: float = 1.0
    tolerance: float = 0.0
    method: str | None = None
    floor: float = 0.0
    at: str = "drop"

    def applies(self, world: str, kind: str) -> bool:
        return world in self.worlds and kind in self.kinds


@attrs.frozen
class Protocol:
    """A checked protocol (load_protocol); `data` is the JSON it was read from."""

    worlds: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    centre: tuple[str, ...]
    anchor: tuple[str, ...]
    fixed_strengths: Mapping[str, float]
    frontier_space: str
    point_space: str  # a space, or "candidate": the reference at each point matches the candidate's own descriptor
    frontiers: tuple[str, ...]
    sweep_strengths: tuple[float, ...]
    cells_per_kind: int
    limits: Mapping[str, Mapping[str, float]]
    criteria: tuple[Criterion, ...]
    order: str
    modalities: Mapping[str, tuple[str, ...]]
    max_control_limits: int | None
    ranked_first: bool
    seeds: Mapping[str, tuple[int, ...]]
    damage: tuple[str, ...] = CONTROL_DAMAGE
    chosen: str | None = None
    name: str = ""
    data: Mapping[str, Any] = attrs.field(factory=dict, eq=False)  # the file's JSON, as read

    def swept(self) -> tuple[str, ...]:
        """The frontier sweep's methods: closed_form_<space> per frontier space, then REFERENCE."""
        return (*(f"closed_form_{s}" for s in self.frontiers), REFERENCE)

    def cell_method(self, swept: str) -> str:
        """The cell method that a swept name runs: REFERENCE is the labelled reference norm-matched to descriptors in
        `frontier_space` (reference_method)."""
        return reference_method(self.frontier_space) if swept == REFERENCE else swept

    def reference_space(self, candidate: Candidate) -> str:
        """The space whose descriptor's norm the labelled reference takes at `candidate`'s point."""
        return candidate.space if self.point_space == "candidate" else self.point_space

    def stage_seeds(self, stage: str) -> tuple[int, ...]:
        """The seeds of "development", "confirmation" or "all" (both, in that order)."""
        if stage == "all":
            return (*self.seeds["development"], *self.seeds["confirmation"])
        if stage not in self.seeds:
            raise PlatonicError(f"seeds are 'development', 'confirmation' or 'all', got {stage!r}")
        return self.seeds[stage]


def reference_method(space: str) -> str:
    """The name under which the labelled reference norm-matched to descriptors in `space` is swept
    (label_reference.label_reference_in; registered by measure.py)."""
    return f"label_reference_norm_{space}"


def load_protocol(path: str | Path) -> Protocol:
    """The protocol in JSON file `path`, checked; PlatonicError in one line naming the file otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlatonicError(f"protocol file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlatonicError(f"protocol file {path} is not JSON: {e}") from None
    try:
        return protocol_from(data)
    except PlatonicError as e:
        raise PlatonicError(f"protocol file {path}: {e}") from None


def protocol_from(data: Any) -> Protocol:
    """The checked Protocol of a mapping shaped as the file (see the module's docstring)."""
    top = _keys(data, "the protocol", ("worlds", "candidates", "settings", "reference", "frontiers", "sweep_strengths", "cells_per_kind",
                                       "limits", "criteria", "choice", "hold", "seeds"), ("name", "damage", "chosen"))
    worlds = tuple(WORLDS.check(w) for w in _list(top["worlds"], "worlds", str))
    candidates = tuple(_at(f"candidates[{i}]", Candidate.parse, c) for i, c in enumerate(_list(top["candidates"], "candidates", (str, dict))))
    if len({c.name for c in candidates}) < len(candidates):
        raise PlatonicError("candidates: a candidate is listed twice")
    settings = _keys(top["settings"], "settings", ("centre", "anchor", "fixed_strengths"))
    fixed = _keys(settings["fixed_strengths"], "settings.fixed_strengths", KINDS)
    reference = _keys(top["reference"], "reference", ("frontier_space", "point_space"))
    limits = {}
    for world, kinds in _keys(top["limits"], "limits", ()).items():
        limits[WORLDS.check(world)] = {k: _number(v, f"limits.{world}.{k}", 0.0) for k, v in _keys(kinds, f"limits.{world}", KINDS).items()}
    if missing := [w for w in worlds if w not in limits]:
        raise PlatonicError(f"limits: no control limits for world(s) {', '.join(missing)}")
    choice, hold = _keys(top["choice"], "choice", ("order", "modalities")), _keys(top["hold"], "hold", ("max_control_limits", "ranked_first"))
    if choice["order"] not in ORDERS:
        raise PlatonicError(f"choice.order is one of {', '.join(ORDERS)}, got {choice['order']!r}")
    seeds = {k: tuple(_list(v, f"seeds.{k}", int)) for k, v in _keys(top["seeds"], "seeds", ("development", "confirmation")).items()}
    if shared := sorted(set(seeds["development"]) & set(seeds["confirmation"])):
        raise PlatonicError(f"seeds: {', '.join(map(str, shared))} are both development and confirmation seeds")
    strengths = tuple(_number(c, "sweep_strengths", 0.0) for c in _list(top["sweep_strengths"], "sweep_strengths", (int, float)))
    if list(strengths) != sorted(set(strengths)):
        raise PlatonicError(f"sweep_strengths must ascend without repeats, got {list(strengths)}")
    frontiers = tuple(check_space(s) for s in _list(top["frontiers"], "frontiers", str))
    protocol = Protocol(
        worlds=worlds, candidates=candidates, centre=_kinds(settings["centre"], "settings.centre"),
        anchor=_kinds(settings["anchor"], "settings.anchor"),
        fixed_strengths={k: _number(v, f"settings.fixed_strengths.{k}", 0.0) for k, v in fixed.items()},
        frontier_space=check_space(reference["frontier_space"]),
        point_space=reference["point_space"] if reference["point_space"] == "candidate" else check_space(reference["point_space"]),
        frontiers=frontiers, sweep_strengths=strengths, cells_per_kind=_count(top["cells_per_kind"], "cells_per_kind"),
        limits=limits, criteria=(), order=choice["order"],
        modalities={m: tuple(WORLDS.check(w) for w in _list(ws, f"choice.modalities.{m}", str))
                    for m, ws in _keys(choice["modalities"], "choice.modalities", ()).items()},
        max_control_limits=None if hold["max_control_limits"] is None else _count(hold["max_control_limits"], "hold.max_control_limits", 0),
        ranked_first=_bool(hold["ranked_first"], "hold.ranked_first"), seeds=seeds,
        damage=_damage(top.get("damage", list(CONTROL_DAMAGE))), name=str(top.get("name", "")), data=data,
    )
    criteria = tuple(_at(f"criteria[{i}]", _criterion, c, protocol) for i, c in enumerate(_list(top["criteria"], "criteria", dict, empty=True)))
    chosen = top.get("chosen")
    if chosen is not None and chosen not in {c.name for c in candidates}:
        raise PlatonicError(f"chosen: {chosen!r} is none of the candidates ({', '.join(c.name for c in candidates)})")
    return attrs.evolve(protocol, criteria=criteria, chosen=chosen)


def _criterion(data: Any, protocol: Protocol) -> Criterion:
    kind = _keys(data, "a criterion", ("type",), ("name", "worlds", "kinds", "share", "tolerance", "method", "floor", "at")).get("type")
    allowed = {"frontier": ("method",), "reference_share": ("floor",)}.get(kind)
    if allowed is None:
        raise PlatonicError(f"type is one of {', '.join(CRITERIA)}, got {kind!r}")
    optional = ("name", "worlds", "kinds", "share", "tolerance", *(("at",) if kind == "frontier" else ()))
    entry = _keys(data, f"a {kind} criterion", ("type", *allowed), optional)
    if entry.get("at", "drop") not in FRONTIER_AT:
        raise PlatonicError(f"at is one of {', '.join(FRONTIER_AT)}, got {entry['at']!r}")
    worlds = tuple(_list(entry.get("worlds", list(protocol.worlds)), "worlds", str))
    if stray := [w for w in worlds if w not in protocol.worlds]:
        raise PlatonicError(f"worlds: {', '.join(stray)} not among the protocol's worlds ({', '.join(protocol.worlds)})")
    method = entry.get("method")
    if kind == "frontier" and method not in protocol.swept():
        raise PlatonicError(f"method {method!r} is not swept; the swept methods are {', '.join(protocol.swept())}")
    return Criterion(kind, str(entry.get("name", method or kind)), worlds, _kinds(entry.get("kinds", list(KINDS)), "kinds"),
                     _number(entry.get("share", 1.0), "share", 0.0), _number(entry.get("tolerance", 0.0), "tolerance", 0.0),
                     method, _number(entry.get("floor", 0.0), "floor", 0.0), entry.get("at", "drop"))


def _damage(value: Any) -> tuple[str, ...]:
    fields = _list(value, "damage", str)
    if any(f not in DAMAGE for f in fields) or len(set(fields)) < len(fields):
        raise PlatonicError(f"damage lists the kinds of kept set whose drop is damage, each once, among {', '.join(DAMAGE)}; got {fields}")
    return tuple(fields)


def _float(text: str) -> float | str:
    """`text` as a number, else itself (for _number's message)."""
    try:
        return float(text)
    except ValueError:
        return text


def _keys(value: Any, what: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
    """`value` as a dict holding every `required` key and no key outside required + optional (an empty pair of
    lists: any keys)."""
    if not isinstance(value, Mapping):
        raise PlatonicError(f"{what} must be a JSON object, got {type(value).__name__}")
    known = [*required, *optional]
    for key in value:
        if known and key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            raise PlatonicError(f"{what}: unknown key {key!r}" + (f" (did you mean {near[0]!r}?)" if near else "") + f"; known: {', '.join(known)}")
    if missing := [k for k in required if k not in value]:
        raise PlatonicError(f"{what}: missing key(s) {', '.join(missing)}")
    return dict(value)


def _list(value: Any, what: str, kind: type | tuple[type, ...], empty: bool = False) -> list[Any]:
    if not isinstance(value, list) or not (value or empty) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise PlatonicError(f"{what} must be a {'' if empty else 'non-empty '}list of {names} values, got {value!r}")
    return value


def _number(value: Any, what: str, least: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < least:
        raise PlatonicError(f"{what} must be a finite number >= {least:g}, got {value!r}")
    return float(value)


def _count(value: Any, what: str, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise PlatonicError(f"{what} must be a whole number >= {least}, got {value!r}")
    return value


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise PlatonicError(f"{what} must be true or false, got {value!r}")
    return value


def _kinds(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(v in KINDS for v in value):
        raise PlatonicError(f"{what} lists cell kinds ({', '.join(KINDS)}), got {value!r}")
    return tuple(value)


def _at(where: str, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), its PlatonicError prefixed with `where`."""
    try:
        return fn(*args)
    except PlatonicError as e:
        raise PlatonicError(f"{where}: {e}") from None
