"""Atomic file writes: write a temporary file next to the target, then rename it over the target.

A reader sees the old file or the new one, never half of one; a write that fails or is interrupted
leaves the old file as it was and removes its temporary file. New files get the usual mode
(0666 minus the umask), not mkstemp's 0600.

A process killed outright (SIGKILL, power loss) cannot remove its temporary file, so temporary files
are named after their target, host and process (`.NAME.HOST.PID.RANDOM.tmp`), and a write first
removes the ones of the same target that a process of this host which no longer runs left behind
(a live writer's, or another host's on a shared file system, are left alone).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Any, Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it runs
        return True
    return True


def remove_stale(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary files of `path` left by killed writers of this host; returns what it removed."""
    path = Path(path)
    prefix, host, removed = f".{path.name}.", _host(), []
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return removed
    for name in names:
        fields = name[len(prefix):-len(".tmp")].rsplit(".", 3)
        if len(fields) != 3 or fields[0] != host or not fields[1].isdigit():
            continue  # another target's (a longer name that starts alike), another host's, or not ours
        if int(fields[1]) != os.getpid() and not _running(int(fields[1])):
            with contextlib.suppress(OSError):
                (path.parent / name).unlink()
                removed.append(path.parent / name)
    return removed


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in `path`'s folder; when the block ends it replaces `path` (os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.{_host()}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:  # on disk before the rename, so a crash cannot leave an empty file
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to `path` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | os.PathLike, value: Any) -> Path:
    """Write `value` as indented, key-sorted JSON to `path` atomically; returns the path."""
    return write_text(path, json.dumps(value, indent=1, sort_keys=True))
