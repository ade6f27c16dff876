"""A grid's identity covers the content of its probe items, so a descriptor of other data is refused.

Unit level: every kind of item (file path, `.path`, `fingerprint()`, PIL image, numpy array, Waveform) is
hashed by content, once per grid. Command level: `platonic bank` / `edit` rebuild a descriptor's grid from
the `--task` it records, refuse one computed on another folder (naming the --task to repeat), and write
nothing when they refuse.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from test_cli_errors import refused

import platonic_sdk as ps
from platonic_sdk import UTD, Grid, Split, Task, tasks
from platonic_sdk.cli import main as cli
from platonic_sdk.data.audio import Waveform
from platonic_sdk.errors import GridMismatchError, PlatonicError


def _grid(items, name="t") -> Grid:
    """A grid of all `items` (two classes, alternating labels)."""
    labels = np.arange(len(items)) % 2
    task = Task(name, ("cat", "dog"), Split(items, labels), Split(items[:2], labels[:2]))
    return Grid(name, range(len(items)), task.prompts(), items)


def _images(shift: int = 0) -> list[Image.Image]:
    return [Image.new("RGB", (4, 4), (10 * i + shift, 20, 30)) for i in range(4)]


def test_identity_follows_in_memory_content():
    base = _grid(_images())
    assert base.identity == _grid(_images()).identity  # equal content, new objects: same identity
    other = _images()
    other[2].putpixel((3, 3), (0, 0, 0))  # one pixel of one probe
    assert _grid(other).identity != base.identity
    arrays = [np.asarray(im) for im in _images()]
    assert _grid(arrays).identity == _grid([a.copy() for a in arrays]).identity
    assert _grid([a.astype(np.float32) for a in arrays]).identity != _grid(arrays).identity  # dtype counts
    waves = [Waveform(np.linspace(0, 1, 50, dtype=np.float32) * i, 8000) for i in range(4)]
    assert _grid(waves).identity == _grid([Waveform(w.samples.copy(), 8000) for w in waves]).identity
    assert _grid(waves).identity != _grid([Waveform(w.samples, 16000) for w in waves]).identity  # the rate counts
    # the ecosystem's audio items: datasets dicts and (samples, rate) pairs (numpy or torch samples)
    dicts = lambda rate: [{"array": w.samples.copy(), "sampling_rate": rate, "path": None} for w in waves]  # noqa: E731
    assert _grid(dicts(8000)).identity == _grid(dicts(8000)).identity != _grid(dicts(16000)).identity
    changed = dicts(8000)
    changed[1]["array"][7] += 1e-3
    assert _grid(changed).identity != _grid(dicts(8000)).identity
    pairs = [(torch.from_numpy(w.samples), 8000) for w in waves]
    assert _grid(pairs).identity == _grid([(w.samples.copy(), 8000) for w in waves]).identity  # a tensor is its array
    assert _grid(pairs).identity != _grid([(w.samples, 8001) for w in waves]).identity


def test_identity_of_path_items_is_their_file_bytes(tmp_path):
    paths = []
    for i, image in enumerate(_images()):
        image.save(tmp_path / f"{i}.png")
        paths.append(tmp_path / f"{i}.png")
    as_str = _grid([str(p) for p in paths])
    assert as_str.identity == _grid(paths).identity  # str or Path: the same bytes

    class Located:  # an item that knows its file
        def __init__(self, path):
            self.path = path

    assert _grid([Located(p) for p in paths]).identity == as_str.identity
    assert as_str.content == hashlib.sha256("".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in paths).encode()).hexdigest()
    _images(shift=1)[1].save(paths[1])  # the same file name, other pixels
    assert _grid([str(p) for p in paths]).identity != as_str.identity
    with pytest.raises(PlatonicError, match="cannot read item .*missing.png"):
        _grid([str(tmp_path / "missing.png"), *map(str, paths[1:])]).identity


class Ref:
    """An item reference as a streamed split holds it: a path, the stored bytes, and a decode that counts."""

    loads = 0

    def __init__(self, path, stored=None):
        self.path, self.stored = str(path), stored

    def content(self) -> bytes:
        return self.stored if self.stored is not None else Path(self.path).read_bytes()

    def load(self):
        Ref.loads += 1
        return Image.open(self.path)


class Refs(list):
    """A sequence of references whose indexing would decode (like `items.Items`): `refs` holds them undecoded."""

    @property
    def refs(self) -> list:
        return list(super().__iter__())

    def __iter__(self):
        return (r.load() for r in self.refs)


def test_references_are_hashed_by_their_stored_bytes_without_decoding(tmp_path):
    for i, image in enumerate(_images()):
        image.save(tmp_path / f"{i}.png")
    files = [tmp_path / f"{i}.png" for i in range(4)]
    refs = _grid(Refs(Ref(p) for p in files))
    assert refs.identity == _grid([str(p) for p in files]).identity and Ref.loads == 0  # same bytes, nothing decoded
    rows = [Ref(f"dataset://rows/{i}", stored=f.read_bytes()) for i, f in enumerate(files)]  # no file on disk: content()
    assert _grid(rows).identity == refs.identity
    rows[3].stored += b"\0"
    assert _grid(rows).identity != refs.identity


def test_a_streamed_image_folder_is_hashed_by_file_bytes_without_decoding(tmp_path, monkeypatch):
    from platonic_sdk.data.images import ImageFile, image_folder_task

    _folder(tmp_path / "data", 0)
    monkeypatch.setattr(ImageFile, "load", lambda self: pytest.fail(f"decoded {self.path} to hash it"))
    grid = image_folder_task(tmp_path / "data", "colours").grid(per_class=2)
    assert grid.identity == Grid(grid.task, grid.probe_ids, grid.prompts, grid.items.paths).identity


def test_items_can_name_their_own_fingerprint_and_odd_items_are_refused():
    class Row:
        def __init__(self, key):
            self.key = key

        def fingerprint(self):
            return f"row-{self.key}"

    assert _grid([Row(i) for i in range(4)]).identity == _grid([Row(i) for i in range(4)]).identity
    assert _grid([Row(i) for i in range(4)]).identity != _grid([Row(i + 1) for i in range(4)]).identity
    with pytest.raises(PlatonicError, match="cannot fingerprint an item of type object"):
        _grid([object() for _ in range(4)]).identity


def test_each_probe_item_is_hashed_once_per_grid(monkeypatch):
    calls = []
    real = tasks.item_fingerprint
    monkeypatch.setattr(tasks, "item_fingerprint", lambda item: calls.append(1) or real(item))
    grid = _grid(_images())
    first = grid.identity
    assert grid.identity == first and grid.content and len(calls) == 4


def test_a_descriptor_of_other_data_is_refused_with_the_reason():
    grid = _grid(_images())
    twin = _grid(_images(shift=1))  # same task name, ids, prompts and class count; other pixels
    utd = UTD(torch.ones(grid.shape), grid.identity, grid.task)
    utd.check_grid(grid)
    with pytest.raises(GridMismatchError, match="differ in their probe items"):
        utd.check_grid(twin)
    # a file from before content identities carries the names-only hash: refused, with how to fix it
    old = UTD(torch.ones(grid.shape), grid.names_identity, grid.task)
    with pytest.raises(GridMismatchError, match="saved before grid identities covered the probe items.*recompute"):
        old.check_grid(grid)


# ---------------------------------------------------------------------------- the command line
def _folder(root: Path, shift: int) -> None:
    """Two classes of three 8x8 images; `shift` changes every pixel, not the layout."""
    for c, cls in enumerate(("red", "blue")):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (200 - 150 * c + shift, 40 * i, 60)).save(root / cls / f"{i}.png")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """Tiny clip (pre, fine-tuned) and siglip checkpoints, folders a/ and b/ (same layout, other pixels), and a
    descriptor computed on a/ with `--task colours=images:a`."""
    root = tmp_path_factory.mktemp("grid_identity")
    pre = ps.from_config("clip", seed=0)
    pre.save(str(root / "clip_pre"))
    with torch.no_grad():
        for p in pre.media_encoder.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    pre.save(str(root / "clip_ft"))
    ps.from_config("siglip", seed=2).save(str(root / "siglip"))
    _folder(root / "a", 0)
    _folder(root / "b", 50)
    assert run(root, "utd", "--family", "clip", "--checkpoint", "clip_pre", "--ft-checkpoint", "clip_ft",
               "--task", "colours=images:a", "--per-class", "2", "-o", "a.safetensors") == 0
    return root


def run(cwd: Path, *argv: str) -> int:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return cli.main([*argv, "--quiet"])
    finally:
        os.chdir(old)


def test_the_descriptor_records_its_task_spec(work):
    prov = UTD.load(work / "a.safetensors").provenance
    assert prov["task_spec"] == f"colours=images:{work / 'a'}"  # named, with an absolute path
    assert prov["task_options"]["test_fraction"] == 0.2 and prov["task_options"]["seed"] == 0


def test_bank_and_edit_rebuild_the_grid_from_the_recorded_spec(work, tmp_path):
    elsewhere = tmp_path  # another working folder: the recorded absolute path still finds a/
    (elsewhere / "a.safetensors").write_bytes((work / "a.safetensors").read_bytes())
    ckpt = str(work / "siglip")
    assert run(elsewhere, "bank", "--family", "siglip", "--checkpoint", ckpt, "--descriptor", "a.safetensors", "-o", "bank.safetensors") == 0
    assert run(elsewhere, "edit", "--family", "siglip", "--checkpoint", ckpt, "--add", "a.safetensors", "--strength", "0.5", "-o", "edit.safetensors") == 0
    # the same operator as the Python API on the task built by hand from a/
    from platonic_sdk.data.images import image_folder_task
    from platonic_sdk.io import load_tensors
    from platonic_sdk.transfer import OperatorBank

    grid = image_folder_task(work / "a", "colours").grid(per_class=2)
    bank = OperatorBank(ps.load("siglip", ckpt))
    bank.add_grid(grid)
    operators, _, _ = load_tensors(elsewhere / "bank.safetensors", "operator_bank")
    torch.testing.assert_close(operators["a"], bank.operator(UTD.load(work / "a.safetensors")))


def test_a_descriptor_of_another_folder_is_refused_naming_the_task_to_repeat(work, capsys):
    common = ("--family", "siglip", "--checkpoint", "siglip", "--task", "colours=images:b")
    line = refused(capsys, work, "differ in their probe items", "bank", *common, "--descriptor", "a.safetensors", "-o", "bank_b.safetensors")
    assert f"repeat `--task colours=images:{work / 'a'}`" in line
    refused(capsys, work, f"repeat `--task colours=images:{work / 'a'}`", "edit", *common, "--add", "a.safetensors", "-o", "edit_b.safetensors")
    # the right data with another split seed: the flag that differs is named too
    refused(capsys, work, "--seed 0", "bank", "--family", "siglip", "--checkpoint", "siglip", "--task", "colours=images:a", "--seed", "5",
            "--descriptor", "a.safetensors", "-o", "bank_seed.safetensors")


def test_data_changed_since_the_descriptor_is_refused(work, capsys, tmp_path):
    copy = tmp_path / "data"
    _folder(copy, 0)
    utd_file = tmp_path / "c.safetensors"
    assert run(work, "utd", "--family", "clip", "--checkpoint", "clip_pre", "--ft-checkpoint", "clip_ft",
               "--task", f"colours=images:{copy}", "--per-class", "2", "-o", str(utd_file)) == 0
    for path in (copy / "red").iterdir():  # every image changes, the folder layout does not
        Image.new("RGB", (8, 8), (1, 2, 3)).save(path)
    refused(capsys, work, "changed since it was computed", "bank", "--family", "siglip", "--checkpoint", "siglip",
            "--descriptor", str(utd_file), "-o", "bank_changed.safetensors")
    for cls in ("red", "blue"):  # the data is gone: say which --task to give
        for path in (copy / cls).iterdir():
            path.unlink()
        (copy / cls).rmdir()
    refused(capsys, work, "give --task colours=KIND:PATH", "bank", "--family", "siglip", "--checkpoint", "siglip",
            "--descriptor", str(utd_file), "-o", "bank_gone.safetensors")


def test_a_split_content_covers_items_and_labels():
    items = _images()
    split = Split(items, [0, 1, 0, 1])
    assert split.content == Split(_images(), [0, 1, 0, 1]).content
    assert split.content != Split(_images(), [1, 0, 0, 1]).content  # labels count
    other = _images()
    other[0].putpixel((0, 0), (1, 1, 1))
    assert split.content != Split(other, [0, 1, 0, 1]).content


def test_a_run_folder_refuses_a_resume_on_changed_data(tmp_path):
    """Workspace settings record each task's data; a run folder begun on them refuses other data by name."""
    from platonic_sdk.data.images import image_folder_task
    from platonic_sdk.evaluate.measure.workspace import Workspace
    from platonic_sdk.evaluate.run.runfolder import RunFolder

    _folder(tmp_path / "data", 0)
    models = {"clip": ps.from_config("clip", seed=0)}

    def settings():
        task = image_folder_task(tmp_path / "data", "colours", test_fraction=0.34)
        return Workspace(models, {"colours": task}, {}, per_class=2).settings()

    with RunFolder(tmp_path / "run") as run:
        run.begin(settings())
    recorded = (tmp_path / "run" / "run.json").read_bytes()
    with RunFolder(tmp_path / "run") as run:
        run.begin(settings())  # the same data: the run resumes
    Image.new("RGB", (8, 8), (1, 2, 3)).save(tmp_path / "data" / "blue" / "2.png")  # one image, same name
    with RunFolder(tmp_path / "run") as run, pytest.raises(PlatonicError, match=r"fingerprints\.data/colours:"):
        run.begin(settings())
    assert (tmp_path / "run" / "run.json").read_bytes() == recorded
