"""The README's and the user guide's Python quickstarts run exactly as written on the shipped zoo."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest
import torch

from platonic_sdk.evaluate import accuracy
from platonic_sdk.transfer import Edit
from platonic_sdk.worlds import zoo
from platonic_sdk.worlds.image import ImageWorld

ROOT = Path(__file__).resolve().parent.parent


def quickstart(path: Path, heading: str) -> str:
    """The first ```python block after `heading` in a markdown file."""
    text = path.read_text()
    after = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


@pytest.mark.parametrize("doc, heading", [("README.md", "## Quickstart in Python"), ("docs/user_guide.md", "## Python quickstart")])
def test_the_quickstart_runs_as_written(doc, heading, tmp_path):
    code = quickstart(ROOT / doc, heading)
    namespace: dict = {}
    out = io.StringIO()
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, doc, "exec"), namespace)
    finally:
        os.chdir(old)
    target, edit = namespace["target"], namespace["edit"]
    task = ImageWorld().task("amber_shapes")
    pristine = zoo.member("siglip")
    assert all(torch.equal(a, b) for a, b in zip(target.model.state_dict().values(), pristine.model.state_dict().values()))
    zero_shot = accuracy(pristine, task)
    with edit.applied_to(pristine):
        edited = accuracy(pristine, task)
    printed = [float(x) for x in re.findall(r"\d+\.\d+", out.getvalue())]
    assert printed == pytest.approx([zero_shot, edited], abs=0.051) and edited > zero_shot
    assert torch.equal(Edit.load(tmp_path / "edit.safetensors").operator, edit.operator)
    if "same" in namespace:  # the guide also saves the bank and rebuilds the edit from the file, without the model
        assert torch.equal(namespace["same"].operator, edit.operator)
