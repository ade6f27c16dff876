"""Family registry: a family name maps to its adapter's loader, config builder and default checkpoint.

Adding a family is one `register_family` call (see docs/architecture.md); the core never lists families:
the built-in ones are named with their modules in `platonic_sdk.adapters.FAMILY_MODULES`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

import attrs

from .adapters import CATALOG, FAMILY_MODULES
from .errors import UnknownFamilyError
from .named_registry import NamedRegistry

if TYPE_CHECKING:
    from .protocol.encoder import DualEncoder


@attrs.frozen
class FamilySpec:
    """How to build one family: `load(checkpoint, **options)` and `from_config(config=None, **options)`.

    `load` reads a hub id, open_clip pretrained tag, local folder or file; `from_config` builds random
    weights from a (small) config dict, which is how tests and the synthetic worlds make models.
    """

    name: str
    modality: str
    default_checkpoint: str | None
    load: Callable[..., DualEncoder]
    from_config: Callable[..., DualEncoder]
    description: str = ""


_FAMILIES: NamedRegistry[FamilySpec] = NamedRegistry("family", listing="known families", sort=True, casefold=True,
                                                     missing_error=UnknownFamilyError, taken_error=ValueError,
                                                     lazy=FAMILY_MODULES)


def register_family(spec: FamilySpec, *, replace: bool = False) -> FamilySpec:
    """Make `spec.name` loadable through `platonic_sdk.load`."""
    return _FAMILIES.register(spec.name, spec, replace=replace)


def family_name(name: str) -> str:
    """The family `name` spells (case-insensitive), checked without importing its adapter; an unknown name
    raises UnknownFamilyError with the nearest known name and the list."""
    return _FAMILIES.check(name)


def family(name: str) -> FamilySpec:
    """The registered spec of `name` (its built-in adapter imported on first use), or UnknownFamilyError."""
    found = family_name(name)
    try:
        return _FAMILIES.lookup(found)
    except ModuleNotFoundError as exc:  # an optional model library is not installed
        if exc.name is None or exc.name.startswith("platonic_sdk"):
            raise
        raise UnknownFamilyError(f"family {found!r} needs the '{exc.name}' package, which is not installed") from None


def family_facts(name: str) -> tuple[str, str | None, str]:
    """(modality, reference checkpoint, description) of a family: its registered spec's, else (a built-in family
    whose adapter is not imported yet) the catalog's without importing any model library, else its module's."""
    found = family_name(name)
    facts = _FAMILIES.entries.get(found) or CATALOG.get(found) or family(found)
    return facts.modality, facts.default_checkpoint, facts.description


def list_families(modality: str | None = None) -> list[str]:
    """Names of the known families (built-in and registered), optionally of one modality (read from the catalog; a
    family whose model library is not installed, and which the catalog does not hold, is left out)."""
    if modality is None:
        return _FAMILIES.names()
    out = []
    for name in _FAMILIES.names():
        try:
            if family_facts(name)[0] == modality:
                out.append(name)
        except UnknownFamilyError:  # its model library is not installed
            continue
    return out


def load(family_name: str, checkpoint: str | None = None, **options: Any) -> DualEncoder:
    """Load `family_name` from `checkpoint` (default: the family's reference checkpoint)."""
    spec = family(family_name)
    source = checkpoint or spec.default_checkpoint
    encoder = spec.load(source, **options)
    if source is not None and os.path.isdir(source):  # edits folded in by `save` are refused a second time
        from .protocol.encoder import read_marker

        encoder.folded_edits = tuple(read_marker(source).get("folded_edits", ()))
    return encoder


def from_config(family_name: str, config: dict | None = None, **options: Any) -> DualEncoder:
    """Build `family_name` with random weights from a config (None: the family's tiny test config)."""
    return family(family_name).from_config(config, **options)
