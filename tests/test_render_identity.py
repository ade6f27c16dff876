"""The image world's pictures are the same bytes as before `_scatter` and the box downsampling were
vectorised: against the one-by-one rejection sampler (kept here as the reference), numpy's block mean,
and digests of every task's pictures taken before the change."""

import hashlib

import attrs
import numpy as np
import pytest

from platonic_sdk.worlds.image import TASK_SPECS, ImageWorld, _scatter
from platonic_sdk.worlds.scenes import _box_mean

HASHES = {  # sha256[:16] of every image of each task (train then test), computed on commit 443110b, before the vectorised code
    '0': {
        'amber_shapes': '8acd0651c50e2c69',
        'amber_glyphs': '57a6d772a4300c4f',
        'amber_scribbles': '3ee3c65bbbbe2d70',
        'teal_shapes': '9b2ea3473a2f68cd',
        'violet_shapes': '0cf3a27f9876a5e7',
        'teal_backgrounds': '5f59ec79cf0603a4',
        'fine_patterns': 'ed7d695543daa8c1',
        'coarse_patterns': 'cf251ea4c91b3fd9',
        'dark_shapes': 'e0587ba3e3958cc7',
        'small_shapes': '17a1ef40b2627551',
        'tiny_counts': '3e1c8172f6834339',
        'large_counts': '40e693ccd967a82e',
        'glyph_positions': 'e1a95c85106a4185',
        'small_letters': 'e109fa623f8940f7',
        'control_objects': '2aa2b7570438a87a',
        'control_shapes': '652d7dd19f61d11e',
        'control_glyphs': '84f804320dc77f98',
        'control_counts': '5d0d58b44800c7bd',
        'corpus': '9247c87106bbd591',
    },
    '1': {
        'amber_shapes': 'd1dbce8ea413e90e',
        'amber_glyphs': '51a88b9eab04fd63',
        'amber_scribbles': '8be4169a0cc15224',
        'teal_shapes': 'b75232929bd2f5b0',
        'violet_shapes': '13f475355f69e01d',
        'teal_backgrounds': 'f859f438b4f546ac',
        'fine_patterns': '0b89076590728864',
        'coarse_patterns': '72ba165255fc587e',
        'dark_shapes': '58636533dc602d21',
        'small_shapes': '4f88794584b20e6e',
        'tiny_counts': '6de70258177ec105',
        'large_counts': '09cc17cb6ce4071d',
        'glyph_positions': '8ec1123d186916ff',
        'small_letters': '5b66faaefc0292a1',
        'control_objects': '3f087b34b15103fc',
        'control_shapes': '65eac7045e492793',
        'control_glyphs': 'fdec614b33d18b8c',
        'control_counts': '4376efdc9f83d818',
        'corpus': 'f20f2c1922830533',
    },
    '2': {
        'amber_shapes': '41002071fd1cdf25',
        'amber_glyphs': 'c9645970a334a426',
        'amber_scribbles': '522f270e547100b1',
        'teal_shapes': 'fa3997d94f1601e6',
        'violet_shapes': '6c21a756b1f4c4b1',
        'teal_backgrounds': 'ff3062211f67af41',
        'fine_patterns': '3ce029311e9d07c4',
        'coarse_patterns': '26fd9ca0bb0a8b79',
        'dark_shapes': '5cc12e8d892d148f',
        'small_shapes': '27b9f4c402c41419',
        'tiny_counts': 'fef8ac0ac229a7a9',
        'large_counts': '5d03ec6dab3c6711',
        'glyph_positions': 'ea19ba26da9d046b',
        'small_letters': 'c2fc09556fe76787',
        'control_objects': 'c2aad7282f3ae46b',
        'control_shapes': '9e48462ddbef5557',
        'control_glyphs': '815bb6ea1eb9d530',
        'control_counts': 'eab4b072ca43911b',
        'corpus': '9f49fb1265df523d',
    },
    '0 at 24': {
        'tiny_counts': '3e3736eb12607245',
        'large_counts': '678f2157a606360d',
        'control_counts': '9719b1a5a5a3db2b',
    },
}


def one_by_one(rng: np.random.Generator, count: int, radius: float, size: int = 32) -> tuple[tuple[float, float], ...]:
    """The reference: one candidate per draw, taken iff it is apart from every centre so far; 50 misses in a row restart."""
    margin = (radius + 1) / size
    centres: list[tuple[float, float]] = []
    misses = 0
    while len(centres) < count:
        c = tuple(float(v) for v in rng.uniform(margin, 1 - margin, size=2))
        if all(np.hypot(c[0] - o[0], c[1] - o[1]) * size > 2.3 * radius for o in centres):
            centres.append(c)
            misses = 0
        else:
            misses += 1
            if misses == 50:
                centres, misses = [], 0
    return tuple(centres)


@pytest.mark.parametrize("radius", [2.2, 3.5, 5.0, 6.2])
def test_scatter_takes_the_reference_centres_and_leaves_the_generator_where_it_would(radius):
    for i in range(30):
        for count in (1, 2, 3, 4):
            ours, theirs = np.random.default_rng([7, i, count]), np.random.default_rng([7, i, count])
            ours.integers(8)  # a buffered half-word in the generator's state, as the world's samplers leave it
            theirs.integers(8)
            assert _scatter(ours, count, radius) == one_by_one(theirs, count, radius)
            assert ours.bit_generator.state == theirs.bit_generator.state
            assert ours.integers(1 << 30) == theirs.integers(1 << 30)


def test_box_mean_is_numpys_block_mean_to_the_bit():
    rng = np.random.default_rng(0)
    for _ in range(200):
        canvas = rng.normal(size=(64, 64, 3)) * rng.uniform(1, 300)
        assert np.array_equal(_box_mean(canvas), canvas.reshape(32, 2, 32, 2, 3).mean(axis=(1, 3)))


def _digest(task) -> str:
    h = hashlib.sha256()
    for split in (task.train, task.test):
        for image in split.items:
            h.update(np.asarray(image).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_task_renders_the_bytes_it_rendered_before(seed):
    world = ImageWorld(seed=seed, train_per_class=3, test_per_class=3)
    images, captions = world.corpus(40)
    corpus = hashlib.sha256(images.tobytes() + "\n".join(captions).encode()).hexdigest()[:16]
    assert {n: _digest(world.task(n)) for n in TASK_SPECS if n != "handwritten_digits"} | {"corpus": corpus} == HASHES[str(seed)]
    if seed == 0:  # the counts tasks scatter 2-4 shapes: more of them
        world = ImageWorld(seed=0, train_per_class=24, test_per_class=24)
        before = {n: world.task(n) for n in HASHES["0 at 24"]}
        for n in world.controls:  # a control's train split held 4 items per class then; they are its first ones now
            if n in before:
                before[n] = attrs.evolve(before[n], train=before[n].train.subset(range(4 * before[n].num_classes)))
        assert {n: _digest(task) for n, task in before.items()} == HASHES["0 at 24"]
