"""The layer order of docs/architecture.md, checked on the source: every import (at module level or
inside a function) goes to the importer's layer or one below it, and no module imports itself back
through others (a function-local import that dodges a cycle is refused too)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top; a module belongs to the layer of its longest listed prefix (docs/architecture.md, Layers).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("errors", "atomic", "progress", "version", "lazy", "named_registry", "io", "zoo_settings", "ridge", "spaces", "strength", "linalg")),
    ("protocol", ("protocol",)),
    ("tasks and data", ("items", "tasks", "data")),
    ("family adapters", ("adapters", "registry")),
    ("encoding", ("encoding",)),
    ("edits", ("edits",)),
    ("descriptors", ("descriptor",)),
    ("training blocks", ("training",)),
    ("transfer", ("transfer",)),
    ("fine-tuning", ("finetune",)),
    ("worlds", ("worlds",)),
    ("evaluation: what to run", ("evaluate", "evaluate.plan")),  # "evaluate": the package's face, lazy names only
    ("evaluation: measuring", ("evaluate.measure",)),
    ("evaluation: reporting", ("evaluate.report",)),
    ("evaluation: running", ("evaluate.run",)),
    ("evaluation: deciding", ("evaluate.decide",)),
    ("interface", ("", "cli")),  # "": the package's own __init__
)
PACKAGE = "platonic_sdk"


# docs/architecture.md, The core: the modules that hold the method, in reading order; and the harness they never import
CORE = ("protocol.encoder", "linalg", "spaces", "strength", "ridge", "descriptor", "transfer.closed_form", "transfer.saved_bank",
        "training", "transfer.lora", "edits.edit", "edits.lora_edit", "protocol.stack", "protocol.binding", "io", "errors")
HARNESS = ("evaluate", "worlds", "cli")


class Import(NamedTuple):
    importer: str
    target: str
    where: str  # file:line
    local: bool  # inside a function


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) for platonic_sdk/ and adapters/ (imported as platonic_sdk.adapters)."""
    out = {}
    for top, prefix in (("platonic_sdk", [PACKAGE]), ("adapters", [PACKAGE, "adapters"])):
        for path in sorted((root / top).rglob("*.py")):
            parts = prefix + list(path.relative_to(root / top).with_suffix("").parts)
            package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def _local_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes that sit inside a function body."""
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def imports(root: Path) -> Iterator[Import]:
    """Every import of a package module, resolved to the module it names (`from a import b` names a.b
    when b is a submodule)."""
    known = modules(root)
    for name, (path, package) in known.items():
        tree = ast.parse(path.read_text(), str(path))
        local = _local_nodes(tree)
        here = name.split(".") if package else name.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here[: len(here) - node.level + 1] + [node.module or ""]).strip(".") if node.level else node.module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            where = f"{path.relative_to(root)}:{node.lineno}"
            for target in dict.fromkeys(targets):
                if target in known:
                    yield Import(name, target, where, id(node) in local)


def layer_of(name: str) -> int:
    """Index in LAYERS of the module's longest matching prefix."""
    rel = name[len(PACKAGE) + 1 :] if name != PACKAGE else ""
    best = max(
        ((len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
         if rel == p or (p and rel.startswith(p + "."))),
        default=None,
    )
    if best is None:
        raise KeyError(f"{name} is in no layer: add it to LAYERS here and to the Layers table of docs/architecture.md")
    return best[1]


def upward(root: Path) -> list[str]:
    """Imports of a higher layer, including the packages a target's import runs first (their __init__)."""
    out = []
    for imp in imports(root):
        parts = imp.target.split(".")
        for target in (".".join(parts[:k]) for k in range(2, len(parts) + 1)):  # the package's own __init__ runs first anyway
            if layer_of(target) > layer_of(imp.importer):
                kind = "inside a function " if imp.local else ""
                out.append(f"{imp.where}: {imp.importer} ({LAYERS[layer_of(imp.importer)][0]}) imports {kind}"
                           f"{target} ({LAYERS[layer_of(target)][0]}), a higher layer")
    return out


def cycles(root: Path) -> list[list[str]]:
    """Import cycles among package modules (each listed once, from its smallest member)."""
    graph: dict[str, set[str]] = {}
    for imp in imports(root):
        if imp.target != imp.importer:
            graph.setdefault(imp.importer, set()).add(imp.target)
    found, state = set(), {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                loop = path[path.index(nxt):]
                start = loop.index(min(loop))
                found.add(tuple(loop[start:] + loop[:start]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return [list(c) for c in sorted(found)]


def test_every_module_has_a_layer():
    names = list(modules(ROOT))
    for name in names:
        layer_of(name)  # raises, naming the module
    rel = {n[len(PACKAGE) + 1 :] if n != PACKAGE else "" for n in names}
    stale = [p for _, prefixes in LAYERS for p in prefixes if not any(r == p or r.startswith(p + ".") for r in rel)]
    assert not stale, f"LAYERS lists modules that do not exist: {stale}"


def test_the_architecture_page_lists_these_layers():
    """docs/architecture.md's Layers table: the same layers in the same order, each naming its modules."""
    text = (ROOT / "docs/architecture.md").read_text()
    table = text[text.index("## Layers"):].split("\n## ")[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]
    rows = [r for r in rows if r[0] != "layer"]
    assert [r[0] for r in rows] == [name for name, _ in LAYERS]
    for (name, prefixes), row in zip(LAYERS, rows):
        for prefix in prefixes:
            path = prefix.replace(".", "/")
            file = "__init__.py" if not prefix else f"{path}.py" if (ROOT / "platonic_sdk" / f"{path}.py").is_file() else f"{path}/"
            assert f"{file}`" in row[1], f"the {name} row of docs/architecture.md does not name {file}"


def test_every_package_is_installed():
    """pyproject's package list names every package folder (an editable install finds any; a wheel only those)."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert sorted(listed) == sorted(name for name, (_, package) in modules(ROOT).items() if package)


def test_imports_go_only_downward():
    found = upward(ROOT)
    assert not found, "imports against the layer order (docs/architecture.md):\n" + "\n".join(found)


def test_no_import_cycles():
    found = cycles(ROOT)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in found)


def harness_imports(root: Path) -> list[str]:
    """The harness modules a core module reaches through its imports (at module level or inside functions, through any
    number of other modules), each with the chain of imports that reaches it."""
    graph: dict[str, set[str]] = {}
    for imp in imports(root):
        graph.setdefault(imp.importer, set()).add(imp.target)
    within = lambda name, prefixes: any(name == f"{PACKAGE}.{p}" or name.startswith(f"{PACKAGE}.{p}.") for p in prefixes)  # noqa: E731
    found = []
    for start in sorted(n for n in modules(root) if within(n, CORE)):
        chains, todo = {start: [start]}, [start]
        while todo:
            here = todo.pop()
            for nxt in sorted(graph.get(here, ())):
                if nxt not in chains:
                    chains[nxt] = chains[here] + [nxt]
                    todo.append(nxt)
        found += [" -> ".join(chain) for name, chain in chains.items() if within(name, HARNESS)]
    return found


def test_the_core_imports_nothing_of_the_harness():
    found = harness_imports(ROOT)
    assert not found, "the core reaches evaluate/, worlds/ or the command line:\n" + "\n".join(found)


def test_the_architecture_page_opens_with_the_core_in_reading_order():
    text = (ROOT / "docs/architecture.md").read_text()
    assert text.index("## The core") < text.index("## Layers")
    section = text[text.index("## The core"):text.index("## Layers")]
    for prefix in CORE:
        path = prefix.replace(".", "/")
        file = f"{path}.py" if (ROOT / "platonic_sdk" / f"{path}.py").is_file() else f"{path}/"
        assert f"platonic_sdk/{file}`" in section or f"`{file}`" in section, f"The core does not name {file}"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package's sources, to break on purpose."""
    for top in ("platonic_sdk", "adapters"):
        for path in (ROOT / top).rglob("*.py"):
            dest = tmp_path / path.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(path.read_text())
    return tmp_path


@pytest.mark.parametrize("module, line, expected", [
    ("platonic_sdk/linalg.py", "from .evaluate import accuracy", "platonic_sdk.evaluate (evaluation: what to run)"),
    ("platonic_sdk/transfer/lora.py", "def f():\n    from ..finetune.source import finetune", "inside a function platonic_sdk.finetune"),
    ("platonic_sdk/descriptor.py", "from .transfer.lora import fit_lora", "platonic_sdk.transfer (transfer)"),
    ("adapters/clip.py", "import platonic_sdk.cli.commands", "platonic_sdk.cli.commands (interface)"),
])
def test_an_upward_import_is_found(tree: Path, module: str, line: str, expected: str):
    assert not upward(tree)
    path = tree / module
    path.write_text(path.read_text() + "\n\n" + line + "\n")
    found = upward(tree)
    assert len(found) >= 1 and all(f.startswith(module) for f in found)
    assert any(expected in f for f in found), found


def test_a_core_module_reaching_the_harness_is_found(tree: Path):
    assert not harness_imports(tree)
    path = tree / "platonic_sdk/protocol/binding.py"  # binding -> features (allowed), features -> worlds (the harness)
    path.write_text(path.read_text() + "\n\ndef f():\n    from ..encoding.features import encode_items\n")
    features = tree / "platonic_sdk/encoding/features.py"
    features.write_text(features.read_text() + "\n\ndef g():\n    from ..worlds import zoo\n")
    assert "platonic_sdk.protocol.binding -> platonic_sdk.encoding.features -> platonic_sdk.worlds.zoo" in harness_imports(tree)


def test_a_cycle_within_a_layer_is_found(tree: Path):
    assert not cycles(tree)
    path = tree / "platonic_sdk/errors.py"
    path.write_text(path.read_text() + "\n\ndef f():\n    from .linalg import utd\n")  # linalg imports errors
    assert ["platonic_sdk.errors", "platonic_sdk.linalg"] in cycles(tree)  # (and longer ones through modules linalg imports)
