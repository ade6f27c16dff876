"""Task specs: one string names a task, for the command line and for Python alike (`load_task`).

A spec is `NAME`, a task that a provider of named tasks knows (the registered worlds: `amber_shapes`),
or `[NAME=]KIND:PATH` with KIND a registered data source: `images:DIR`, `audio:DIR`, `csv:FILE`,
`torchvision:DATASET:DIR`, `hf:DIR`, `esc50:DIR`, `urbansound8k:DIR`. A relative PATH is read under
`TaskOptions.data_root`. A new source is one `register_source` call (in a plug-in, say); a new set of
named tasks one `NAMED.register` of a `NamedTasks`.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import attrs

from ..errors import PlatonicError
from ..named_registry import NamedRegistry
from ..tasks import Task


@attrs.frozen
class TaskOptions:
    """What shapes a task beyond its spec: prompt `templates` (None: the source's own), the seeded split of
    sources without one (`test_fraction`, `seed`), and a world's draw (`world_seed`; items per class, None:
    the world's)."""

    data_root: str | None = None
    templates: tuple[str, ...] | None = attrs.field(default=None, converter=lambda v: tuple(v) if v else None)
    test_fraction: float = 0.2
    seed: int = 0
    world_seed: int = 0
    train_per_class: int | None = None
    test_per_class: int | None = None

    def record(self) -> dict[str, Any]:
        """The options that decide a task's items, labels and prompts (a descriptor records them)."""
        return {k: v for k, v in attrs.asdict(self).items() if k != "data_root"}


@attrs.frozen
class Source:
    """A data source: `load(path, name, detail, options)` reads the task at `path` (`detail`: the part
    between KIND and PATH, e.g. torchvision's dataset); `usage` shows the spec's form (`DIR`, `DATASET:DIR`)."""

    kind: str
    usage: str
    load: Callable[[Path, "str | None", "str | None", TaskOptions], Task]


@attrs.frozen
class NamedTasks:
    """A provider of tasks by name: `names(options)` lists them, `task(name, options)` builds one."""

    names: Callable[[TaskOptions], Sequence[str]]
    task: Callable[[str, TaskOptions], Task]


SOURCES: NamedRegistry[Source] = NamedRegistry("data source")
NAMED: NamedRegistry[NamedTasks] = NamedRegistry("named-task provider", lazy={"worlds": "platonic_sdk.worlds.registry"})


def register_source(kind: str, usage: str, load: Callable[[Path, "str | None", "str | None", TaskOptions], Task]) -> Source:
    """Make `[NAME=]kind:usage` a task spec read by `load(path, name, detail, options)`."""
    return SOURCES.register(kind, Source(kind, usage, load))


def spec_forms() -> list[str]:
    """The spec forms of the registered sources, e.g. `[NAME=]images:DIR`."""
    return [f"[NAME=]{s.kind}:{s.usage}" for s in SOURCES.values()]


@attrs.frozen
class ParsedSpec:
    """`[name=]kind:[detail:]path`; kind None for a named task (`path` is then its name)."""

    name: str | None
    kind: str | None
    detail: str | None
    path: str


def parse_spec(spec: str) -> ParsedSpec:
    """Split a spec; a spec whose prefix is no registered source is a named task."""
    name, sep, rest = spec.partition("=")
    if not sep:
        name, rest = None, spec
    kind, colon, where = rest.partition(":")
    if not colon or kind not in SOURCES:
        return ParsedSpec(None, None, None, spec)
    detail = None
    if SOURCES[kind].usage.count(":"):
        detail, colon, where = where.partition(":")
        if not colon or not detail:
            raise PlatonicError(f"a {kind} task spec is [NAME=]{kind}:{SOURCES[kind].usage}, got {spec!r}")
    return ParsedSpec(name or None, kind, detail, where)


def load_task(spec: str, options: TaskOptions | None = None) -> Task:
    """The Task a spec names (see the module's docstring)."""
    options = options or TaskOptions()
    parsed = parse_spec(spec)
    if parsed.kind is None:
        return _named_task(spec, options)
    path = Path(options.data_root or ".") / parsed.path
    return SOURCES[parsed.kind].load(path, parsed.name, parsed.detail, options)


def load_tasks(specs: Sequence[str], options: TaskOptions | None = None) -> dict[str, Task]:
    """{task name: Task} of several specs; two specs giving one name are refused."""
    tasks: dict[str, Task] = {}
    for spec in specs:
        task = load_task(spec, options)
        if task.name in tasks:
            raise PlatonicError(f"two task specs give a task named {task.name!r}; name one with NAME=KIND:PATH")
        tasks[task.name] = task
    return tasks


def spec_record(spec: str, task: Task, options: TaskOptions) -> dict[str, Any]:
    """How to rebuild `task` later: its spec (named, with an absolute path) and the options that shaped it."""
    parsed = parse_spec(spec)
    if parsed.kind is not None:
        kind = parsed.kind + (f":{parsed.detail}" if parsed.detail else "")
        spec = f"{task.name}={kind}:{os.path.abspath(Path(options.data_root or '.') / parsed.path)}"
    return {"task_spec": spec, "task_options": options.record()}


def check_task_spec(spec: str, options: TaskOptions | None = None) -> None:
    """Refuse a spec that is neither a data spec nor a named task, reading the providers' names only (no task is
    built, no model library loads: a usage error answers at once)."""
    if parse_spec(spec).kind is None:
        _provider_of(spec, options or TaskOptions())


def _provider_of(name: str, options: TaskOptions) -> NamedTasks:
    """The provider that names task `name`; else PlatonicError suggesting the nearest names."""
    known: list[str] = []
    for provider in map(NAMED.lookup, NAMED.names()):
        names = provider.names(options)
        if name in names:
            return provider
        known += names
    near = difflib.get_close_matches(name, known, n=3)
    raise PlatonicError(f"unknown task {name!r}" + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else "")
                        + f": not one of the {len(known)} named tasks of the worlds and not a data spec ({', '.join(spec_forms())})")


def _named_task(name: str, options: TaskOptions) -> Task:
    return _provider_of(name, options).task(name, options)


def _split(options: TaskOptions) -> dict[str, Any]:
    return {"test_fraction": options.test_fraction, "seed": options.seed}


def _templates(options: TaskOptions) -> dict[str, Any]:
    return {"templates": options.templates} if options.templates else {}


def _images(path: Path, name: str | None, detail: str | None, options: TaskOptions) -> Task:
    from .images import image_folder_task

    return image_folder_task(path, name, **_templates(options), **_split(options))


def _audio(path: Path, name: str | None, detail: str | None, options: TaskOptions) -> Task:
    from .audio import folder_task

    return folder_task(path, name, **_templates(options), **_split(options))


def _csv(path: Path, name: str | None, detail: str | None, options: TaskOptions) -> Task:
    """An image or audio CSV manifest (path, label, and split or fold), by the suffix of its items."""
    from .audio import AUDIO_SUFFIXES, manifest_task
    from .folders import read_manifest
    from .images import IMAGE_SUFFIXES, image_manifest_task

    rows = read_manifest(path) if path.is_file() else []
    suffixes = {Path(row.get("path") or "").suffix.lower() for row in rows}
    if suffixes and suffixes <= set(IMAGE_SUFFIXES):
        return image_manifest_task(path, name, **_templates(options), **_split(options))
    if suffixes and not suffixes <= set(AUDIO_SUFFIXES):
        raise PlatonicError(f"manifest {str(path)!r}: its `path` column names neither only images ({', '.join(IMAGE_SUFFIXES)}) "
                            f"nor only audio files ({', '.join(AUDIO_SUFFIXES)}), found {sorted(suffixes)}")
    return manifest_task(path, name, **_templates(options))


def _torchvision(path: Path, name: str | None, detail: str | None, options: TaskOptions) -> Task:
    from .torchvision_sets import torchvision_task

    return torchvision_task(detail, path, name, options.templates, **_split(options))


def _hf(path: Path, name: str | None, detail: str | None, options: TaskOptions) -> Task:
    from .hf import hf_task

    return hf_task(path, name=name, templates=options.templates, **_split(options))


def _layout(reader: str) -> Callable[[Path, "str | None", "str | None", TaskOptions], Task]:
    def load(path: Path, name: str | None, detail: str | None, options: TaskOptions) -> Task:
        from . import audio

        return getattr(audio, f"{reader}_task")(path, name or reader, **_templates(options))

    return load


for _kind, _usage, _load in (
    ("images", "DIR", _images), ("audio", "DIR", _audio), ("csv", "FILE", _csv), ("torchvision", "DATASET:DIR", _torchvision),
    ("hf", "DIR", _hf), ("esc50", "DIR", _layout("esc50")), ("urbansound8k", "DIR", _layout("urbansound8k")),
):
    register_source(_kind, _usage, _load)
