"""The synthetic image world: determinism, disjoint splits, rendering and captions that tell the truth."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from platonic_sdk.errors import PlatonicError
from platonic_sdk.worlds.image import TASK_SPECS, ImageWorld, pretrain_scene
from platonic_sdk.worlds.scenes import BACKGROUNDS, COLOURS, SHAPES, TINTS, Scene, caption, plural, render


def _bytes(items) -> list[bytes]:
    return [np.asarray(im).tobytes() for im in items]


@pytest.fixture(scope="module")
def world() -> ImageWorld:
    return ImageWorld(seed=5, train_per_class=6, test_per_class=4)


def test_same_seed_same_bytes() -> None:
    a_img, a_cap = ImageWorld(seed=11).corpus(40)
    b_img, b_cap = ImageWorld(seed=11).corpus(40)
    c_img, _ = ImageWorld(seed=12).corpus(40)
    assert a_img.tobytes() == b_img.tobytes() and a_cap == b_cap
    assert a_img.tobytes() != c_img.tobytes()
    # an item does not depend on what was generated before it
    tail, tail_cap = ImageWorld(seed=11).corpus(10, offset=30)
    assert tail.tobytes() == a_img[30:].tobytes() and tail_cap == a_cap[30:]


@pytest.mark.parametrize("name", ["amber_shapes", "handwritten_digits", "control_objects"])
def test_tasks_are_deterministic(name: str) -> None:
    a = ImageWorld(seed=2, train_per_class=3, test_per_class=2).task(name)
    b = ImageWorld(seed=2, train_per_class=3, test_per_class=2).task(name)
    assert _bytes(a.train.items) == _bytes(b.train.items) and _bytes(a.test.items) == _bytes(b.test.items)
    assert np.array_equal(a.test.labels, b.test.labels)


def test_every_task_has_disjoint_balanced_splits(world: ImageWorld) -> None:
    for name, spec in TASK_SPECS.items():
        task = world.task(name)
        m = len(spec.classnames)
        assert task.classnames == spec.classnames and task.templates == (spec.template,)
        assert len(task.train) == 6 * m and len(task.test) == 4 * m  # controls too: their train splits are keep splits
        if spec.sampler is not None:  # generated tasks are balanced by construction
            assert np.bincount(task.test.labels, minlength=m).tolist() == [4] * m
        train, test = set(_bytes(task.train.items)), set(_bytes(task.test.items))
        assert not train & test, name
        grid = task.grid(per_class=2, seed=0)
        assert not set(_bytes(grid.items)) & test


def test_digit_test_pool_never_overlaps_any_seed_train_pool() -> None:
    trains = [set(_bytes(ImageWorld(seed=s, train_per_class=20, test_per_class=10).task("handwritten_digits").train.items)) for s in (0, 1)]
    tests = [set(_bytes(ImageWorld(seed=s, train_per_class=20, test_per_class=10).task("handwritten_digits").test.items)) for s in (0, 1)]
    assert not (trains[0] | trains[1]) & (tests[0] | tests[1])


def test_world_names_and_bad_task(world: ImageWorld) -> None:
    assert world.trio[2] not in world.transfer_tasks
    assert not set(world.controls) & set(world.transfer_tasks)
    assert set(world.trio[:2]) <= set(world.transfer_tasks)
    with pytest.raises(PlatonicError, match="unknown task"):
        world.task("no_such_task")


def test_render_draws_the_scene() -> None:
    scene = Scene(kind="shape", shape="square", colour="red", rgb=COLOURS["red"], background="black", size=10.0, centers=((0.5, 0.5),))
    img = np.asarray(render(scene)).astype(int)
    assert img.shape == (32, 32, 3)
    assert tuple(img[16, 16]) == COLOURS["red"]
    assert tuple(img[1, 1]) == BACKGROUNDS["black"]


def test_tint_is_a_convex_mix_towards_the_tint_colour() -> None:
    base = Scene(kind="shape", shape="circle", colour="blue", rgb=COLOURS["blue"], background="white", size=9.0, centers=((0.4, 0.6),), pattern="striped")
    tinted = attrs.evolve(base, tint="amber", tint_strength=0.4)
    clean = np.asarray(render(base)).astype(float)
    expected = 0.6 * clean + 0.4 * np.asarray(TINTS["amber"], dtype=float)
    assert np.abs(np.asarray(render(tinted)).astype(float) - expected).max() <= 1.0


def test_captions_only_state_true_attributes() -> None:
    rng = np.random.default_rng(0)
    colours, shapes = set(COLOURS), set(SHAPES)
    for _ in range(300):
        scene = pretrain_scene(rng)
        words = caption(scene, rng).rstrip(".").split()
        assert words, "empty caption"
        said_colours = [w for w in words if w in colours]
        said_shapes = [s for w in words for s in shapes if w in (s, plural(s))]
        assert all(c == scene.colour for c in said_colours)
        if scene.kind == "shape":
            assert all(s == scene.shape for s in said_shapes)
            if scene.count > 1:
                assert ("objects" in words) or plural(scene.shape) in words


def test_shipped_zoo_loads_and_reproduces_its_manifest() -> None:
    from platonic_sdk.encoding.zeroshot import accuracy
    from platonic_sdk.worlds import zoo

    manifest = zoo.read_manifest()
    world = ImageWorld(seed=manifest["world_seed"])
    assert len({m["family"] for m in manifest["members"].values()}) >= 4
    models = zoo.load_models(names=["clip", "siglip"])
    for name, enc in models.items():
        assert enc.family == manifest["members"][name]["family"] and enc.embed_dim == manifest["members"][name]["embed_dim"]
        for task in world.transfer_tasks:
            assert zoo.finetune_path(zoo.ZOO_DIR, name, task).is_file(), (name, task)
    task = world.task("amber_shapes")
    recorded = manifest["members"]["clip"]["accuracy"]["amber_shapes"]
    assert accuracy(models["clip"], task) == pytest.approx(recorded["zero_shot"], abs=1e-6)
    tuned = zoo.load_finetunes({"clip": models["clip"]}, ["amber_shapes"])[("clip", "amber_shapes")]
    assert accuracy(tuned, task) == pytest.approx(recorded["finetuned"], abs=0.5)  # fp16 task vector
