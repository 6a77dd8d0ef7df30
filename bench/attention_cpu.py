"""Time the attention kernels PyTorch offers on the CPU at the shapes PLL scoring feeds them.

    python bench/attention_cpu.py            # torch's default threads

For each shape ``(sequences, heads, length, head dim)``, with query, key and value laid out
as transformers lays them out (``[batch, length, heads, dim]`` transposed), prints the
milliseconds per call of SDPA's flash kernel, SDPA's math kernel and eager attention
(matmul, softmax, matmul), and the largest difference between flash and math.  The first
two shapes are the nano model's batches (65,536 tokens, heads of 4 dimensions), the
others bert-base's at 512 tokens a batch (the CPU budget when this was measured; now 320,
``default_batch_tokens``) and one long input.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pll_bench
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [
    (5461, 2, 12, 4),
    (2048, 2, 32, 4),
    (42, 12, 12, 64),
    (16, 12, 32, 64),
    (4, 12, 128, 64),
    (1, 12, 512, 64),
]


def per_call_ms(run: Callable[[], torch.Tensor]) -> float:
    return pll_bench.seconds_per_call(run, repeats=20) * 1e3


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| shape | flash ms | math ms | eager ms | max abs diff flash vs math |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for shape in SHAPES:
        print(row(*shape))


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, backend: SDPBackend) -> torch.Tensor:
    with sdpa_kernel([backend]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.matmul(scores.softmax(-1), v)


def row(batch: int, heads: int, length: int, dim: int) -> str:
    q, k, v = (torch.randn(batch, length, heads, dim).transpose(1, 2) for _ in range(3))
    flash = per_call_ms(lambda: sdpa(q, k, v, SDPBackend.FLASH_ATTENTION))
    math = per_call_ms(lambda: sdpa(q, k, v, SDPBackend.MATH))
    plain = per_call_ms(lambda: eager(q, k, v))
    diff = (sdpa(q, k, v, SDPBackend.FLASH_ATTENTION) - sdpa(q, k, v, SDPBackend.MATH)).abs()
    return (
        f"| {batch} x {heads} x {length} x {dim} | {flash:.2f} | {math:.2f} | {plain:.2f} | "
        f"{diff.max().item():.1e} |"
    )


if __name__ == "__main__":
    main()
