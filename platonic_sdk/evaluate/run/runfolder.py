"""A run folder that cannot silently mix runs (`platonic grid --out`, `platonic demo --out`).

- `run.json` records every setting that affects the results; a later run in the folder must bring
  exactly the same settings, else it is refused with the settings that differ;
- a lock (`fcntl.flock` on `.lock`) keeps a second process out while one runs;
- `cells.jsonl` holds one record per finished cell, flushed as it finishes (a resumed run skips
  them); a torn last line (a run killed mid-write) is dropped, a key recorded twice is refused;
- `studies/<name>.json` holds each study's result with the arguments it ran with, written as it
  finishes: a resumed run with the same arguments reads it back instead of computing it again;
- `finished.json` holds the stamp of a run that finished (`inputs_stamp`: the command's options, the SDK's
  files and the installed packages' versions): a rerun that brings the same stamp reads the report back
  without loading a model (`RunFolder.finished`); a run that starts removes it first;
- every other file is written atomically (temporary file, then rename).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
from pathlib import Path
from typing import IO, Any, Mapping

from ... import atomic
from ...errors import PlatonicError

RUN_FILE = "run.json"
CELLS_FILE = "cells.jsonl"
STUDIES_DIR = "studies"
LOCK_FILE = ".lock"
FINISHED_FILE = "finished.json"
REPORT_FILE = "report.json"


def _sdk_folders() -> list[Path]:
    """platonic_sdk's folder and its adapters' (pyproject maps `platonic_sdk.adapters` to a folder of its own)."""
    specs = [importlib.util.find_spec(name) for name in ("platonic_sdk", "platonic_sdk.adapters")]
    return list(dict.fromkeys(Path(p).resolve() for spec in specs for p in spec.submodule_search_locations or ()))


def inputs_stamp(options: Mapping[str, Any]) -> str:
    """blake2b of what a run's numbers follow from, without loading anything: `options` (the command's, as JSON),
    every file of the SDK's packages (relative path, size, modification time: the code, the adapters, the shipped
    zoos and their data) and every installed distribution's name and version."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps(dict(options), sort_keys=True, default=str).encode())
    for root in _sdk_folders():
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            info = path.stat()
            h.update(f"|{root.name}/{path.relative_to(root)}|{info.st_size}|{info.st_mtime_ns}".encode())
    for dist in sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()):
        h.update(f"|{dist}".encode())
    return h.hexdigest()


class RunFolderBusy(PlatonicError):
    """Another process holds the run folder's lock."""


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def setting_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """`name: old -> new` for every (nested, dotted) setting that differs between two records (as JSON: NaN equals NaN)."""
    a, b = _flat(old), _flat(new)
    show = lambda d, k: repr(d[k]) if k in d else "(absent)"  # noqa: E731
    same = lambda k: k in a and k in b and json.dumps(a[k], sort_keys=True) == json.dumps(b[k], sort_keys=True)  # noqa: E731
    return [f"{k}: {show(a, k)} -> {show(b, k)}" for k in sorted(a.keys() | b.keys()) if not same(k)]


def _as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def run_differences(a: str | os.PathLike, b: str | os.PathLike) -> list[str]:
    """What differs between the results of two finished run folders (`name: in a -> in b`; [] for the same
    run): run.json, studies.json, report.json but its timings and its count of resumed cells, and every
    cell's record but its seconds (e.g. a run across torchrun's ranks against a single process)."""
    def results(folder: Path) -> dict[str, Any]:
        read = lambda name: json.loads((folder / name).read_text())  # noqa: E731
        report = {k: v for k, v in read("report.json").items() if k != "timings"}
        report["cells"] = {k: v for k, v in report.get("cells", {}).items() if k != "resumed"}
        cells = {r["key"]: {k: v for k, v in r.items() if k != "seconds"} for r in read_records(folder / CELLS_FILE)}
        return {"run": read(RUN_FILE), "studies": read("studies.json"), "report": report, "cells": cells}

    return setting_differences(results(Path(a)), results(Path(b)))


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Records of a JSON lines file; a torn last line is dropped from the file, a repeated key refused."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    records, seen = [], {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if i != len(lines) - 1:
                raise PlatonicError(f"{path}: line {i + 1} is not JSON (the file is corrupt)") from None
            atomic.write_text(path, "".join(line + "\n" for line in lines[:i]))
            break
        key = record.get("key")
        if key in seen:
            raise PlatonicError(f"{path}: cell {key!r} is recorded twice (lines {seen[key]} and {i + 1}); the folder mixes runs")
        seen[key] = i + 1
        records.append(record)
    return records


def append_record(path: str | os.PathLike, record: dict[str, Any]) -> dict[str, Any]:
    """Append one JSON line (flushed: a killed process loses at most the line it was writing); returns
    the record as it reads back."""
    line = json.dumps(record, sort_keys=True)
    with open(path, "a") as fh:
        fh.write(line + "\n")
    return json.loads(line)


class RunFolder:
    """`with RunFolder(path) as run:` holds the folder's lock; `run.begin(settings)` checks or records them."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock: IO[str] | None = None
        self._created: list[Path] = []  # what entering made (the folder, its lock file), in order

    @property
    def cells_path(self) -> Path:
        return self.path / CELLS_FILE

    def __enter__(self) -> "RunFolder":
        if self.path.exists() and not self.path.is_dir():
            raise PlatonicError(f"run folder {self.path} is a file, not a folder")
        missing = [p for p in (self.path / LOCK_FILE, self.path, *self.path.parents) if not p.exists()]
        self._created = missing[::-1]  # outermost folder first, the lock file last
        self.path.mkdir(parents=True, exist_ok=True)
        lock = open(self.path / LOCK_FILE, "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            lock.close()
            raise RunFolderBusy(f"run folder {self.path} is in use by another run (pid {holder}); "
                                "wait for it to finish or use another output folder") from None
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self._release()
        if kind is not None and not (self.path / RUN_FILE).exists():  # failed before begin(): leave no trace
            for created in reversed(self._created):
                with contextlib.suppress(OSError):  # a folder something else wrote into stays
                    created.rmdir() if created.is_dir() else created.unlink()

    def _release(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def begin(self, settings: Mapping[str, Any]) -> None:
        """Record `settings` in a new folder; in a used one, refuse unless they equal the recorded ones."""
        if self._lock is None:
            raise PlatonicError(f"run folder {self.path} is not locked: use it as `with RunFolder(path) as run:`")
        settings = json.loads(json.dumps(settings, sort_keys=True))  # as it reads back from run.json
        run = self.path / RUN_FILE
        if run.is_file():
            recorded = json.loads(run.read_text()).get("settings", {})
            diff = setting_differences(recorded, settings)
            if diff:
                raise PlatonicError(f"run folder {self.path} holds a run with other settings: use another output folder, or "
                                    f"repeat the recorded settings to resume; {len(diff)} differ (recorded -> this run): "
                                    + "; ".join(diff))
        elif self.cells_path.exists():
            raise PlatonicError(f"run folder {self.path} holds {CELLS_FILE} but no {RUN_FILE} (an older or foreign run); "
                                "use another output folder")
        else:
            atomic.write_json(run, {"settings": settings})

    def finished(self, stamp: str) -> dict[str, Any] | None:
        """The report (report.json) of a run that finished here with inputs `stamp` (`inputs_stamp`), else None."""
        marker, report = self.path / FINISHED_FILE, self.path / REPORT_FILE
        if not (marker.is_file() and report.is_file()):
            return None
        with contextlib.suppress(ValueError, KeyError, TypeError):
            if json.loads(marker.read_text())["stamp"] == stamp:
                return json.loads(report.read_text())
        return None

    def unfinished(self) -> None:
        """Forget that a run finished here (a run starts: until it finishes, its report is not the folder's answer)."""
        (self.path / FINISHED_FILE).unlink(missing_ok=True)

    def mark_finished(self, stamp: str) -> Path:
        return self.write_json(FINISHED_FILE, {"stamp": stamp})

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.cells_path)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        return append_record(self.cells_path, record)

    def study(self, name: str, params: Any) -> Any | None:
        """The recorded result of study `name` when it ran with these `params` (compared as JSON), else None.

        The folder's settings (run.json) already pin the workspace and the spec; `params` are the study's
        own arguments, so that a study is read back only when it would compute the same thing."""
        path = self.path / STUDIES_DIR / f"{name}.json"
        if not path.is_file():
            return None
        record = json.loads(path.read_text())
        return record["result"] if _as_json(record.get("params")) == _as_json(params) else None

    def record_study(self, name: str, params: Any, result: Any) -> Any:
        """Record study `name`'s result and arguments (atomically); returns the result as it reads back, so
        that a fresh run and a resumed one go on with the same values."""
        text = json.dumps({"params": params, "result": result}, sort_keys=True)  # one line: the C encoder, fast on big studies
        (self.path / STUDIES_DIR).mkdir(exist_ok=True)
        atomic.write_text(self.path / STUDIES_DIR / f"{name}.json", text)
        return json.loads(text)["result"]

    def write_text(self, name: str, text: str) -> Path:
        return atomic.write_text(self.path / name, text)

    def write_json(self, name: str, value: Any) -> Path:
        return atomic.write_json(self.path / name, value)
