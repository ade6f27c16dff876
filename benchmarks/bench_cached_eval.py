"""Closed-form edit evaluation: cached features (FeatureCache) vs folding the edit and re-encoding.

One operator from an OperatorBank is evaluated at K strengths on a test set, as a strength sweep does.
Baseline, per strength: fold, re-encode the test set, zero-shot accuracy (the steps of
evaluate.accuracy, keeping the logits), remove. Cached: encode the test set once, then each strength
is a matrix product and an argmax. Accuracies and logits must agree (to float32 rounding); random
weights often predict one class everywhere, so the logits are the real check.

    python benchmarks/bench_cached_eval.py                              # small ViT on the CPU
    python benchmarks/bench_cached_eval.py --device cuda --size large   # ViT-L/14 at 224 px
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from common import VIT_L14, VIT_SMALL, bench_parser, clip_encoder, parse_bench, random_images, report, timed

from platonic_sdk import UTD, OperatorBank, Split, Task
from platonic_sdk.encoding.features import encode_items, landmarks
from platonic_sdk.evaluate import FeatureCache, accuracy_of, predict
from platonic_sdk.linalg import unit_rows

SIZES = {
    "tiny": dict(config={}, n_test=64, strengths=5),
    "small": dict(config=VIT_SMALL, n_test=512, strengths=11),
    "large": dict(config=VIT_L14, n_test=1024, strengths=6),
}


def synthetic_task(image_size: int, n_test: int, classes: int = 10) -> Task:
    """Random images with random labels: accuracies are meaningless, their equality is not."""
    rng = np.random.default_rng(0)
    n_train = 5 * classes
    images = random_images(n_train + n_test, image_size, seed=1)
    labels = rng.integers(0, classes, n_train + n_test)
    return Task(
        "synthetic",
        [f"class {c}" for c in range(classes)],
        Split(images[:n_train], labels[:n_train]),
        Split(images[n_train:], labels[n_train:]),
    )


def run(device: str = "cpu", size: str = "small", batch_size: int = 64) -> dict[str, Any]:
    spec = SIZES[size]
    encoder = clip_encoder(spec["config"], device)
    task = synthetic_task(encoder.model.config.vision_config.image_size, spec["n_test"])
    grid = task.grid(per_class=5)
    bank = OperatorBank(encoder, batch_size=batch_size)
    bank.add_grid(grid)
    gen = torch.Generator().manual_seed(2)
    descriptor = UTD(torch.randn(grid.shape, generator=gen), grid.identity, task.name)
    edit = bank.edit(descriptor)
    strengths = np.linspace(0.5, 8.0, spec["strengths"]).tolist()

    def reencoded() -> list[tuple[float, torch.Tensor]]:
        """Per strength: fold, re-encode (as evaluate.accuracy does), remove; keep accuracy and logits."""
        out = []
        for strength in strengths:
            with edit.scaled(strength).applied_to(encoder):
                g, f = landmarks(encoder, task.prompts()), encode_items(encoder, task.test.items, batch_size)
                out.append((accuracy_of(predict(f, g), task.test.labels), f @ g.T))
        return out

    def cached_build() -> tuple[FeatureCache, torch.Tensor]:
        return FeatureCache.build(encoder, task.test, batch_size=batch_size), landmarks(encoder, task.prompts())

    encode_items(encoder, task.test.items[:batch_size], batch_size)  # warm-up outside the timings
    baseline_s, baseline = timed(device, reencoded)
    build_s, (cache, g) = timed(device, cached_build)
    eval_s, cached = timed(device, lambda: [cache.accuracy(g, edit.operator, a) for a in strengths])
    return {
        "device": device,
        "model": f"CLIP vision {spec['config'].get('vision_config', 'tiny test config')}",
        "test_items": spec["n_test"],
        "strengths": len(strengths),
        "reencode_s": baseline_s,
        "cache_build_s": build_s,
        "cache_eval_s": eval_s,
        "ms_per_strength_reencode": 1e3 * baseline_s / len(strengths),
        "ms_per_strength_cached": 1e3 * eval_s / len(strengths),
        "speedup_per_strength": baseline_s / eval_s,
        "speedup_incl_cache_build": baseline_s / (build_s + eval_s),
        "max_abs_accuracy_diff": max(abs(a - b) for (a, _), b in zip(baseline, cached)),
        "max_abs_logit_diff": max(
            float((logits - unit_rows(cache.embeddings(edit.operator, a)) @ g.T).abs().max())
            for (_, logits), a in zip(baseline, strengths)
        ),
        "accuracies_cached": cached,
    }


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser(__doc__, SIZES)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parse_bench(parser, argv)
    report("cached-feature evaluation", run(args.device, args.size, args.batch_size), args.json)


if __name__ == "__main__":
    main()
