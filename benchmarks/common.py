"""Shared helpers of the benchmark scripts: device timing, synthetic inputs, a random-weight CLIP, output."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # benchmarks never touch the model hub
ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("platonic_sdk") is None:  # a source checkout that is not installed
    sys.path.insert(0, str(ROOT))

import platonic_sdk  # noqa: E402

if importlib.util.find_spec("platonic_sdk.adapters") is None:
    # not installed (the GPU machine): map the top-level adapters/ folder as pyproject's package-dir does
    platonic_sdk.__path__.append(str(ROOT))

# ViT-L/14 at 224 px (the vision tower of openai/clip-vit-large-patch14), projection to 768
VIT_L14 = {
    "projection_dim": 768,
    "vision_config": {
        "image_size": 224,
        "patch_size": 14,
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
    },
}
# a small ViT the CPU runs in seconds
VIT_SMALL = {
    "projection_dim": 128,
    "vision_config": {
        "image_size": 64,
        "patch_size": 8,
        "hidden_size": 128,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
    },
}


def sync(device: torch.device | str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(device: torch.device | str, fn: Callable[[], Any], repeats: int = 1) -> tuple[float, Any]:
    """(best wall seconds over `repeats` runs with device work finished, fn's last result)."""
    best, out = float("inf"), None
    for _ in range(max(1, repeats)):
        sync(device)
        start = time.perf_counter()
        out = fn()
        sync(device)
        best = min(best, time.perf_counter() - start)
    return best, out


def unit_rows(n: int, d: int, seed: int, device: str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Unit rows with a dominant shared direction, like real embeddings."""
    gen = torch.Generator().manual_seed(seed)
    common = torch.randn(d, generator=gen)
    x = torch.randn(n, d, generator=gen) + 0.5 * d**0.5 * common / common.norm()
    return torch.nn.functional.normalize(x, dim=1).to(device=device, dtype=dtype)


def random_images(n: int, size: int, seed: int = 0) -> list[np.ndarray]:
    """n random size x size RGB uint8 arrays."""
    rng = np.random.default_rng(seed)
    return list(rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8))


def clip_encoder(config: dict[str, Any], device: str = "cpu", seed: int = 0):
    """Random-weight CLIP (transformers CLIPModel) through the SDK's clip adapter.

    The adapter module is used directly rather than through the registry, because the registry imports
    every built-in family and the GPU machine has no open_clip.
    """
    from transformers import CLIPConfig

    from platonic_sdk.adapters._hf import deep_merge, text_config_for
    from platonic_sdk.adapters.clip import TINY_CONFIG, CLIPEncoder

    cfg = deep_merge(TINY_CONFIG, config)
    tokenizer, cfg["text_config"] = text_config_for(None, cfg["text_config"])
    return CLIPEncoder.build(CLIPConfig(**cfg), tokenizer, family="clip", seed=seed, device=device).eval()


def report(title: str, results: dict[str, Any], json_path: str | None = None) -> dict[str, Any]:
    """Print `results` as aligned lines (and write them as JSON when a path is given)."""
    print(f"== {title}")
    width = max(map(len, results)) if results else 0
    for key, value in results.items():
        shown = f"{value:.4g}" if isinstance(value, float) else value
        print(f"  {key:<{width}}  {shown}")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


def bench_parser(doc: str, sizes: Any) -> argparse.ArgumentParser:
    """The options every size-graded benchmark takes: --device, --size (a key of `sizes`), --threads, --json."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", choices=sorted(sizes), default="small")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave as is)")
    parser.add_argument("--json", default=None, metavar="PATH")
    return parser


def parse_bench(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """Parse, then set torch's CPU threads when --threads asks for a number."""
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args
