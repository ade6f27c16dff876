"""docs/reliability.md names the tests behind each guarantee: every one it names must exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tests() -> dict[str, set[str]]:
    """Test file (tests/NAME.py) -> the names of its test functions."""
    return {
        f"tests/{path.name}": {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
        for path in (ROOT / "tests").glob("test_*.py")
    }


def test_every_test_the_page_names_exists_in_the_file_it_names():
    page = (ROOT / "docs" / "reliability.md").read_text()
    tests = _tests()
    named = 0
    for section in re.split(r"\n## ", page)[1:]:
        files = re.findall(r"`(tests/test_\w+\.py)`", section)  # the section's files, e.g. (`tests/test_numbers.py`)
        for path, name in re.findall(r"`(?:(tests/test_\w+\.py)::)?(test_\w+)`", section):
            where = [path] if path else files
            assert any(name in tests.get(f, ()) for f in where), f"{name} is not a test in {where}"
            named += 1
    assert named >= 60  # the page names the tests of all eight guarantees
