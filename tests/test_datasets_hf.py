"""Hugging Face `datasets` on disk (save_to_disk, parquet) with image or audio columns, read as tasks without
the hub and classified zero-shot with a zoo model. Skipped when the optional `datasets` package is missing."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

datasets = pytest.importorskip("datasets")

from platonic_sdk.cli.commands import task_options  # noqa: E402
from platonic_sdk.data import hf_task  # noqa: E402
from platonic_sdk.data.audio import Waveform, read_audio, write_audio  # noqa: E402
from platonic_sdk.data.specs import load_task  # noqa: E402
from platonic_sdk.errors import PlatonicError  # noqa: E402
from platonic_sdk.evaluate import accuracy  # noqa: E402
from platonic_sdk.items import Items, Row  # noqa: E402
from platonic_sdk.tasks import Split, Task  # noqa: E402

PALETTE = [(230, 20, 20), (20, 200, 30), (30, 40, 230)]
NAMES = ["red", "green", "blue"]


def png(c: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (12, 10), PALETTE[c]).save(out, format="PNG")
    return out.getvalue()


def image_split(labels: list[int]):
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=NAMES)})
    return datasets.Dataset.from_dict({"img": [{"bytes": png(c), "path": None} for c in labels], "label": labels}, features=features)


@pytest.fixture(scope="module")
def zoo_clip():
    from platonic_sdk.worlds.zoo import load_models

    return load_models(names=["clip"])["clip"]


def check(task: Task, model) -> None:
    for split in (task.train, task.test):
        assert isinstance(split.items, Items) and all(isinstance(r, Row) for r in split.items.refs)
        for item, label in zip(split.items, split.labels):
            assert tuple(np.asarray(item)[3, 3]) == PALETTE[int(label)]
    memory = Task("m", task.classnames, Split(list(task.train.items), task.train.labels), Split(list(task.test.items), task.test.labels))
    assert accuracy(model, task) == accuracy(model, memory)


def test_save_to_disk_with_train_and_test_splits(tmp_path, zoo_clip):
    datasets.DatasetDict({"train": image_split([0, 1, 2, 0, 1, 2]), "test": image_split([2, 1, 0])}).save_to_disk(str(tmp_path / "colours"))
    task = hf_task(tmp_path / "colours", image_column="img")
    assert task.classnames == tuple(NAMES) and (len(task.train), len(task.test)) == (6, 3)
    assert task.test.items.refs[0].content() == png(2) and task.test.items.paths[0].endswith("colours[test][0]")
    check(task, zoo_clip)
    via_cli = load_task(f"c=hf:{tmp_path / 'colours'}", task_options(_args()))
    assert via_cli.name == "c" and via_cli.test.items.paths == task.test.items.paths


def test_parquet_files_named_by_split(tmp_path, zoo_clip):
    (tmp_path / "pq" / "data").mkdir(parents=True)
    image_split([0, 1, 2, 2]).to_parquet(str(tmp_path / "pq" / "data" / "train-00000-of-00001.parquet"))
    image_split([1, 0]).to_parquet(str(tmp_path / "pq" / "data" / "test-00000-of-00001.parquet"))
    task = hf_task(tmp_path / "pq", cache_dir=str(tmp_path / "cache"))  # the one Image column is found
    assert (len(task.train), len(task.test)) == (4, 2)
    check(task, zoo_clip)
    image_split([0, 0, 1, 1, 2, 2]).to_parquet(str(tmp_path / "one.parquet"))
    single = hf_task(tmp_path / "one.parquet", cache_dir=str(tmp_path / "cache"), test_fraction=0.5, seed=0)
    assert (len(single.train), len(single.test)) == (3, 3) and single.name == "one"


def test_an_audio_column_reads_as_waveforms(tmp_path):
    clips = []
    for c in range(2):
        path = write_audio(tmp_path / f"{c}.wav", Waveform(0.3 * np.sin(np.arange(800) * (0.1 + 0.1 * c)), 8000))
        clips.append({"bytes": path.read_bytes(), "path": None})
    table = datasets.Dataset.from_dict({"audio": clips * 2, "label": ["low", "high"] * 2})
    table.cast_column("audio", datasets.Audio()).save_to_disk(str(tmp_path / "ds"))  # a cast: encoding needs torchcodec
    task = hf_task(tmp_path / "ds", audio_column="audio", test_fraction=0.5)
    assert task.classnames == ("high", "low") and task.templates == ("this is a sound of {}.",)
    for item, label in zip(task.test.items, task.test.labels):
        expected = read_audio(tmp_path / f"{1 - int(label)}.wav")  # "high" (0) is clip 1
        np.testing.assert_array_equal(item.samples, expected.samples)


def test_bad_columns_and_layouts_are_named(tmp_path):
    datasets.DatasetDict({"train": image_split([0, 1]), "test": image_split([1, 0])}).save_to_disk(str(tmp_path / "d"))
    with pytest.raises(PlatonicError, match="has no label column 'category' \\(columns: img, label\\)"):
        hf_task(tmp_path / "d", label_column="category")
    with pytest.raises(PlatonicError, match="has no image column 'image'"):
        hf_task(tmp_path / "d", image_column="image")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PlatonicError, match="save_to_disk"):
        hf_task(tmp_path / "empty")
    ints = datasets.Dataset.from_dict({"img": [{"bytes": png(0), "path": None}] * 4, "label": [0, 1, 0, 1]},
                                      features=datasets.Features({"img": datasets.Image(), "label": datasets.Value("int64")}))
    ints.save_to_disk(str(tmp_path / "ints"))
    with pytest.raises(PlatonicError, match="integers without class names"):
        hf_task(tmp_path / "ints")
    assert hf_task(tmp_path / "ints", classnames=["a", "b"], test_fraction=0.5).classnames == ("a", "b")


def test_a_row_that_fails_to_decode_is_named(tmp_path, zoo_clip):
    from platonic_sdk.encoding.features import site_features

    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=NAMES)})
    rows = [{"bytes": png(c % 3), "path": None} for c in range(5)] + [{"bytes": b"\x89PNG broken", "path": None}]
    datasets.Dataset.from_dict({"img": rows, "label": [0, 1, 2, 0, 1, 2]}, features=features).save_to_disk(str(tmp_path / "bad"))
    task = hf_task(tmp_path / "bad", test_fraction=0.5)
    items = task.train.items if "[5]" in "".join(task.train.items.paths) else task.test.items
    with pytest.raises(PlatonicError, match=r"cannot read image '.*bad\[all\]\[5\]'"):
        site_features(zoo_clip, items, batch_size=1, workers=1)


def _args():
    from platonic_sdk.cli import parser as cli_parser

    return cli_parser.build_parser().parse_args(["evaluate"])
