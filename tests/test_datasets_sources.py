"""Datasets in the layouts researchers keep on disk, each built here in a temporary folder, read as a task
(from Python and as a CLI spec) and classified zero-shot with a zoo model.

Every image's colour encodes its class, so each test checks that items and labels were paired as the
layout says; the zero-shot accuracy of the streamed task must equal that of the same images in memory.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from dataset_layouts import (
    PALETTE,
    cifar100,
    dtd,
    esc50,
    eurosat,
    gtsrb,
    imagenet_val,
    manifest,
    mnist,
    resisc45,
    save,
    stanford_cars,
    sun397,
    svhn,
    urbansound8k,
)

from platonic_sdk.cli import main as cli
from platonic_sdk.cli import parser as cli_parser
from platonic_sdk.cli.commands import task_options
from platonic_sdk.data import esc50_task, image_manifest_task, torchvision_task, urbansound8k_task
from platonic_sdk.data.specs import load_task
from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate import accuracy
from platonic_sdk.items import Items
from platonic_sdk.tasks import Split, Task


@pytest.fixture(scope="module")
def zoo_clip():
    from platonic_sdk.worlds.zoo import load_models

    return load_models(names=["clip"])["clip"]


def classified(task: Task, model, classes: int, per_split: tuple[int, int] | None = None) -> float:
    """Items decode to their class colour; accuracy equals that of the same images held in memory."""
    for split in (task.train, task.test):
        assert isinstance(split.items, Items)
        for item, label in zip(split.items, split.labels):
            pixel = np.asarray(item)[4, 4].astype(int)
            assert np.abs(pixel - PALETTE[int(label) % len(PALETTE)]).max() <= 12, (pixel, label)
    assert len(set(task.train.labels.tolist()) | set(task.test.labels.tolist())) == classes
    if per_split is not None:
        assert (len(task.train), len(task.test)) == per_split
    memory = Task("m", task.classnames, Split(list(task.train.items), task.train.labels), Split(list(task.test.items), task.test.labels), task.templates)
    got = accuracy(model, task)
    assert 0.0 <= got <= 100.0 and got == accuracy(model, memory)
    return got


def cli_args(*extra: str):
    return cli_parser.build_parser().parse_args(["evaluate", *extra])


# ------------------------------------------------------------------ torchvision layouts
LAYOUTS = {
    # dataset: (builder, classes present, (train, test) sizes or None for a seeded split, first class names)
    "eurosat": (eurosat, 2, None, ("annual crop", "forest")),
    "dtd": (dtd, 2, (4, 2), ("banded", "bubbly")),
    "gtsrb": (gtsrb, 2, (4, 3), ("speed limit 20 km/h", "speed limit 30 km/h", "speed limit 50 km/h")),
    "mnist": (mnist, 2, (4, 2), ("0", "1")),
    "svhn": (svhn, 2, (4, 2), ("0", "1", "2")),
    "cifar100": (cifar100, 2, (4, 2), ("apple", "aquarium fish")),
    "stanford_cars": (stanford_cars, 2, (4, 2), ("AM General Hummer SUV 2000", "Acura RL Sedan 2012")),
    "sun397": (lambda root: sun397(root, True), 2, (4, 2), ("abbey", "beach")),
    "resisc45": (resisc45, 2, None, ("airport", "baseball diamond")),
    "imagenet_val": (imagenet_val, 2, None, ("tench", "goldfish")),
}


@pytest.mark.parametrize("dataset", list(LAYOUTS))
def test_torchvision_layouts_read_with_their_official_splits(tmp_path, zoo_clip, dataset):
    build, classes, sizes, names = LAYOUTS[dataset]
    build(tmp_path / "data")
    task = torchvision_task(dataset, tmp_path / "data", test_fraction=0.34)
    assert task.name == dataset and task.classnames[: len(names)] == names
    if dataset == "mnist":  # grey digits: the red channel's level encodes the class
        for item, label in zip(task.test.items, task.test.labels):
            assert item.mode == "L" and np.asarray(item)[0, 0] == PALETTE[int(label)][0]
        accuracy(zoo_clip, task)
    else:
        classified(task, zoo_clip, classes, sizes or (4, 2))
    spec = load_task(f"mine=torchvision:{dataset}:{tmp_path / 'data'}", task_options(cli_args("--test-fraction", "0.34")))
    assert spec.name == "mine" and spec.classnames == task.classnames and spec.templates == task.templates
    assert spec.test.items.paths == task.test.items.paths


def test_templates_are_the_authors_one_per_task(tmp_path):
    eurosat(tmp_path / "e")
    assert torchvision_task("eurosat", tmp_path / "e").templates == ("a centered satellite photo of {}.",)
    resisc45(tmp_path / "r")
    assert torchvision_task("resisc45", tmp_path / "r").templates == ("a satellite photo of {}.",)
    assert torchvision_task("resisc45", tmp_path / "r", templates=["{}!"]).templates == ("{}!",)


def test_sun397_without_its_partition_files_takes_a_seeded_split(tmp_path):
    sun397(tmp_path, partition=False)
    task = torchvision_task("sun397", tmp_path, test_fraction=0.34, seed=1)
    assert (len(task.train), len(task.test)) == (4, 2) and sorted(task.test.labels.tolist()) == [0, 1]


@pytest.mark.parametrize("dataset", list(LAYOUTS))
def test_a_folder_in_another_layout_names_the_expected_one(tmp_path, dataset):
    from platonic_sdk.data.torchvision_sets import DATASETS

    (tmp_path / "wrong" / "some" / "thing").mkdir(parents=True)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(PlatonicError) as info:
        torchvision_task(dataset, tmp_path / "wrong")
    assert "not in the expected layout" in str(info.value) and DATASETS[dataset].layout in str(info.value)
    assert sorted(tmp_path.rglob("*")) == before  # nothing downloaded, extracted or written


def test_the_cli_names_the_expected_layout_in_one_line_and_writes_nothing(tmp_path, capsys):
    from platonic_sdk.data.torchvision_sets import DATASETS
    from platonic_sdk.worlds.zoo import ZOO_DIR

    (tmp_path / "wrong" / "2750").mkdir(parents=True)
    before = sorted(tmp_path.rglob("*"))
    status = cli.main(["evaluate", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--task", f"torchvision:eurosat:{tmp_path / 'wrong'}",
                       "--cache-dir", str(tmp_path / "cache"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("platonic evaluate: error:") and err.count("\n") == 1
    assert DATASETS["eurosat"].layout in err and sorted(tmp_path.rglob("*")) == before  # no cache folder either


def test_unknown_datasets_and_bad_specs_are_refused(tmp_path):
    with pytest.raises(PlatonicError, match="unknown torchvision dataset 'places365'"):
        torchvision_task("places365", tmp_path)
    with pytest.raises(PlatonicError, match="torchvision:DATASET:DIR"):
        load_task(f"torchvision:{tmp_path}", task_options(cli_args()))
    with pytest.raises(PlatonicError, match="coincide|same name"):
        imagenet = tmp_path / "in"
        imagenet_val(imagenet)
        (imagenet / "LOC_synset_mapping.txt").write_text("n01440764 crane\nn01443537 crane\n")
        torchvision_task("imagenet", imagenet)


def test_a_cifar_pickle_that_would_run_code_is_refused(tmp_path):
    cifar100(tmp_path)
    (tmp_path / "cifar-100-python" / "meta").write_bytes(pickle.dumps({"fine_label_names": print}))
    with pytest.raises(PlatonicError, match="refusing to unpickle builtins.print"):
        torchvision_task("cifar100", tmp_path)


# ------------------------------------------------------------------ image CSV manifests
def test_image_csv_manifests_with_and_without_a_split_column(tmp_path, zoo_clip):
    rows = []
    for c, cls in enumerate(("red", "green", "blue")):
        for i in range(4):
            save(tmp_path / "imgs" / f"{cls}{i}.png", c)
            rows.append((f"imgs/{cls}{i}.png", cls, "test" if i == 3 else "train"))
    split = manifest(tmp_path / "split.csv", rows)
    task = image_manifest_task(split)
    assert task.classnames == ("blue", "green", "red")
    colours_of = {"blue": 2, "green": 1, "red": 0}
    for item, label in zip(task.test.items, task.test.labels):
        assert tuple(np.asarray(item)[0, 0]) == PALETTE[colours_of[task.classnames[label]]]
    assert (len(task.train), len(task.test)) == (9, 3)
    accuracy(zoo_clip, task)
    plain = manifest(tmp_path / "plain.csv", [r[:2] for r in rows], header=("path", "label"))
    seeded = image_manifest_task(plain, test_fraction=0.25)
    assert (len(seeded.train), len(seeded.test)) == (9, 3)
    via_cli = load_task("mine=csv:split.csv", task_options(cli_args("--data-root", str(tmp_path))))  # `csv:` reads image manifests too
    assert via_cli.name == "mine" and via_cli.test.items.paths == task.test.items.paths


def test_image_manifest_errors_name_the_column(tmp_path):
    save(tmp_path / "a.png", 0)
    no_label = manifest(tmp_path / "m.csv", [("a.png", "x", "train")], header=("path", "class", "split"))
    with pytest.raises(PlatonicError, match="has no column 'label' \\(columns: path, class, split\\)"):
        image_manifest_task(no_label)
    odd = manifest(tmp_path / "o.csv", [("a.png", "x", "holdout")])
    with pytest.raises(PlatonicError, match="values \\['holdout'\\] are neither train nor test"):
        image_manifest_task(odd)
    mixed = manifest(tmp_path / "mixed.csv", [("a.png", "x", "train"), ("b.wav", "y", "test")])
    with pytest.raises(PlatonicError, match="neither only images"):
        load_task(f"csv:{mixed}", task_options(cli_args()))


# ------------------------------------------------------------------ ESC-50 and UrbanSound8K
@pytest.fixture(scope="module")
def zoo_clap():
    from platonic_sdk.worlds.audio import AUDIO_ZOO_DIR
    from platonic_sdk.worlds.zoo import member

    return member("clap-general", AUDIO_ZOO_DIR)


def test_esc50_and_urbansound8k_layouts_keep_their_folds(tmp_path, zoo_clap):
    esc = tmp_path / "ESC-50"
    esc50(esc)
    task = esc50_task(esc)
    assert task.classnames == ("chirping birds", "dog") and len(task.test) == 2 and len(task.train) == 8
    assert all(Path(p).name.startswith("5-") for p in task.test.items.paths)
    assert 0 <= accuracy(zoo_clap, task) <= 100
    assert load_task(f"esc50:{esc}", task_options(cli_args())).test.items.paths == task.test.items.paths

    us = tmp_path / "UrbanSound8K"
    urbansound8k(us)
    urban = urbansound8k_task(us, test_folds=(9, 10))
    assert urban.classnames == ("drilling", "siren") and len(urban.test) == 4
    assert {Path(p).parent.name for p in urban.test.items.paths} == {"fold9", "fold10"}
    assert 0 <= accuracy(zoo_clap, urban) <= 100
    for layout, fn in (("meta/esc50.csv", esc50_task), ("metadata/UrbanSound8K.csv", urbansound8k_task)):
        with pytest.raises(PlatonicError, match=f"expected layout: DIR/{layout}"):
            fn(tmp_path / "nowhere")
