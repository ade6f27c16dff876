"""A world's tuned settings, read from its zoo's manifest: the one place they live.

A zoo folder holds its members (one folder each) and a manifest, `zoo.json`, whose `settings` record
carries what the world's experiments were tuned with:

    "settings": {"ridge_a": 0.1, "ridge_b": 0.5, "lora": {"lr": 0.003, "epochs": 50},
                 "addition_strength": 0.5, "negation_strength": 1.0, "controls": ["control_objects", ...]}

ridge_a / ridge_b are the closed form's ridge factors (relative to mean sigma(F)^2 and mean sigma(G)^2,
docs/method.md sec. 11); `lora` the LoRA route's recipe as `LoraRouteConfig` fields that differ from
its defaults (its landmark ridge is the world's ridge_b); the strengths those of addition and negation
cells; `controls` the world's control task names. `world_settings(zoo)` reads them; a model whose
checkpoint folder the manifest of its parent folder lists is a member of that zoo (`member_zoo`), so a
zoo copied anywhere carries its settings. `ridge.ridge_rule` and `transfer.lora.lora_recipe` pick a
member's ridge and LoRA recipe from here.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import attrs

from .errors import PlatonicError, check_strength

MANIFEST = "zoo.json"  # a zoo's manifest (the zoo builders write it)


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

    def record(self) -> dict[str, Any]:
        """The manifest's `settings` record of these settings (what `world_settings` reads back)."""
        return {"ridge_a": self.ridge_a, "ridge_b": self.ridge_b, "lora": {k: v for k, v in self.lora.items() if k != "ridge_b"},
                "addition_strength": self.addition_strength, "negation_strength": self.negation_strength,
                "controls": list(self.controls)}


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
                             record["negation_strength"], record["controls"])
    except (KeyError, TypeError, ValueError) as e:
        raise PlatonicError(f"{path}: malformed `settings` record ({type(e).__name__}: {e})") from None


def member_zoo(checkpoint: str | os.PathLike | None) -> Path | None:
    """The zoo folder (resolved) whose manifest lists `checkpoint`'s folder as a member, else None (hub
    ids, files, and folders no manifest lists, such as a zoo's `finetunes`)."""
    if checkpoint is None:
        return None
    folder = Path(checkpoint).expanduser()
    if not folder.is_dir():
        return None
    folder = folder.resolve()
    manifest = _manifest(folder.parent)
    return folder.parent if manifest is not None and folder.name in manifest["members"] else None


def member_settings(checkpoint: str | os.PathLike | None) -> WorldSettings | None:
    """The settings of the world whose zoo `checkpoint` is a member of (its manifest records them), else None."""
    zoo = member_zoo(checkpoint)
    if zoo is None or "settings" not in (_manifest(zoo) or {}):
        return None
    return world_settings(zoo)
