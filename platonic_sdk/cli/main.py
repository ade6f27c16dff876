"""The `platonic` command: families, finetune, utd, bank, edit, evaluate, grid and demo.

`--plugin` imports a module or file before the command runs (a family registered there becomes
loadable). Options come from the command line or a TOML file (`--config run.toml`: top-level keys apply to every
subcommand, a [utd] / [grid] / ... table to one; command-line options win). Errors print one line
and exit with status 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Iterator, Sequence

from ..errors import PlatonicError
from . import checks as cli_checks
from .parser import apply_config, build_parser, parse


def load_plugin(name: str) -> None:
    """Import a module by name, or a Python file by path (under the name of its stem)."""
    import importlib
    import importlib.util
    from pathlib import Path

    if name.endswith(".py"):
        path = Path(name)
        if not path.is_file():
            raise PlatonicError(f"plugin file {name} does not exist")
        spec = importlib.util.spec_from_file_location(f"platonic_plugin_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # anything the plugin's code raises is the plugin's error, not ours
            del sys.modules[spec.name]
            raise PlatonicError(f"plugin {name} failed to import: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise PlatonicError(f"cannot import plugin {name!r}: {type(exc).__name__}: {exc}") from exc


RANKED = ("grid", "demo")  # the commands that run across torchrun's ranks (the experiment runner)


@contextlib.contextmanager
def ranks(args: argparse.Namespace) -> Iterator[None]:
    """Under torchrun: join the process group for the block (each rank's models on its device, see
    distributed.launch); `main` has refused the commands that would only repeat their work on every rank."""
    from ..encoding import distributed

    if not distributed.launched():
        yield
        return
    args.device = distributed.launch(args.device)
    try:
        yield
    finally:
        import torch.distributed as dist

        dist.destroy_process_group()


# the library's words for what a command-line user gives as a flag
KEYWORD_FLAGS = (
    ("pass allow_other_target=True (CLI: --allow-other-target)", "give --allow-other-target"),
    ("pass allow_other_base=True (CLI: --allow-other-base)", "give --allow-other-base"),
    ("allow_twice=True applies it", "--allow-twice applies it"),
    ("UTD.compute(..., space=...)", "platonic utd --space"),
)


def user_message(prefix: str, exc: BaseException) -> str:
    """`prefix` and the error in a command-line user's words (keywords as flags), on one line: never cut and never
    split, however long (a terminal wraps it; a script reads one line)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for words, flag in KEYWORD_FLAGS:
        text = text.replace(words, flag)
    return prefix + text


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `platonic` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parse(parser, argv)
    try:
        if args.config:
            args = apply_config(parser, argv, args)
        for plugin in args.plugin or ():
            load_plugin(plugin)
        cli_checks.check(args)
        if args.command not in RANKED and {"RANK", "WORLD_SIZE"} <= set(os.environ):  # under torchrun (distributed.launched)
            raise PlatonicError(f"`platonic {args.command}` runs in one process; only {' and '.join(RANKED)} run across torchrun's ranks")
        if args.command == "families":  # reads the adapters' catalog: no torch, no model library, no feature cache
            return int(args.func(args) or 0)
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        from ..encoding.feature_store import caching

        with ranks(args), contextlib.nullcontext() if args.no_cache else caching(args.cache_dir):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"platonic {args.command}: interrupted (rerun the same command to resume the run)", file=sys.stderr)
        return 130
    except (PlatonicError, OSError, ValueError) as exc:
        if args.debug:
            raise
        print(user_message(f"platonic {args.command}: error: ", exc), file=sys.stderr)
        return 2

