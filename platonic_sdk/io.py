"""Safetensors files with a JSON metadata header: the one on-disk format of the SDK (never pickles).

Every file records its `kind` (utd, operator_edit, lora_edit, task_vector, feature_cache, ...), the SDK
version and free-form JSON metadata; loading checks the kind and reports corrupt files clearly. Files
are written atomically (`atomic.atomic_path`): a crash or Ctrl-C leaves the old file or the new one,
never half of one, and the file gets the umask's mode (not safetensors' 0600). One object always gives
the same bytes: the metadata's keys are sorted, and safetensors lays tensors out by dtype and name.
`read_header` reads what a file is and what it records without reading a tensor or importing torch, so
that the command line checks its files before any model library loads.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import safetensors

from .atomic import atomic_path
from .errors import CheckpointError, check_real
from .version import __version__

if TYPE_CHECKING:
    from torch import Tensor

FORMAT = "platonic_sdk"
MARKER = "platonic.json"  # the JSON record this SDK writes into every checkpoint and adapter folder it saves


def save_tensors(path: str | os.PathLike, tensors: dict[str, Tensor], kind: str, meta: dict[str, Any]) -> None:
    """Write `tensors` and `meta` (JSON-serialisable) to a safetensors file tagged with `kind`, atomically; the same
    arguments give the same bytes."""
    import safetensors.torch

    header = {"format": FORMAT, "kind": kind, "sdk_version": __version__, "meta": json.dumps(meta, sort_keys=True)}
    contiguous = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    with atomic_path(path) as tmp:
        safetensors.torch.save_file(contiguous, str(tmp), metadata=header)
        _sort_metadata(tmp)


def _sort_metadata(path: Path) -> None:
    """Rewrite, in place, the header of the safetensors file at `path` with its metadata's keys sorted: safetensors
    writes them in the order of a hash map, which changes from one process to the next."""
    with open(path, "r+b") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        # the same strings, escaped only where JSON must: never longer than what safetensors wrote (padded with spaces)
        assert len(text) <= size, (len(text), size)
        fh.seek(8)
        fh.write(text.ljust(size))


def safetensors_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The string metadata of any safetensors file's header, read without any tensor (and without torch); CheckpointError
    when the file is missing or is not a readable safetensors file (damaged, cut short or of another format)."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: " + ("is a folder, not a file" if os.path.isdir(path) else "no such file"))
    try:
        with safetensors.safe_open(str(path), framework="numpy") as fh:
            return fh.metadata() or {}
    except Exception as exc:  # safetensors raises several types for truncated or foreign files
        reason = str(exc).removeprefix("Error while deserializing header: ")
        raise CheckpointError(f"{path} is not a safetensors file, or a damaged one ({reason})") from None


def read_header(path: str | os.PathLike, kind: str | None = None) -> tuple[str, dict[str, Any]]:
    """(kind, meta) of a file written by `save_tensors`, read from its header alone; `kind` given means it must match.
    CheckpointError names the file when it is missing, unreadable, not written by this SDK or of another kind."""
    header = safetensors_metadata(path)
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path} was not written by platonic_sdk (no '{FORMAT}' header)")
    if not isinstance(header.get("kind"), str) or not header["kind"]:
        raise CheckpointError(f"{path} has a platonic_sdk header without a 'kind' (what the file holds); it is damaged or "
                              "was not written by save_tensors")
    if kind is not None and header["kind"] != kind:
        raise CheckpointError(f"{path} holds a {header['kind']!r}, expected a {kind!r}")
    try:
        meta = json.loads(header.get("meta", "{}"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} has corrupt metadata ({exc})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path} has corrupt metadata (not a JSON object)")
    return header["kind"], meta


def load_tensors(
    path: str | os.PathLike, kind: str | None = None, real: bool = False
) -> tuple[dict[str, Tensor], dict[str, Any], str]:
    """Read a file written by `save_tensors`: (tensors, meta, kind).

    `kind` given means it must match; `real` means every tensor must hold real floating-point numbers
    (complex, bool or integer tensors are refused rather than silently converted).
    """
    import safetensors.torch

    found, meta = read_header(path, kind)
    try:
        tensors = safetensors.torch.load_file(str(path))
    except Exception as exc:  # a header that reads, over tensors that do not
        raise CheckpointError(f"{path} is a damaged safetensors file ({exc})") from None
    if real:
        for name, t in tensors.items():
            check_real(t, f"{path}: tensor {name!r}")
    return tensors, meta, found


def require(path: str | os.PathLike, what: str, tensors: dict[str, Tensor], meta: dict[str, Any],
            names: tuple[str, ...] = (), fields: dict[str, type | tuple[type, ...]] | None = None) -> None:
    """Raise CheckpointError naming `path` unless it holds the tensors `names` and the metadata `fields`
    with values of their types (`what`: the kind of file in words, e.g. "descriptor file")."""
    missing = [f"tensor {n!r}" for n in names if n not in tensors]
    missing += [f"metadata field {k!r}" for k in (fields or {}) if k not in meta]
    if missing:
        raise CheckpointError(f"{path} is a malformed {what}: it has no {', '.join(missing)}")
    for key, types in (fields or {}).items():
        value = meta[key]
        if not isinstance(value, types) or isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            expected = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
            raise CheckpointError(f"{path} is a malformed {what}: its {key!r} is {value!r} ({type(value).__name__}), not a {expected}")


def file_kind(path: str | os.PathLike) -> str | None:
    """The `kind` of a file that `save_tensors` wrote (read from its header only), else None."""
    try:
        return read_header(path)[0]
    except CheckpointError:
        return None
