"""What fusing a bert-base layer's element-wise passes would buy on a GPU, before anyone
writes the kernels: the layer after its attention, eager against ``torch.compile``.

    python bench/fusion_gpu.py [--device cuda] [--scale 1] [--out-dir DIR]

On an H100 the element-wise kernels around each layer's matrix products (bias and GELU,
residual addition and layer norm) took about 2.2 s of the 7.3 s of GPU time that all of
BLiMP takes (bench/README.md), and the engine runs transformers' own modules, one pass
each.  For BLiMP's batch shapes (copies x length, 768 wide), this times the part of a
``BertLayer`` after the attention (the attention's output projection, residual and layer
norm; the feed-forward block with its GELU, residual and layer norm) three ways, each the
median of ``--repeats`` calls after a warm-up: as transformers runs it; compiled by
``torch.compile`` (inductor, which folds the element-wise passes into fewer kernels),
with how long compiling took; and its three matrix products alone, the floor that no
fusion goes below.  bfloat16 on CUDA, float32 elsewhere; ``--scale`` divides the copies
(a CPU's dry run).  ``bench/gpu.sh fusion`` runs it.  Writes
``fusion-gpu-<machine>-<date>.md``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import pll_bench
import short_attention_gpu

SHAPES = [(65535, 12), (40000, 20), (32000, 32)]
"""(copies, length): BLiMP's batches at an H100's budget (65,535 copies at most)."""
WIDTH, FEED_FORWARD, HEADS = 768, 3072, 12
WAYS = ("transformers' modules", "torch.compile", "compiling it, s", "the three products alone")


def timed(function: Callable[[], object], repeats: int, device: str) -> float:
    """Median seconds of a call on CUDA (events), mean elsewhere."""
    if device.startswith("cuda"):
        return short_attention_gpu.timed(function, repeats)
    return pll_bench.seconds_per_call(function, repeats)


def one_shape(copies: int, length: int, device: str, repeats: int) -> dict[str, str]:
    """Each way's cell for one batch shape: ms, and the compile's seconds."""
    import torch
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    config = BertConfig(
        hidden_size=WIDTH, num_attention_heads=HEADS, intermediate_size=FEED_FORWARD
    )
    layer = BertLayer(config).to(device=device, dtype=dtype).eval()
    context = torch.randn(copies, length, WIDTH, device=device, dtype=dtype)
    hidden = torch.randn_like(context)
    weights = [
        module.weight
        for module in (layer.attention.output.dense, layer.intermediate.dense, layer.output.dense)
    ]

    def after_attention(context: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        attended = layer.attention.output(context, hidden)
        return layer.output(layer.intermediate(attended), attended)

    def products_alone() -> torch.Tensor:
        out = context
        for weight in weights:
            out = out @ weight.t()
        return out

    cells = dict.fromkeys(WAYS, "")
    with torch.inference_mode():
        eager = timed(lambda: after_attention(context, hidden), repeats, device)
        cells[WAYS[0]] = f"{eager * 1000:.2f}"
        try:
            compiled = torch.compile(after_attention, dynamic=False)
            start = time.perf_counter()
            fused_out = compiled(context, hidden)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            cells[WAYS[2]] = f"{time.perf_counter() - start:.1f}"
            difference = (fused_out - after_attention(context, hidden)).abs()
            fused = timed(lambda: compiled(context, hidden), repeats, device)
            cells[WAYS[1]] = f"{fused * 1000:.2f} ({fused / eager - 1:+.0%})"
            print(f"{copies} x {length}: compiled against eager, at most {difference.max():.3g}")
        except Exception as error:  # a compiler missing or failing is a result to report
            cells[WAYS[1]] = f"failed: {str(error).splitlines()[0][:60]}"
        floor = timed(products_alone, repeats, device)
        cells[WAYS[3]] = f"{floor * 1000:.2f} ({floor / eager - 1:+.0%})"
    print(f"{copies} x {length}: {cells}")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", type=int, default=1, help="divide the copies by this")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args()

    import torch

    shapes = [(max(1, copies // args.scale), length) for copies, length in SHAPES]
    dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    lines = [
        f"# A bert-base layer after its attention, eager against torch.compile: {name}",
        "",
        f"- {WIDTH} wide, feed-forward {FEED_FORWARD}, {dtype}; ms, median of "
        f"{args.repeats} calls (CPU: mean), in brackets against transformers' modules; "
        f"torch {torch.__version__}",
        "",
        *pll_bench.shape_table(
            "way",
            shapes,
            lambda copies, length: one_shape(copies, length, args.device, args.repeats),
        ),
    ]
    print("\n".join(lines))
    pll_bench.write_lines(args.out_dir, "fusion-gpu", lines, device=args.device)


if __name__ == "__main__":
    main()
