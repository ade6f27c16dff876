"""A world's tuned settings, read from its zoo's manifest: the one place they live.

A zoo folder holds its members (one folder each) and a manifest, `zoo.json`, whose `settings` record
carries what the world's experiments were tuned with:

    "settings": {"ridge_a": 0.1, "ridge_b": 0.5, "lora": {"lr": 0.003, "epochs": 50},
                 "addition_strength": 0.5, "negation_strength": 1.0, "addition_budget": 3.0, "negation_budget": 5.0,
                 "controls": ["control_objects", ...]}

ridge_a / ridge_b are the closed form's ridge factors (relative to mean sigma(F)^2 and mean sigma(G)^2,
docs/method.md sec. 11); `lora` the LoRA route's recipe as `LoraRouteConfig` fields that differ from
its defaults (its landmark ridge is the world's ridge_b); the strengths those of addition and negation
cells; the budgets (optional) the world's control limits, the accuracy points a kept set may lose on addition and
negation cells, which experiments that keep labelled sets spend (docs/method.md sec. 18); `controls` the world's
control task names. `world_settings(zoo)` reads them.

A member carries what an edit on it needs in its own folder: `stamp_members(zoo)` writes the world's name, ridge,
LoRA-route recipe and fine-tuning recipe into each member's marker (platonic.json, under `world`), and
`member_settings(checkpoint)` reads them back from the checkpoint folder alone, so a member copied anywhere, with or
without its zoo, gives the same edit. `ridge.ridge_rule`, `transfer.lora.lora_recipe` and `worlds.zoo.zoo_recipe`
read a member's settings from here.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import attrs

from .atomic import write_text
from .errors import PlatonicError, check_strength
from .io import MARKER

MANIFEST = "zoo.json"  # a zoo's manifest (the zoo builders write it)
BUDGETS = ("addition_budget", "negation_budget")  # optional in a manifest's settings


def _points(what: str) -> Any:
    """A converter of an optional number of accuracy points named `what`."""
    return attrs.converters.optional(partial(check_strength, what=what))


_positive = attrs.validators.optional(attrs.validators.gt(0.0))


@attrs.frozen
class WorldSettings:
    """The settings a world's experiments run with, from the manifest of its zoo `zoo`; `lora` holds the
    LoRA route's recipe (LoraRouteConfig fields), its landmark ridge `ridge_b` included."""

    world: str
    zoo: Path
    ridge_a: float = attrs.field(converter=partial(check_strength, what="ridge_a"), validator=attrs.validators.ge(0.0))
    ridge_b: float = attrs.field(converter=partial(check_strength, what="ridge_b"), validator=attrs.validators.ge(0.0))
    lora: Mapping[str, Any] = attrs.field(converter=dict)
    addition_strength: float = attrs.field(converter=partial(check_strength, what="addition_strength"))
    negation_strength: float = attrs.field(converter=partial(check_strength, what="negation_strength"))
    controls: tuple[str, ...] = attrs.field(converter=tuple)
    addition_budget: float | None = attrs.field(default=None, converter=_points("addition_budget"), validator=_positive)
    negation_budget: float | None = attrs.field(default=None, converter=_points("negation_budget"), validator=_positive)

    def record(self) -> dict[str, Any]:
        """The manifest's `settings` record of these settings (what `world_settings` reads back)."""
        budgets = {k: getattr(self, k) for k in BUDGETS if getattr(self, k) is not None}
        return {"ridge_a": self.ridge_a, "ridge_b": self.ridge_b, "lora": {k: v for k, v in self.lora.items() if k != "ridge_b"},
                "addition_strength": self.addition_strength, "negation_strength": self.negation_strength, **budgets,
                "controls": list(self.controls)}

    def cell_fields(self) -> dict[str, float | None]:
        """The CellSettings fields the world tunes: its strengths and budgets (None: not recorded)."""
        return {"addition_strength": self.addition_strength, "negation_strength": self.negation_strength,
                **{k: getattr(self, k) for k in BUDGETS}}


def _manifest(zoo: str | os.PathLike) -> dict[str, Any] | None:
    """The manifest of the zoo folder `zoo` (a JSON object with `members`), or None when it has none."""
    try:
        manifest = json.loads((Path(zoo) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("members"), dict) else None


def world_settings(zoo: str | os.PathLike) -> WorldSettings:
    """The settings recorded in the manifest of the zoo folder `zoo`; PlatonicError when it records none
    or a malformed record (naming the manifest)."""
    folder = Path(zoo).expanduser().resolve()
    path = folder / MANIFEST
    manifest = _manifest(folder)
    if manifest is None or "settings" not in manifest:
        raise PlatonicError(f"{path} records no world settings (a zoo manifest with `members` and `settings`)")
    record = manifest["settings"]
    try:
        if "ridge_b" in record["lora"]:
            raise ValueError("lora holds no ridge_b: the LoRA route's landmark ridge is the world's ridge_b")
        return WorldSettings(str(manifest["world"]), folder, record["ridge_a"], record["ridge_b"],
                             {**record["lora"], "ridge_b": record["ridge_b"]}, record["addition_strength"],
                             record["negation_strength"], record["controls"], *(record.get(k) for k in BUDGETS))
    except (KeyError, TypeError, ValueError) as e:
        raise PlatonicError(f"{path}: malformed `settings` record ({type(e).__name__}: {e})") from None


@attrs.frozen
class MemberSettings:
    """What a member of a world's zoo records of its world in its own marker: the world's name, the closed form's
    ridge factors, the LoRA route's recipe (LoraRouteConfig fields, its landmark ridge `ridge_b` included) and the
    recipe of the zoo's own fine-tunes (FinetuneConfig fields)."""

    world: str
    ridge_a: float = attrs.field(converter=partial(check_strength, what="ridge_a"), validator=attrs.validators.ge(0.0))
    ridge_b: float = attrs.field(converter=partial(check_strength, what="ridge_b"), validator=attrs.validators.ge(0.0))
    lora: Mapping[str, Any] = attrs.field(converter=dict)
    finetune: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)


def _marker(folder: Path) -> dict[str, Any]:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise PlatonicError(f"corrupt {folder / MARKER}: {exc}") from None
    return marker if isinstance(marker, dict) else {}


def stamp_members(zoo: str | os.PathLike) -> None:
    """Write the world's settings (`world_settings(zoo)`, and the manifest's fine-tuning recipe) into the marker of every
    member the manifest of `zoo` lists and whose folder exists, under `world`, keeping the marker's other keys (what the
    zoo builders call after each change of the manifest)."""
    folder = Path(zoo)
    settings, manifest = world_settings(folder), _manifest(folder) or {}
    record = {"world": settings.world, "ridge_a": settings.ridge_a, "ridge_b": settings.ridge_b,
              "lora": {k: v for k, v in settings.lora.items() if k != "ridge_b"}, "finetune": dict(manifest.get("finetune", {}))}
    for name in (n for n in manifest.get("members", {}) if (folder / n).is_dir()):
        marker = _marker(folder / name)
        write_text(folder / name / MARKER, json.dumps({**marker, "world": record}, indent=2, sort_keys=True) + "\n")


def member_settings(checkpoint: str | os.PathLike | None) -> MemberSettings | None:
    """The world settings recorded in the marker of the checkpoint folder `checkpoint` (`stamp_members`), else None
    (hub ids, files, and folders that are no zoo member)."""
    if checkpoint is None or not Path(checkpoint).expanduser().is_dir():
        return None
    folder = Path(checkpoint).expanduser()
    record = _marker(folder).get("world")
    if record is None:
        return None
    try:
        return MemberSettings(record["world"], record["ridge_a"], record["ridge_b"], {**record["lora"], "ridge_b": record["ridge_b"]},
                              record.get("finetune", {}))
    except (KeyError, TypeError, ValueError) as e:
        raise PlatonicError(f"{folder / MARKER}: malformed `world` record ({type(e).__name__}: {e})") from None
