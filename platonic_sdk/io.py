"""Safetensors files with a JSON metadata header: the one on-disk format of the SDK (never pickles).

Every file records its `kind` (utd, operator_edit, lora_edit, task_vector, feature_cache, ...), the SDK
version and free-form JSON metadata; loading checks the kind and reports corrupt files clearly. Files
are written atomically (`atomic.atomic_path`): a crash or Ctrl-C leaves the old file or the new one,
never half of one nor a stray temporary file, and the file gets the umask's mode (not safetensors' 0600).
"""

from __future__ import annotations

import json
import os
from typing import Any

import safetensors.torch
from torch import Tensor

from .atomic import atomic_path
from .errors import CheckpointError, check_real
from .version import __version__

FORMAT = "platonic_sdk"
MARKER = "platonic.json"  # the JSON record this SDK writes into every checkpoint and adapter folder it saves


def save_tensors(path: str | os.PathLike, tensors: dict[str, Tensor], kind: str, meta: dict[str, Any]) -> None:
    """Write `tensors` and `meta` (JSON-serialisable) to a safetensors file tagged with `kind`, atomically."""
    header = {"format": FORMAT, "kind": kind, "sdk_version": __version__, "meta": json.dumps(meta, sort_keys=True)}
    contiguous = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    with atomic_path(path) as tmp:
        safetensors.torch.save_file(contiguous, str(tmp), metadata=header)


def load_tensors(
    path: str | os.PathLike, kind: str | None = None, real: bool = False
) -> tuple[dict[str, Tensor], dict[str, Any], str]:
    """Read a file written by `save_tensors`: (tensors, meta, kind).

    `kind` given means it must match; `real` means every tensor must hold real floating-point numbers
    (complex, bool or integer tensors are refused rather than silently converted).
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"no such file: {path}")
    try:
        with safetensors.safe_open(str(path), framework="pt") as fh:
            header = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as exc:  # safetensors raises several types for truncated or foreign files
        raise CheckpointError(f"{path} is not a readable safetensors file ({exc})") from None
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path} was not written by platonic_sdk (no '{FORMAT}' header)")
    if not isinstance(header.get("kind"), str) or not header["kind"]:
        raise CheckpointError(f"{path} has a platonic_sdk header without a 'kind' (what the file holds); it is damaged or "
                              "was not written by save_tensors")
    if kind is not None and header.get("kind") != kind:
        raise CheckpointError(f"{path} holds a {header.get('kind')!r}, expected a {kind!r}")
    try:
        meta = json.loads(header.get("meta", "{}"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} has corrupt metadata ({exc})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path} has corrupt metadata (not a JSON object)")
    if real:
        for name, t in tensors.items():
            check_real(t, f"{path}: tensor {name!r}")
    return tensors, meta, header["kind"]


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
    if not os.path.isfile(path):
        return None
    try:
        with safetensors.safe_open(str(path), framework="pt") as fh:
            header = fh.metadata() or {}
    except Exception:  # not a safetensors file
        return None
    return header.get("kind") if header.get("format") == FORMAT else None
