"""The SDK's files: the same object saves to the same bytes; a path that is a folder is refused naming the caller's
path; the temporary files that killed saves leave are removed by a later save into the same folder."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from platonic_sdk.descriptor import UTD
from platonic_sdk.edits.edit import Edit, OperatorEdit
from platonic_sdk.edits.lora_edit import LoraEdit
from platonic_sdk.errors import PlatonicError
from platonic_sdk.finetune.weightspace import TaskVector
from platonic_sdk.io import save_tensors
from platonic_sdk.protocol.binding import Target
from platonic_sdk.transfer.saved_bank import SavedBank

RNG = torch.Generator().manual_seed(0)
TARGET = Target({"proj.weight": (4, 6)}, "f" * 64, "clip", "ckpt/clip", 4)
META = {"zeta": 1, "alpha": {"y": [1, 2], "b": "x"}, "mid": None, "beta": 0.25}  # keys out of order, nested


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=RNG)


def _objects() -> dict[str, object]:
    """One object of each saved kind, with metadata of many keys in no particular order."""
    factors = {"layers.1.q": (_randn(2, 6), _randn(4, 2)), "layers.0.v": (_randn(2, 6), _randn(4, 2))}
    return {
        "utd": UTD(_randn(6, 3), "grid0", "shapes", {**META, "task_spec": "shapes"}, "blend"),
        "operator_edit": OperatorEdit(_randn(4, 4), 0.5, "projection", META, TARGET),
        "lora_edit": LoraEdit(factors, 2, 4.0, 0.75, {**META, "media_prefix": "vision_model"}, [0.5, 0.25], TARGET),
        "operator_bank": SavedBank({"teal": _randn(4, 3), "amber": _randn(4, 3)},
                                   {"teal": {"task": "t", "space": "blend"}, "amber": {"task": "a", "space": "blend", **META}},
                                   "projection", 0.1, 0.5, "clip", "ckpt/clip", TARGET, "the paper's ridge"),
        "task_vector": TaskVector({"b.weight": _randn(3, 3), "a.weight": _randn(3), "c.bias": _randn(2).double()},
                                  {**META, "family": "clip"}, TARGET),
    }


KINDS = ["utd", "operator_edit", "lora_edit", "operator_bank", "task_vector"]


def _header(path: Path) -> list[tuple[str, object]]:
    """The (key, value) pairs of a safetensors file's header metadata, in the order the file holds them."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    return dict(json.loads(data[8 : 8 + size], object_pairs_hook=list))["__metadata__"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_object_saves_to_the_same_bytes(tmp_path, kind):
    """Saved four times (safetensors writes the header's metadata in a hash map's order, which varies from one save to
    the next): the same bytes each time, metadata keys sorted, and the file loads back to the object."""
    obj = _objects()[kind]
    paths = [tmp_path / f"{i}.safetensors" for i in range(4)]
    for path in paths:
        obj.save(path)
    assert len({path.read_bytes() for path in paths}) == 1
    header = _header(paths[0])
    assert [k for k, _ in header] == ["format", "kind", "meta", "sdk_version"] and dict(header)["kind"] == kind
    meta = json.loads(dict(header)["meta"], object_pairs_hook=list)
    assert [k for k, _ in meta] == sorted(k for k, _ in meta)
    loaded = Edit.load(paths[0]) if kind.endswith("edit") else type(obj).load(paths[0])
    assert [torch.equal(a, b) for a, b in zip(_tensors(loaded), _tensors(obj), strict=True)] == [True] * len(_tensors(obj))


def _tensors(obj: object) -> list[torch.Tensor]:
    named = obj.tensors() if isinstance(obj, Edit) else getattr(obj, "operators", None) or getattr(obj, "deltas", None)
    return [obj.matrix] if isinstance(obj, UTD) else [named[k] for k in sorted(named)]


def test_the_same_lora_edit_writes_the_same_adapter_folder(tmp_path):
    edit = _objects()["lora_edit"]
    for name in ("a", "b"):
        edit.save_pretrained(tmp_path / name)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["adapter_config.json", "adapter_model.safetensors", "platonic.json"]
    assert [(tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files] == [True] * 3


def test_a_path_that_is_a_folder_or_inside_a_file_is_refused_naming_it(tmp_path):
    edit = _objects()["operator_edit"]
    (tmp_path / "edits").mkdir()
    (tmp_path / "notes.txt").write_text("a file")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(PlatonicError, match=f"^cannot write {tmp_path / 'edits'}: it is a folder; give the path of a file to write$"):
        edit.save(tmp_path / "edits")
    with pytest.raises(PlatonicError, match=f"^cannot write {tmp_path / 'notes.txt' / 'e.safetensors'}: a part of its folder "
                                            f"{tmp_path / 'notes.txt'} is a file, not a folder$"):
        edit.save(tmp_path / "notes.txt" / "e.safetensors")
    with pytest.raises(PlatonicError, match=f"cannot write the adapter folder {tmp_path / 'notes.txt'}: it is a file"):
        _objects()["lora_edit"].save_pretrained(tmp_path / "notes.txt")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no temporary file, nothing else


def _writer(target: Path) -> subprocess.Popen:
    """A process inside atomic_path(target), its temporary file half written, waiting to be killed."""
    code = ("import sys, time; from platonic_sdk.atomic import atomic_path\n"
            f"with atomic_path({str(target)!r}) as tmp:\n    tmp.write_bytes(b'half'); print('in', flush=True); time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "in"
    return proc


def test_a_later_save_in_the_folder_removes_what_killed_saves_left(tmp_path):
    """A writer killed with SIGKILL (no handler runs) leaves its temporary file; the next save of any file into that folder
    removes it. A live writer's, another host's, and files that are not this SDK's temporary files stay."""
    killed, alive = _writer(tmp_path / "x.safetensors"), _writer(tmp_path / "run.json")
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        left = {p.name for p in tmp_path.iterdir()}
        assert len(left) == 2 and not (tmp_path / "x.safetensors").exists() and not (tmp_path / "run.json").exists()
        (stale,) = [n for n in left if n.startswith(".x.safetensors.") and f".{killed.pid}." in n]
        keep = {f".x.safetensors.elsewhere.{killed.pid}.abc.platonic.tmp",  # another host's
                f".x.safetensors.{stale.split('.')[3]}.{killed.pid}.abc.tmp", ".notes.tmp", "draft.platonic.tmp"}  # not ours
        for name in keep:
            (tmp_path / name).write_bytes(b"")
        save_tensors(tmp_path / "other.safetensors", {"t": torch.ones(1)}, "test", {})
        assert {p.name for p in tmp_path.iterdir()} == left - {stale} | keep | {"other.safetensors"}
    finally:
        alive.kill()
        alive.wait()


def test_a_kill_mid_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "x.safetensors"
    save_tensors(target, {"t": torch.ones(2)}, "test", {"v": 1})
    old = hashlib.sha256(target.read_bytes()).hexdigest()
    proc = _writer(target)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert hashlib.sha256(target.read_bytes()).hexdigest() == old
