"""A registry of plug-ins by name (families, merge methods, cell methods, worlds, benchmarks).

A name is taken once (registering it again is refused unless `replace=True`), and looking up a name
that is not there raises an error that lists the names that are. Loading built-in plug-ins on first
use stays with each registry's module, which knows where they live.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Collection, Generic, TypeVar

import attrs

from .errors import PlatonicError

T = TypeVar("T")


@attrs.define(eq=False)
class NamedRegistry(MutableMapping[str, T], Generic[T]):
    """Names -> registered values, read like a dict (`registry[name]` raises a plain KeyError; `lookup`
    raises `missing_error` naming the known names).

    `what` is the noun of the error messages ("merge method"); `listing` introduces the known names in
    them ("known", "registered"); `sort`: names in sorted order, else in registration order; `lazy`:
    names of built-in plug-ins that register on first use, listed before they are loaded;
    `replaceable`: the register function takes `replace=` (the duplicate error says so).
    """

    what: str
    listing: str = "known"
    sort: bool = False
    missing_error: type[Exception] = PlatonicError
    taken_error: type[Exception] = PlatonicError
    replaceable: bool = True
    lazy: Collection[str] = attrs.field(default=(), converter=tuple)
    entries: dict[str, T] = attrs.field(factory=dict)

    def register(self, name: str, value: T, *, replace: bool = False) -> T:
        """Store `value` under `name`; a taken name raises `taken_error` unless `replace`."""
        if name in self.entries and not replace:
            hint = " (pass replace=True to override)" if self.replaceable else ""
            raise self.taken_error(f"{self.what} {name!r} is already registered{hint}")
        self.entries[name] = value
        return value

    def names(self) -> list[str]:
        """The registered names and the lazy ones, sorted or in registration order (lazy ones last)."""
        names = list(dict.fromkeys([*self.entries, *self.lazy]))
        return sorted(names) if self.sort else names

    def lookup(self, name: str, *, note: str = "") -> T:
        """The value of `name`, or `missing_error` "unknown <what> 'name'; <listing>: a, b<note>"."""
        try:
            return self.entries[name]
        except KeyError:
            raise self.missing_error(f"unknown {self.what} {name!r}; {self.listing}: {', '.join(self.names())}{note}") from None

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
