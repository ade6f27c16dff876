"""What a user reads is true: the README, docs/*.md, every `--help` and a rendered report name only files,
paths, anchors and method sections that exist, and every code block of the pages runs or parses.

Code blocks. Every ```python, ```sh / ```bash and ```toml block of README.md and docs/*.md is tested:

- a **runnable** block (no marker) runs as written, in a temporary folder: a page's Python blocks in
  order in one namespace (the guide's peft and feature-cache blocks follow its quickstart), a page's
  shell blocks in order in one bash session with the venv's `platonic` and `python` first on PATH, so
  `$Z` and the files one block writes reach the next. The quickstarts' results are checked (the printed
  accuracies are the zero-shot and the edited accuracy, the saved edit reloads, the target is restored).
  Commands there carry their own small options (`--lora-steps 60`); nothing is replaced.
- a block whose info string says **fragment** (```python fragment, ```bash fragment) cannot run here: it
  needs hub ids, several GPUs, a user's world, or it is the README's set-up, which makes a venv, installs
  the package and runs the long demo or the whole suite. It is parsed (ast.parse, `bash -n`), and every
  `platonic ...` command in it parses with the real argument parser. The short equivalents that run are
  elsewhere, and smaller: the demo command on a tiny zoo in tests/test_demo.py (the shipped zoo's full demo
  runs nowhere in the suite), torchrun with two gloo ranks in tests/test_distributed.py, a registered world
  in tests/test_demo.py.
- architecture.md's cell-method block is a plugin file: it is written as `my_method.py` and run with the
  command the page gives (`platonic grid --plugin my_method.py --methods closed_form,double_strength`),
  with small options (two families, one addition cell, no similarity study) so that it takes seconds.
- a toml block is read by `platonic grid --config` (keys, types and ranges), without running the grid.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.evaluate.report import render as report

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.S | re.M)

# Names the docs give to files the SDK writes or that a user supplies (not files of the repository).
WRITTEN = {"report.md", "report.json", "run.json", "studies.json", "study.md", "study.json", "platonic.json", "config.json",
           "adapter_config.json", "out/demo/report.md", "preprocessor_config.json", "tokenizer.json"}
PLACEHOLDERS = {"my_family.py", "my_method.py", "myworld.py"}
PACKAGE_DIRS = ("worlds", "evaluate", "transfer", "edits", "finetune", "training", "data")


def page_blocks(page: Path) -> list[tuple[str, set[str], str, int]]:
    """(language, info-string words, code, line) of each fenced block."""
    text = page.read_text()
    return [(m[1], set(m[2].split()), m[3], text[:m.start()].count("\n") + 1) for m in FENCE.finditer(text)]


# ------------------------------------------------------------------------------------------ references
def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    body = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", body, re.M)}


def method_sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "method.md").read_text(), re.M)}


def help_texts() -> dict[str, str]:
    parser = cli_parser.build_parser()
    out = {"platonic --help": parser.format_help()}
    out.update({f"platonic {name} --help": sub.format_help() for name, sub in cli_parser._subparsers(parser).items()})
    return out


def _entry(a: float, b: float) -> dict:
    return {"task_a": a, "task_b": b, "removed": a, "control": 70.0, "controls": {"control_x": 70.0}, "cells": 1}


def rendered_reports() -> dict[str, str]:
    """report.md of hand-made summaries: an image world run, a paper-image and a paper-audio benchmark."""
    out = {}
    for name, families, bench in (("image world", ["clip", "siglip"], None), ("paper-image", ["clip"], "paper-image"),
                                  ("paper-audio", ["clap-general"], "paper-audio")):
        summary = {
            "addition": {"cells": 1, "zero_shot": _entry(50.0, 50.0), "closed_form": _entry(60.0, 55.0), "label_reference": _entry(58.0, 56.0)},
            "negation": {"cells": 1, "zero_shot": _entry(50.0, 50.0), "closed_form": _entry(30.0, 0.0), "label_reference": _entry(20.0, 0.0)},
            "config": {"families": families, "describe": {"benchmark": f"{bench}: ..."} if bench else {"world": "image"}, "cells": [],
                       "settings": {"addition_strength": 0.5, "negation_strength": 1.0, "lora": {}}},
            "cells": {"records": 2, "resumed": 0, "passes": 2}, "timings": {"total": 1.0},
        }
        summary["checks"] = report.checks(summary)
        out[f"report.md ({name})"] = report.render(summary)
    return out


def code_files() -> list[Path]:
    """The package's, adapters', examples' and benchmarks' sources (docstrings, help strings, report text)."""
    return [p for d in ("platonic_sdk", "adapters", "examples", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))]


def repository_names() -> set[str]:
    """Base names of the repository's files (the package, adapters, tests, examples, benchmarks, docs)."""
    return {p.name for d in ("platonic_sdk", "adapters", "tests", "examples", "benchmarks", "docs")
            for p in (ROOT / d).rglob("*") if p.is_file()} | {"README.md", "pyproject.toml"}


def missing_references(text: str, where: Path | None = None, files: str = "md|py|json") -> list[str]:
    """What `text` names that does not exist: files (*.md, *.py, *.json; `files` chooses), repository paths
    (docs/..., platonic_sdk/..., worlds/x.py, ...), markdown link targets and their anchors, docs/method.md
    sections. Placeholders in capitals (DIR/report.md, FILE.py) and names of written files are not files."""
    names = repository_names()
    bad = []
    here = where.parent if where else ROOT

    def exists(path: str) -> bool:
        path = path.split("<")[0].rstrip("/")  # zoo/finetunes/<member>/...: the part before the placeholder
        return any((base / path).exists() for base in (ROOT, ROOT / "platonic_sdk", here))

    for name in set(re.findall(rf"(?<![\w/.${{}}-])([\w./<>-]+\.(?:{files}))\b", text)):
        first, stem = name.split("/")[0], name.split("/")[-1].split(".")[0]
        if name in WRITTEN or name in PLACEHOLDERS or first.isupper() or stem.isupper():
            continue
        if "/" in name:
            if not exists(name):
                bad.append(f"path {name}")
        elif name not in names:
            bad.append(f"file {name}")
    for path in set(re.findall(r"(?<![\w/.$-])((?:docs|platonic_sdk|adapters|tests|examples|benchmarks)/[\w./-]*)", text)):
        if not exists(path.rstrip(".")):
            bad.append(f"path {path}")
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):  # [text](target) or [text](target "title")
        if target.startswith(("http://", "https://", "mailto:")) or where is None or where.suffix != ".md":
            continue
        path, _, anchor = target.partition("#")
        page = (where.parent / path) if path else where
        if not page.exists():
            bad.append(f"link {target}")
        elif anchor and page.suffix == ".md" and anchor not in anchors(page):
            bad.append(f"anchor {target}")
    sections = method_sections()
    cited = re.findall(r"method\.md,? sec(?:tions?|s)?\.? ([\d]+(?:(?:, | and |-)\d+)*)", text)
    if where is not None and where.name == "method.md":
        cited += re.findall(r"\bsec\. ([\d]+(?:(?:, | and |-)\d+)*)", text)
    for group in cited:
        bad += [f"docs/method.md sec. {n}" for n in re.findall(r"\d+", group) if int(n) not in sections]
    for anchor in re.findall(r"method\.md#([\w-]+)", text):
        if anchor not in anchors(ROOT / "docs" / "method.md"):
            bad.append(f"anchor docs/method.md#{anchor}")
    if re.search(r"\bMETHOD\.md\b|\bMETHOD sec\.|/work/shared|\bshared/docs\b", text):
        bad.append("a citation of METHOD.md, which does not ship (cite docs/method.md)")
    return sorted(set(bad))


def test_the_method_page_has_numbered_sections_with_anchors():
    sections = method_sections()
    assert sections == set(range(1, max(sections) + 1)) and max(sections) >= 14
    assert "4-closed-form-operator-bank" in anchors(ROOT / "docs" / "method.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_names_only_what_exists(page):
    assert missing_references(page.read_text(), page) == []


def test_pyproject_names_only_what_exists():
    """pyproject.toml's comments and metadata cite files (README.md, tests/...) that exist."""
    assert missing_references((ROOT / "pyproject.toml").read_text(), ROOT / "pyproject.toml") == []


def test_every_help_text_names_only_what_exists():
    texts = help_texts()
    assert len(texts) >= 9  # platonic and each subcommand
    assert {k: missing_references(v) for k, v in texts.items() if missing_references(v)} == {}


def test_a_rendered_report_names_only_what_exists():
    reports = rendered_reports()
    assert "sec. 9" in reports["report.md (paper-audio)"]
    assert {k: missing_references(v) for k, v in reports.items() if missing_references(v)} == {}


def test_the_code_cites_only_docs_that_exist():
    """Docs, markdown files and method sections that sources name (their own output files they may name freely)."""
    found = {str(p.relative_to(ROOT)): missing_references(p.read_text(), p, files="md") for p in code_files()}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_checker_finds_what_does_not_exist():
    assert missing_references("see METHOD.md sec. 9") == ["a citation of METHOD.md, which does not ship (cite docs/method.md)"]
    assert missing_references("see docs/METHOD.md") == ["a citation of METHOD.md, which does not ship (cite docs/method.md)",
                                                        "path docs/METHOD.md"]
    assert missing_references("docs/method.md sec. 4 and 99; worlds/nowhere.py; docs/gone.md") == [
        "docs/method.md sec. 99", "path docs/gone.md", "path worlds/nowhere.py"]
    assert missing_references("[x](method.md#no-such-heading)", ROOT / "docs" / "user_guide.md") == [
        "anchor docs/method.md#no-such-heading", "anchor method.md#no-such-heading"]  # the link, and the method page's anchor
    assert missing_references('[set-up](install.md "how to install") and [ok](../README.md#worlds "the worlds")',
                              ROOT / "docs" / "user_guide.md") == ["file install.md", "link install.md"]  # a titled link too
    assert missing_references("# see docs/install.md", ROOT / "pyproject.toml") == ["path docs/install.md"]
    assert missing_references("docs/method.md#4-closed-form-operator-bank, sec. 1-3 of docs/method.md, report.md, "
                              "platonic_sdk/evaluate/report/render.py, worlds/zoo/clip") == []


# ------------------------------------------------------------------------------------------ code blocks
def platonic_commands(code: str) -> list[list[str]]:
    """The `platonic ...` (and `-m platonic_sdk.cli ...`) commands of a shell block, continued lines joined,
    as argument lists."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        found = re.search(r"(?:^|&&|\s)(?:\S*/)?(?:platonic|-m platonic_sdk\.cli) (.*)$", line.split("#")[0])
        if found:
            out.append([a for a in shlex.split(found[1]) if a != "..."])  # `...`: the options left out
    return out


def test_the_commands_in_the_text_parse():
    """Every complete `platonic ...` command quoted in the pages' text parses with the real parser; the ones
    with placeholders (S, N, DIR, <command>, ...) or cut short at an option (naming it) are prose."""
    parser = cli_parser.build_parser()
    checked = 0
    for page in PAGES:
        text = " ".join(FENCE.sub("", page.read_text()).split())
        for command in re.findall(r"`(platonic [^`]+)`", text):
            argv = shlex.split(command)[1:]
            if "..." in command or "<" in command or argv[-1].startswith("-") or any(re.fullmatch(r"[A-Z]{1,4}", a) for a in argv):
                continue
            parser.parse_args(argv)
            checked += 1
    assert checked >= 15


def test_every_block_runs_or_is_a_marked_fragment_that_parses(tmp_path):
    kinds = {"python": 0, "sh": 0, "toml": 0, "fragment": 0}
    parser = cli_parser.build_parser()
    for page in PAGES:
        for lang, words, code, line in page_blocks(page):
            where = f"{page.name}:{line}"
            assert lang in {"python", "sh", "bash", "toml", "mermaid"}, f"{where}: a ```{lang} block is not tested"
            assert words <= {"fragment"}, f"{where}: unknown marker {words}"
            if lang == "python":
                ast.parse(code, where)
            elif lang in ("sh", "bash"):
                assert subprocess.run(["bash", "-n"], input=code, text=True, capture_output=True).returncode == 0, where
                for argv in platonic_commands(code):  # every command's options exist (argparse exits on others)
                    argv = ["cpu" if before == "--device" else a for before, a in zip(["", *argv], argv)]  # this machine's
                    parser.parse_args([a for a in argv if a != "--help"])
            elif lang == "toml":
                config = tmp_path / f"{page.stem}-{line}.toml"
                config.write_text(code)
                table = next(k for k, v in tomllib.loads(code).items() if isinstance(v, dict))
                argv = [table, "--config", str(config)] + (["--out", "x"] if table == "grid" else [])
                cli_parser.apply_config(parser, argv, parser.parse_args(argv))  # keys, types and ranges as the command checks them
                kinds["toml"] += 1
            if lang in ("python", "sh", "bash"):
                kinds["fragment" if "fragment" in words else "python" if lang == "python" else "sh"] += 1
    assert kinds["python"] >= 5 and kinds["sh"] >= 2 and kinds["toml"] == 2, kinds


def run_python_page(page: Path, tmp_path: Path) -> tuple[dict, str]:
    """The page's runnable Python blocks in order, in one namespace, in `tmp_path`; (namespace, stdout)."""
    namespace: dict = {"__name__": "__docs__"}
    out = io.StringIO()
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            for lang, words, code, line in page_blocks(page):
                if lang == "python" and "fragment" not in words:
                    exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
    finally:
        os.chdir(old)
    return namespace, out.getvalue()


def check_quickstart(namespace: dict, printed: str, folder: Path) -> None:
    """The quickstart's edit raised the task, it printed the zero-shot and edited accuracies, the saved
    edit reloads equal, and its target ends with the weights it started with."""
    import torch

    from platonic_sdk.evaluate import accuracy
    from platonic_sdk.transfer import Edit
    from platonic_sdk.worlds import zoo
    from platonic_sdk.worlds.image import ImageWorld

    target, edit = namespace["target"], namespace["edit_quickstart"]
    task = ImageWorld().task("amber_shapes")
    pristine = zoo.member("siglip")
    assert all(torch.equal(a, b) for a, b in zip(target.model.state_dict().values(), pristine.model.state_dict().values()))
    zero_shot = accuracy(pristine, task)
    with edit.applied_to(pristine):
        edited = accuracy(pristine, task)
    numbers = [float(x) for x in re.findall(r"\d+\.\d+", printed)[:2]]
    assert numbers == pytest.approx([zero_shot, edited], abs=0.051) and edited > zero_shot
    assert torch.equal(Edit.load(folder / "edit.safetensors").operator, edit.operator)
    if "same" in namespace:  # the guide also saves the bank and rebuilds the edit from the file, without the model
        assert torch.equal(namespace["same"].operator, edit.operator)


@pytest.fixture
def keep_quickstart_edit(monkeypatch):
    """Remember the quickstart's edit (later blocks of the page rebind `edit`)."""
    from platonic_sdk.transfer import closed_form

    made = []
    edit = closed_form.OperatorBank.edit

    def remember(self, *args, **kwargs):
        made.append(edit(self, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(closed_form.OperatorBank, "edit", remember)
    return made


def test_the_readme_python_runs(tmp_path, keep_quickstart_edit):
    namespace, printed = run_python_page(ROOT / "README.md", tmp_path)
    check_quickstart({**namespace, "edit_quickstart": keep_quickstart_edit[0]}, printed, tmp_path)


def test_the_user_guide_python_runs(tmp_path, keep_quickstart_edit):
    from peft import PeftModel

    from platonic_sdk.transfer import LoraEdit

    namespace, printed = run_python_page(ROOT / "docs" / "user_guide.md", tmp_path)
    check_quickstart({**namespace, "edit_quickstart": keep_quickstart_edit[0]}, printed, tmp_path)
    assert isinstance(namespace["model"], PeftModel) and isinstance(namespace["edit"], LoraEdit)  # the peft block
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    assert list((tmp_path / "features").rglob("*.safetensors"))  # the feature-cache block wrote its cache


def shell_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "OMP_WAIT_POLICY": "PASSIVE", "PLATONIC_CACHE_DIR": str(tmp_path / "cache")}


def test_the_user_guide_shell_blocks_run(tmp_path):
    blocks = [code for lang, words, code, _ in page_blocks(ROOT / "docs" / "user_guide.md")
              if lang in ("sh", "bash") and "fragment" not in words]
    script = "set -e\n" + "\n".join(blocks)
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=shell_env(tmp_path), capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for written in ("amber.safetensors", "bright.safetensors", "amber-lora.safetensors", "amber-adapter/adapter_config.json"):
        assert (tmp_path / written).is_file(), written


def test_the_architecture_cell_method_runs_as_a_plugin(tmp_path):
    blocks = [code for lang, words, code, _ in page_blocks(ROOT / "docs" / "architecture.md") if lang == "python" and "fragment" not in words]
    assert len(blocks) == 1 and "register_method(" in blocks[0]
    (tmp_path / "my_method.py").write_text(blocks[0])
    page = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    command = re.search(r"`(platonic grid --plugin my_method\.py [^`]+)`", page)[1]
    small = "--out run --families clip siglip --kinds addition --max-cells 1 --no-similarity --sweep-cells 1 --quiet"
    proc = subprocess.run(["bash", "-c", f"{command} {small}"], cwd=tmp_path, env=shell_env(tmp_path), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| closed form, 2x strength |" in (tmp_path / "run" / "report.md").read_text()
