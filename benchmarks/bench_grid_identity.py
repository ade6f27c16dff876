"""Grid identity (content fingerprint of the probe items) vs encoding those probes once.

A grid's identity hashes every probe item once: file bytes for an image folder (references, not
decoded), the decoded arrays for in-memory images. The baseline is what any descriptor or operator on
the grid costs anyway: encoding the same probes with the pretrained model (a random-weight CLIP).

    python benchmarks/bench_grid_identity.py --threads 1                   # small ViT, 64 px PNGs
    python benchmarks/bench_grid_identity.py --size large --device cuda    # ViT-L/14, 224 px PNGs
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from common import VIT_L14, VIT_SMALL, bench_parser, clip_encoder, parse_bench, random_images, report, timed
from PIL import Image

from platonic_sdk import Grid
from platonic_sdk.data.images import image_folder_task
from platonic_sdk.encoding.features import encode_items

SIZES = {"small": dict(config=VIT_SMALL, image_size=64), "large": dict(config=VIT_L14, image_size=224)}


def run(device: str = "cpu", size: str = "small", classes: int = 10, per_class: int = 30) -> dict[str, Any]:
    spec = SIZES[size]
    encoder = clip_encoder(spec["config"], device)
    images = random_images(classes * (per_class + 2), spec["image_size"], seed=0)  # +2: the test split
    with tempfile.TemporaryDirectory() as root:
        for i, pixels in enumerate(images):
            folder = Path(root) / f"class_{i % classes}"
            folder.mkdir(exist_ok=True)
            Image.fromarray(pixels).save(folder / f"{i}.png")
        grid = image_folder_task(root, "bench", test_fraction=0.06).grid(per_class=per_class)
        files_s, _ = timed(device, lambda: Grid(grid.task, grid.probe_ids, grid.prompts, grid.items).identity, repeats=3)
        decoded = [grid.items[i] for i in range(len(grid.items))]  # PIL images in memory
        memory_s, _ = timed(device, lambda: Grid(grid.task, grid.probe_ids, grid.prompts, decoded).identity, repeats=3)
        encode_s, _ = timed(device, lambda: encode_items(encoder, decoded, 64), repeats=1)
    probes = grid.shape[0]
    return {
        "probes": probes,
        "identity_files_s": files_s,
        "identity_in_memory_s": memory_s,
        "encode_probes_s": encode_s,
        "identity_files / encode": files_s / encode_s,
        "identity_in_memory / encode": memory_s / encode_s,
    }


def main() -> None:
    parser = bench_parser(__doc__, SIZES)
    args = parse_bench(parser)
    report(f"grid identity vs encoding the probes ({args.size}, {args.device})", run(args.device, args.size), args.json)


if __name__ == "__main__":
    main()
