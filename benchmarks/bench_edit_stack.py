"""Edit stack cost: apply + remove through the stack vs a plain snapshot-and-restore, next to one encode.

The baseline is what edits did before stacks (clone the written tensors, write the same float64
update, copy the clone back); the stack adds fingerprints of the written tensors, a binding check and
a replay from the base on removal. Two edits:
an operator edit on the projection, and a task vector over the whole vision tower; both beside the
time of encoding `n` images once (what every applied edit is used for).

    python benchmarks/bench_edit_stack.py --threads 1                 # small ViT on the CPU
    python benchmarks/bench_edit_stack.py --device cuda --size large  # ViT-L/14
"""

from __future__ import annotations

import torch
from common import VIT_L14, VIT_SMALL, bench_parser, clip_encoder, parse_bench, random_images, report, timed

from platonic_sdk.encoding.features import encode_items
from platonic_sdk.finetune import TaskVector
from platonic_sdk.finetune.weightspace import named_tensors
from platonic_sdk.transfer import OperatorEdit

SIZES = {"small": dict(config=VIT_SMALL, n=256), "large": dict(config=VIT_L14, n=256)}


@torch.no_grad()
def snapshot_apply_remove(tensors: dict[str, torch.Tensor], update) -> None:
    """The pre-stack way: keep a copy, write the same float64 update, restore the copy."""
    saved = {n: t.clone() for n, t in tensors.items()}
    for n, value in update({n: t.detach() for n, t in tensors.items()}).items():
        tensors[n].copy_(value)
    for n, t in tensors.items():
        t.copy_(saved[n])


def _tv_update(deltas: dict[str, torch.Tensor], strength: float):
    """TaskVector.apply_to's update: theta + strength * tau, summed in float64."""
    return lambda values: {n: (t.double() + strength * deltas[n].double()).to(t.dtype) for n, t in values.items()}


def run(device: str, size: str, repeats: int) -> dict[str, float]:
    spec = SIZES[size]
    encoder = clip_encoder(spec["config"], device)
    site = encoder.last_affine()
    A = 0.01 * torch.randn(site.out_dim, site.in_dim, generator=torch.Generator().manual_seed(0))
    edit = OperatorEdit(A, 0.5, site.kind)
    tower = encoder.media_encoder
    tau = TaskVector({n: 1e-3 * torch.ones_like(t) for n, t in named_tensors(tower).items()})

    live = named_tensors(tower)
    op_base, _ = timed(device, lambda: snapshot_apply_remove(site.tensors(), site.folded(A, 0.5)), repeats)
    op_stack, _ = timed(device, lambda: edit.apply(encoder).remove(), repeats)
    tv_base, _ = timed(device, lambda: snapshot_apply_remove(live, _tv_update(tau.deltas, 1.0)), repeats)
    tv_stack, _ = timed(device, lambda: tau.apply_to(tower).undo(), repeats)
    images = random_images(spec["n"], spec["config"]["vision_config"]["image_size"])
    encode_s, _ = timed(device, lambda: encode_items(encoder, images, 64), 1)
    return {
        "tower_parameters_M": sum(t.numel() for t in live.values()) / 1e6,
        "operator: snapshot_s": op_base,
        "operator: stack_s": op_stack,
        "operator: stack / snapshot": op_stack / op_base,
        "task_vector: snapshot_s": tv_base,
        "task_vector: stack_s": tv_stack,
        "task_vector: stack / snapshot": tv_stack / tv_base,
        f"encode {spec['n']} images_s": encode_s,
        "operator stack / encode": op_stack / encode_s,
        "task_vector stack / encode": tv_stack / encode_s,
    }


def main() -> None:
    parser = bench_parser(__doc__, SIZES)
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_bench(parser)
    report(f"edit stack apply + remove ({args.size}, {args.device})", run(args.device, args.size, args.repeats), args.json)


if __name__ == "__main__":
    main()
