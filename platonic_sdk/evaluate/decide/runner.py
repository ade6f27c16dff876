"""The decision runner: a protocol file's stage measured (or earlier runs read), judged and written.

    development   the development seeds: the choice (judge.choose); runs from an uncommitted file too
    confirmation  the confirmation seeds: whether the protocol's `chosen` holds (judge.hold); measured only from a
                  protocol committed in git and unchanged since (provenance.committed), whose commit the output records
    all           both, pooled (the figures over every replicate); measuring it needs the committed file too

`read` judges the runs of earlier outputs instead of measuring (their seeds must be the stage's, every world's).
The output (a JSON-ready dict) holds the protocol as read, its git state, the run's start and end times (UTC), the
records, the figures, every verdict and the outcome; `markdown(output)` is the report it prints.
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs

from ...errors import PlatonicError
from .figures import figures
from .judge import Verdict, choose, hold, judge
from .protocol import Protocol, load_protocol, protocol_from
from .provenance import committed, git_state
from .tables import candidates_table, frontiers_table, headline, preference_table

STAGES = ("development", "confirmation", "all")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_runs(paths: Sequence[str | Path], protocol: Protocol, seeds: Sequence[int]) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """({world: runs} pooled from earlier outputs, [each file's path and protocol record]); PlatonicError unless every
    world of the protocol holds exactly `seeds`, once each."""
    runs: dict[str, list[Any]] = {w: [] for w in protocol.worlds}
    sources = []
    for path in paths:
        try:
            earlier = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise PlatonicError(f"cannot read decision output {path}: {e}") from None
        if not isinstance(earlier, dict) or "runs" not in earlier:
            raise PlatonicError(f"{path} is no decision output (it holds no 'runs')")
        for world in protocol.worlds:
            runs[world] += earlier["runs"].get(world, [])
        sources.append({"path": str(path), "protocol": earlier.get("protocol")})
    for world, held in runs.items():
        found = [run["seed"] for run in held]
        if sorted(found) != sorted(seeds):
            raise PlatonicError(f"the files hold seeds {found or 'none'} of world {world}; the stage's seeds are {list(seeds)}")
    return runs, sources


def decide(path: str | Path, stage: str = "development", *, read: Sequence[str | Path] = (), progress: bool = False,
           say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run `stage` of the protocol file `path` (the module's docstring); `say` reports each replicate's time."""
    if stage not in STAGES:
        raise PlatonicError(f"the stage is one of {', '.join(STAGES)}, got {stage!r}")
    protocol = load_protocol(path)
    seeds = protocol.stage_seeds(stage)
    fresh = not read and bool(set(seeds) & set(protocol.seeds["confirmation"]))
    state = committed(path) if fresh else git_state(path)  # refuses before anything loads
    if stage == "confirmation" and protocol.chosen is None:
        raise PlatonicError(f"protocol file {path} names no chosen candidate: write the development run's choice under "
                            "'chosen' and commit it before the confirmation seeds run")
    started = _now()
    if read:
        runs, sources = read_runs(read, protocol, seeds)
    else:
        runs, sources = _measure(protocol, seeds, progress, say), []
    table = figures(protocol, runs)
    verdicts = judge(protocol, table)
    outcome: dict[str, Any] = {}
    if stage == "development":
        outcome["choice"] = attrs.asdict(choose(protocol, table, verdicts))
    elif stage == "confirmation":
        outcome["hold"] = attrs.asdict(hold(protocol, table, verdicts))
    return {
        "protocol": {"path": str(path), "name": protocol.name, "git": attrs.asdict(state), "data": protocol.data},
        "stage": stage, "seeds": list(seeds), "started": started, "finished": _now(), "read": sources,
        **outcome, "runs": runs, "figures": table,
        "verdicts": {w: {c: [attrs.asdict(v) for v in vs] for c, vs in by.items()} for w, by in verdicts.items()},
    }


def _measure(protocol: Protocol, seeds: Sequence[int], progress: bool, say: Callable[[str], None]) -> dict[str, list[Any]]:
    from ...encoding.feature_store import caching  # torch and the models: only when measuring
    from .measure import measure_replicate

    runs: dict[str, list[Any]] = {w: [] for w in protocol.worlds}
    with caching():
        for world in protocol.worlds:
            for seed in seeds:
                begun = time.perf_counter()
                runs[world].append(measure_replicate(protocol, world, seed, progress=progress))
                say(f"{world} seed {seed}: {time.perf_counter() - begun:.0f} s")
    return runs


def markdown(output: Mapping[str, Any]) -> str:
    """The report of a decide() output: provenance, outcome, headline, order of preference, candidates, frontiers."""
    protocol = protocol_from(output["protocol"]["data"])
    table = output["figures"]
    verdicts = {w: {c: [Verdict(**v) for v in vs] for c, vs in by.items()} for w, by in output["verdicts"].items()}
    git = output["protocol"]["git"]
    where = f"commit {git['commit']} ({git['committed_at']})" if git["state"] == "clean" else git["state"]
    lines = [f"# Decision protocol: {protocol.name or output['protocol']['path']}", "",
             f"Protocol file {output['protocol']['path']}, {where}; stage {output['stage']}, seeds "
             f"{', '.join(map(str, output['seeds']))}; run {output['started']} to {output['finished']}"
             + ("; read from " + ", ".join(s["path"] for s in output["read"]) if output["read"] else "") + ".", ""]
    if "choice" in output:
        choice = output["choice"]
        lines += [f"**Choice: {choice['candidate'] or '-'}** ({choice['reason']})", ""]
    if "hold" in output:
        h = output["hold"]
        lines += [f"**The choice {h['chosen']} {'holds' if h['holds'] else 'does not hold'}**: {'; '.join(h['reasons'])}", ""]
    lines += ["## Headline (cells pooled over seeds)", "", headline(protocol, table, verdicts), "",
              "## Order of preference", "", preference_table(protocol, table, verdicts), "",
              "## Candidates (spread: min..max over seeds)", "", candidates_table(protocol, table, verdicts), "",
              "## Frontiers (cells pooled over seeds)", "", frontiers_table(protocol, table)]
    return "\n".join(lines) + "\n"
