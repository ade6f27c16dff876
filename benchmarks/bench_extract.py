"""Feature extraction throughput: fp32 eager vs bf16 autocast vs torch.compile (vs DataLoader workers).

A random-weight CLIP vision tower built from config (ViT-L/14 at 224 px for --size large) runs through
platonic_sdk.encoding.features.site_features. Per mode: end-to-end images/s (preprocess + forward + copy back), model-only
images/s (forward on a ready batch), model FLOP utilisation of the model-only rate against --peak-tflops
(FLOPs counted by torch.utils.flop_counter), and the embedding error against fp32 eager (1 - cosine).
Autocast is a no-op off CUDA, so on the CPU that row measures only noise.

    python benchmarks/bench_extract.py --size small                  # CPU
    python benchmarks/bench_extract.py --device cuda --size large    # H200: peak defaults to 989 TFLOPS
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch
from common import VIT_L14, VIT_SMALL, bench_parser, clip_encoder, parse_bench, random_images, report, sync, timed
from torch.utils.flop_counter import FlopCounterMode

from platonic_sdk.encoding.accel import autocast, compiled_media
from platonic_sdk.encoding.features import site_features

SIZES = {
    "tiny": dict(config={}, n=64, batch=32),
    "small": dict(config=VIT_SMALL, n=256, batch=64),
    "large": dict(config=VIT_L14, n=1024, batch=128),
}
# mode -> (autocast, compile, DataLoader workers)
MODES = {
    "fp32_eager": (False, False, 0),
    "bf16_autocast": (True, False, 0),
    "fp32_compiled": (False, True, 0),
    "bf16_compiled": (True, True, 0),
    "bf16_autocast_workers": (True, False, 4),
}
H200_BF16_DENSE_TFLOPS = 989.0


def flops_per_image(encoder, batch: Any) -> float:
    """Forward FLOPs of the media tower per image (matmuls, convolutions, attention)."""
    counter = FlopCounterMode(display=False)
    with counter, torch.inference_mode():
        encoder.embed_media(batch)
    return counter.get_total_flops() / batch.shape[0]


def run(
    device: str = "cpu",
    size: str = "small",
    modes: tuple[str, ...] = tuple(MODES),
    peak_tflops: float | None = None,
    backend: str = "inductor",
) -> dict[str, Any]:
    spec = SIZES[size]
    encoder = clip_encoder(spec["config"], device)
    image_size = encoder.model.config.vision_config.image_size
    items = random_images(spec["n"], image_size + image_size // 7, seed=3)  # resized and cropped like real data
    B = spec["batch"]
    ready = encoder.preprocess(items[:B])
    flops = flops_per_image(encoder, ready[:2])
    out: dict[str, Any] = {"device": device, "size": size, "images": spec["n"], "batch": B, "gflops_per_image": flops / 1e9}
    if any(MODES[m][1] for m in modes):
        out["compile_backend"] = backend
    if peak_tflops:
        out["peak_tflops"] = peak_tflops
    reference = None
    for mode in modes:
        amp, compile_it, workers = MODES[mode]
        start = time.perf_counter()
        with contextlib.ExitStack() as stack:
            stack.enter_context(autocast(device, amp))  # so a compiled mode compiles its autocast graph once
            if compile_it and not stack.enter_context(compiled_media(encoder, ready, backend)):
                out[f"{mode}_error"] = "compile failed (see warning)"
                continue
            site_features(encoder, items[:B], B, workers=workers, amp=amp)  # warm-up (and any recompilation under autocast)
            sync(device)
            if compile_it:
                out[f"{mode}_compile_s"] = time.perf_counter() - start
            seconds, (_, Z) = timed(device, lambda: site_features(encoder, items, B, workers=workers, amp=amp))

            def model_only() -> None:
                with torch.inference_mode(), autocast(device, amp):
                    for _ in range(len(items) // B):
                        encoder.embed_media(ready)

            model_seconds, _ = timed(device, model_only)
        rate, model_rate = len(items) / seconds, (len(items) // B) * B / model_seconds
        out[f"{mode}_img_per_s"] = rate
        out[f"{mode}_model_img_per_s"] = model_rate
        if peak_tflops:
            out[f"{mode}_mfu"] = model_rate * flops / (peak_tflops * 1e12)
        Z = torch.nn.functional.normalize(Z.double(), dim=1)
        reference = Z if reference is None else reference
        out[f"{mode}_max_1_minus_cos_vs_first"] = float(1 - (Z * reference).sum(1).min())
    first = f"{modes[0]}_img_per_s"
    for mode in modes[1:]:
        if f"{mode}_img_per_s" in out:
            out[f"speedup_{mode}_vs_{modes[0]}"] = out[f"{mode}_img_per_s"] / out[first]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser(__doc__, SIZES)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, first is the baseline: " + ",".join(MODES))
    parser.add_argument("--peak-tflops", type=float, default=None, help="peak for MFU (cuda default: H200 bf16 dense 989)")
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the compiled modes")
    args = parse_bench(parser, argv)
    peak = args.peak_tflops or (H200_BF16_DENSE_TFLOPS if args.device.startswith("cuda") else None)
    report("feature extraction", run(args.device, args.size, tuple(args.modes.split(",")), peak, args.compile_backend), args.json)


if __name__ == "__main__":
    main()
