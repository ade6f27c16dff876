"""Streamed datasets and the on-disk feature cache: peak RSS and items/s as a dataset grows.

Writes N images of 224 px per size in torchvision's EuroSAT layout (DIR/eurosat/2750/<class>/*.jpg, 10
classes), reads them with `platonic_sdk.data.torchvision_task` (references, decoded on demand) and
encodes every item with a small random-weight CLIP on the CPU. Each measurement runs in its own
process, so its peak RSS (ru_maxrss; DataLoader workers reported apart) is its own. Side by side:

- streamed encoding at each size (default workers), with the cache cold: peak RSS and items/s;
- workers against none (at the middle size);
- the second run, which finds every feature in the cache, against the first (at the largest size);
- the old way, every image decoded into memory when the task is built (at the smallest size only).

Goals (issue 14): peak RSS at the largest size within 1.3x of the smallest; the cached run >= 20x faster.

    python benchmarks/bench_data.py                                   # 2k, 10k, 40k images
    python benchmarks/bench_data.py --sizes 1000,5000,20000 --threads 1 --json /tmp/bench_data.json
    python benchmarks/bench_data.py --sizes 1000,5000,20000 --mmap-threshold 131072   # glibc's fixed mmap threshold

With DataLoader workers, the main process's heap fragments (batches arrive between its own
allocations) and glibc keeps the freed pages: untrimmed, peak RSS grows with the number of batches
though no item is kept. `accel.batches` therefore hands the free heap back after each batch
(`accel.release_free_heap`, glibc's malloc_trim); `--no-trim` measures without it, `--mmap-threshold`
with a fixed MALLOC_MMAP_THRESHOLD_ instead (flat too, but every large buffer of a forward pass is then
mapped and unmapped). Without workers RSS is flat either way.

    python benchmarks/bench_data.py --sizes 1000,4000 --no-trim      # the heap as glibc leaves it
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import VIT_SMALL, clip_encoder, report

CLASSES = [f"Class{c:02d}" for c in range(10)]


def write_layout(root: Path, n: int, seed: int = 0) -> None:
    """n 224 x 224 JPEGs (smooth colour fields, ~5 KB each) under root/eurosat/2750/<class>/, written once."""
    from PIL import Image

    done = root / "done"
    if done.is_file() and int(done.read_text()) == n:
        return
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, 224, dtype=np.float32)
    for i in range(n):
        c = i % len(CLASSES)
        folder = root / "eurosat" / "2750" / CLASSES[c]
        folder.mkdir(parents=True, exist_ok=True)
        base = np.asarray([(37 * c) % 256, (91 * c) % 256, (53 * c) % 256], np.float32)
        field = base + 60 * (ramp[:, None, None] * rng.uniform(-1, 1, 3) + ramp[None, :, None] * rng.uniform(-1, 1, 3))
        Image.fromarray(np.clip(field, 0, 255).astype(np.uint8)).save(folder / f"{CLASSES[c]}_{i}.jpg", quality=85)
    done.write_text(str(n))


def measure(args: argparse.Namespace) -> None:
    """One run in this process: build the task, encode every item; print a JSON line of figures."""
    import torch

    from platonic_sdk.data import torchvision_task
    from platonic_sdk.encoding.feature_store import FeatureStore
    from platonic_sdk.encoding.features import site_features

    torch.set_num_threads(args.threads)
    if args.no_trim:
        import platonic_sdk.encoding.accel

        platonic_sdk.encoding.accel.release_free_heap = lambda: None
    encoder = clip_encoder(VIT_SMALL, seed=0)
    start = time.perf_counter()
    if args.mode == "in_memory":  # the old loader: every image decoded to a PIL image when the task is built
        from platonic_sdk.data.images import read_image

        task = torchvision_task("eurosat", args.root, verify=False)
        items = [read_image(p) for split in (task.train, task.test) for p in split.items.paths]
    else:
        task = torchvision_task("eurosat", args.root)
        items = task.train.items.refs + task.test.items.refs
        from platonic_sdk.items import Items

        items = Items(items)
    built = time.perf_counter()
    store = FeatureStore(args.cache) if args.cache else False
    S, Z = site_features(encoder, items, batch_size=64, workers=args.workers, cache=store)
    done = time.perf_counter()
    print(json.dumps({
        "n": len(items), "build_s": built - start, "encode_s": done - built, "total_s": done - start,
        "items_per_s": len(items) / (done - start),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "rows": int(Z.shape[0]),
    }))


def run(root: Path, mode: str, workers: int | None, cache: Path | None, threads: int, mmap_threshold: int | None = None,
        no_trim: bool = False) -> dict:
    argv = [sys.executable, __file__, "--measure", str(root), "--mode", mode, "--threads", str(threads)]
    argv += ["--no-trim"] if no_trim else []
    argv += ["--workers", str(workers)] if workers is not None else []
    argv += ["--cache", str(cache)] if cache is not None else []
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if mmap_threshold:  # a fixed threshold stops glibc raising it after each freed batch (heap growth, see --help)
        env["MALLOC_MMAP_THRESHOLD_"] = str(mmap_threshold)
    out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000,40000", help="dataset sizes, comma-separated")
    parser.add_argument("--dir", help="where the image layouts go (kept between runs; default: a temporary folder)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--mmap-threshold", type=int, help="run each measurement with MALLOC_MMAP_THRESHOLD_ set (e.g. 131072): "
                        "a fixed threshold instead of trimming the heap after each batch")
    parser.add_argument("--no-trim", action="store_true", help="do not hand the free heap back after each batch "
                        "(accel.release_free_heap): peak RSS then grows with the number of batches")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="streamed", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        args.root = args.measure
        return measure(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench_data_"))
    results: dict = {}
    streamed = {}
    for n in sizes:
        root = base / f"n{n}"
        t = time.perf_counter()
        write_layout(root, n)
        print(f"[{n} images in {root}: written in {time.perf_counter() - t:.0f} s]", flush=True)
        cache = base / f"cache{n}"
        streamed[n] = run(root, "streamed", None, cache, args.threads, args.mmap_threshold, args.no_trim)  # cold cache: encodes and writes
        results[f"streamed_{n}_items_per_s"] = streamed[n]["items_per_s"]
        results[f"streamed_{n}_peak_rss_mb"] = streamed[n]["rss_mb"]
        results[f"streamed_{n}_worker_peak_rss_mb"] = streamed[n]["worker_rss_mb"]
        if n == sizes[-1]:
            cached = run(root, "streamed", None, cache, args.threads, args.mmap_threshold, args.no_trim)
            results[f"cached_second_run_{n}_s"] = cached["total_s"]
            results[f"first_run_{n}_s"] = streamed[n]["total_s"]
            results["cached_speedup_total (goal >= 20)"] = streamed[n]["total_s"] / cached["total_s"]
            results["cached_speedup_encode_step"] = streamed[n]["encode_s"] / cached["encode_s"]
            results[f"cached_second_run_{n}_task_build_s"] = cached["build_s"]
        if n == sizes[len(sizes) // 2]:
            none = run(root, "streamed", 0, None, args.threads, args.mmap_threshold, args.no_trim)
            results[f"no_workers_{n}_items_per_s"] = none["items_per_s"]
            results[f"workers_vs_none_{n}_speedup"] = streamed[n]["items_per_s"] / none["items_per_s"]
        if n == sizes[0]:
            eager = run(root, "in_memory", 0, None, args.threads, args.mmap_threshold, args.no_trim)
            results[f"in_memory_{n}_peak_rss_mb"] = eager["rss_mb"]
            results[f"in_memory_{n}_items_per_s"] = eager["items_per_s"]
    results[f"rss_{sizes[-1]}_over_{sizes[0]} (goal <= 1.3)"] = streamed[sizes[-1]]["rss_mb"] / streamed[sizes[0]]["rss_mb"]
    heap = "untrimmed heap" if args.no_trim else "heap trimmed per batch"
    heap += f", MALLOC_MMAP_THRESHOLD_={args.mmap_threshold}" if args.mmap_threshold else ""
    report(f"bench_data: streamed datasets and the feature cache ({os.cpu_count()} CPUs, {args.threads} thread(s), {heap})", results, args.json)


if __name__ == "__main__":
    main()
