"""A registry of plug-ins by name (families, merge methods, cell methods, worlds, benchmarks).

A name is taken once (registering it again is refused unless `replace=True`), and looking up a name
that is not there raises an error that suggests the nearest name and lists the names that are. Built-in
plug-ins are listed by name with the module that registers them, which is imported on first lookup
(so listing names and refusing unknown ones import no plug-in's library).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, MutableMapping
from typing import Generic, Mapping, TypeVar

import attrs

from .errors import PlatonicError

T = TypeVar("T")


@attrs.define(eq=False)
class NamedRegistry(MutableMapping[str, T], Generic[T]):
    """Names -> registered values, read like a dict (`registry[name]` raises a plain KeyError; `lookup`
    raises `missing_error` naming the known names).

    `what` is the noun of the error messages ("merge method"); `listing` introduces the known names in
    them ("known", "registered"); `sort`: names in sorted order, else in registration order; `lazy`:
    built-in plug-ins by name, each with the module that registers it on import (first lookup), listed
    before they are loaded; `replaceable`: the register function takes `replace=` (the duplicate error
    says so); `casefold`: a name matches whatever its case (`SigLIP` is `siglip`); `unlisted`: names registered
    but left out of the errors' listing (members of a family the error's note names by its pattern).
    """

    what: str
    listing: str = "known"
    sort: bool = False
    missing_error: type[Exception] = PlatonicError
    taken_error: type[Exception] = PlatonicError
    replaceable: bool = True
    lazy: Mapping[str, str] = attrs.field(factory=dict, converter=dict)
    casefold: bool = False
    entries: dict[str, T] = attrs.field(factory=dict)
    unlisted: set[str] = attrs.field(factory=set)

    def register(self, name: str, value: T, *, replace: bool = False) -> T:
        """Store `value` under `name`; a taken name raises `taken_error` unless `replace`."""
        if name in self.entries and not replace:
            hint = " (pass replace=True to override)" if self.replaceable else ""
            raise self.taken_error(f"{self.what} {name!r} is already registered{hint}")
        self.entries[name] = value
        return value

    def names(self) -> list[str]:
        """The names, sorted, or the built-in (lazy) ones in their declared order, loaded or not, then the others
        in registration order (so the order never depends on which module happened to load first)."""
        names = list(dict.fromkeys([*self.lazy, *self.entries]))
        return sorted(names) if self.sort else names

    def canonical(self, name: str) -> str | None:
        """The known name that `name` spells (itself, or with `casefold` its case-insensitive match); None if unknown."""
        known = self.names()
        if name in known:
            return name
        if self.casefold:
            return next((k for k in known if k.casefold() == name.casefold()), None)
        return None

    def check(self, name: str, *, note: str = "") -> str:
        """The canonical spelling of `name` without loading it, or `missing_error` "unknown <what> 'name'
        (did you mean 'x'?); <listing>: a, b<note>"."""
        found = self.canonical(name)
        if found is None:
            known = [n for n in self.names() if n not in self.unlisted]
            close = difflib.get_close_matches(name.casefold() if self.casefold else name, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.missing_error(f"unknown {self.what} {name!r}{hint}; {self.listing}: {', '.join(known)}{note}")
        return found

    def lookup(self, name: str, *, note: str = "") -> T:
        """The value of `name` (its built-in module imported on first use), or `check`'s error."""
        found = self.check(name, note=note)
        if found not in self.entries and found in self.lazy:
            importlib.import_module(self.lazy[found])
        return self.entries[found]

    def __getitem__(self, name: str) -> T:
        return self.entries[name]

    def __setitem__(self, name: str, value: T) -> None:
        self.register(name, value)

    def __delitem__(self, name: str) -> None:
        del self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
