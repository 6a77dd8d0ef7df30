"""The short-sequence attention kernel against SDPA's kernels on a GPU, one layer's
attention at the shapes of BLiMP's batches.

    python bench/short_attention_gpu.py [--out-dir DIR]

For each shape (copies x length, 12 heads of 64, bfloat16, the query, key and value
strided views of one fused projection, as transformers hands them over), the median of
``--repeats`` timed calls (CUDA events) after a warm-up: SDPA with the memory-efficient
kernel (what ``runner.attention_kernels`` picks), with flash, and
``pll_harness.short_attention.short_attention``.  GB/s counts the query, key, value and output
read or written once.  ``bench/gpu.sh kernel`` runs it.  Writes
``short-attention-gpu-<machine>-<date>.md``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

import pll_bench

SHAPES = [(65535, 8), (65535, 12), (65535, 16), (40000, 20), (40000, 24), (32000, 32)]
"""(copies, length): a BLiMP batch at an H100's budget is capped at 65,535 copies; 32 tokens
is the longest the kernel takes (``MAX_LENGTH``)."""
HEADS, SIZE = 12, 64


def timed(function: Callable[[], object], repeats: int) -> float:
    import torch

    function()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times)


def one_shape(copies: int, length: int, repeats: int) -> dict[str, str]:
    """Each kernel's cell, ms (GB/s), for one batch shape."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from pll_harness import short_attention as short

    fused = torch.randn(copies, length, 3, HEADS, SIZE, device="cuda", dtype=torch.bfloat16)
    query, key, value = (fused[:, :, i].transpose(1, 2) for i in range(3))
    moved = 4 * copies * length * HEADS * SIZE * 2
    scale = SIZE**-0.5

    def sdpa(backend: SDPBackend) -> Callable[[], object]:
        def call() -> object:
            with sdpa_kernel([backend]):
                return torch.nn.functional.scaled_dot_product_attention(query, key, value)

        return call

    def ours() -> object:
        return short.short_attention(query, key, value, scale)

    choices = {
        "SDPA memory-efficient": sdpa(SDPBackend.EFFICIENT_ATTENTION),
        "SDPA flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "short-sequence kernel": ours,
    }
    difference = (ours().transpose(1, 2) - sdpa(SDPBackend.EFFICIENT_ATTENTION)()).abs()
    print(f"{copies} x {length}: largest difference to SDPA {difference.max().item():.3g}")
    cells = {}
    for name, function in choices.items():
        try:
            seconds = timed(function, repeats)
            cells[name] = f"{seconds * 1000:.2f} ({moved / seconds / 1e9:.0f})"
        except RuntimeError as error:
            cells[name] = f"failed: {str(error)[:40]}"
        print(f"  {name}: {cells[name]}")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out-dir", type=Path, default=pll_bench.REPO_ROOT / "bench" / "results")
    args = parser.parse_args()

    import torch

    lines = [
        f"# Short-sequence attention against SDPA: {torch.cuda.get_device_name()}",
        "",
        f"- one layer's attention, {HEADS} heads of {SIZE}, bfloat16; median of "
        f"{args.repeats} calls; ms (GB/s)",
        "",
        *pll_bench.shape_table(
            "kernel", SHAPES, lambda copies, length: one_shape(copies, length, args.repeats)
        ),
    ]
    print("\n".join(lines))
    pll_bench.write_lines(args.out_dir, "short-attention-gpu", lines, device="cuda")


if __name__ == "__main__":
    main()
