"""Where a protocol file stands in git: a confirmation seed runs only from a committed, unchanged protocol.

A protocol decides on seeds named before they run; git is the record that they were. `git_state(path)` reads the
file's state (untracked, modified or staged since its last commit, or clean, with that commit's hash and time);
`committed(path)` returns it when clean and refuses otherwise, in one line naming the file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import attrs

from ...errors import PlatonicError


@attrs.frozen
class GitState:
    """`state`: "clean" (committed, unchanged since `commit`), "modified" (changes since `commit`, staged or not),
    "untracked" or "outside git"; `commit` / `committed_at`: the last commit that changed the file, and its
    committer date (ISO 8601); `head`: the checkout's HEAD."""

    path: str
    state: str
    commit: str | None = None
    committed_at: str | None = None
    head: str | None = None


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise PlatonicError("git is not installed: a protocol's confirmation seeds run only from a committed protocol file") from None


def git_state(path: str | Path) -> GitState:
    """The git state of file `path` (the module's docstring)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise PlatonicError(f"protocol file {path} does not exist")
    folder, name = path.parent, path.name
    if _git(folder, "rev-parse", "--show-toplevel").returncode != 0:
        return GitState(str(path), "outside git")
    head = _git(folder, "rev-parse", "HEAD").stdout.strip() or None
    if _git(folder, "ls-files", "--error-unmatch", "--", name).returncode != 0:
        return GitState(str(path), "untracked", head=head)
    last = _git(folder, "log", "-1", "--format=%H %cI", "--", name).stdout.split()
    if len(last) != 2:  # added to the index, never committed
        return GitState(str(path), "untracked", head=head)
    changed = _git(folder, "status", "--porcelain", "--", name).stdout.strip()
    return GitState(str(path), "modified" if changed else "clean", last[0], last[1], head)


def committed(path: str | Path) -> GitState:
    """The file's GitState when it is committed and unchanged since; PlatonicError otherwise."""
    state = git_state(path)
    if state.state != "clean":
        why = {"outside git": "is not in a git repository", "untracked": "is not committed",
               "modified": f"has changes since its last commit ({state.commit})"}[state.state]
        raise PlatonicError(f"protocol file {state.path} {why}: confirmation seeds run only from a protocol committed before "
                            "they run; commit it (git add + git commit) and run again")
    return state
