"""Atomic file writes: write a temporary file next to the target, then rename it over the target.

A reader sees the old file or the new one, never half of one; a write that fails or is interrupted
leaves the old file as it was and removes its temporary file. New files get the usual mode
(0666 minus the umask), not mkstemp's 0600. A target that is a folder, or whose folder is a file, is
refused before anything is written, naming the path the caller gave.

A process killed outright (SIGKILL, power loss) runs no clean-up code, so it cannot remove its temporary
file. Temporary files are therefore named after their target, host and process
(`.NAME.HOST.PID.RANDOM.platonic.tmp`), and every write first removes, from the folder it writes in, the
ones that a process of this host which no longer runs left behind (a live writer's, or another host's on a
shared file system, are left alone).
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

from .errors import PlatonicError

SUFFIX = ".platonic.tmp"  # what ends the name of every temporary file of this module


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


def remove_stale(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files in `folder` that killed writers of this host left; returns what it removed."""
    folder, host, removed = Path(folder), _host(), []
    try:
        names = [n for n in os.listdir(folder) if n.startswith(".") and n.endswith(SUFFIX)]
    except OSError:
        return removed
    for name in names:
        fields = name[1 : -len(SUFFIX)].rsplit(".", 3)  # target, host, pid, random (the target's name may hold dots)
        if len(fields) != 4 or fields[1] != host or not fields[2].isdigit():
            continue  # another host's, or not of this pattern
        if int(fields[2]) != os.getpid() and not _running(int(fields[2])):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
                removed.append(folder / name)
    return removed


def _writable(path: Path) -> None:
    """Refuse a target that is a folder, or whose folder cannot be made because a part of its path is a file."""
    if path.is_dir():
        raise PlatonicError(f"cannot write {path}: it is a folder; give the path of a file to write")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise PlatonicError(f"cannot write {path}: a part of its folder {path.parent} is a file, not a folder") from None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in `path`'s folder; when the block ends it replaces `path` (os.replace)."""
    path = Path(path)
    _writable(path)
    remove_stale(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.{_host()}.{os.getpid()}.", suffix=SUFFIX, dir=path.parent)
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
