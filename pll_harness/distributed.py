"""Data parallelism over processes (``accelerate launch``), balanced by cost.

lm-eval's evaluator gives each process an equal *count* of requests, but a PLL request
costs one forward pass per scored token, so counts are a poor proxy for time.  The
processes therefore pool their requests, split the distinct ones by estimated cost (the
same split on every process, so no coordinator is needed), score their share and pool
the results again; each process then returns the answers for its own requests.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence
from typing import Any

import torch


def balance_by_cost(costs: Sequence[float], n_parts: int) -> list[int]:
    """Assign item i to part ``result[i]`` so the parts' total costs are close.

    Longest-processing-time-first: the costliest remaining item goes to the least loaded
    part.  Ties break on item and part index, so every process computes the same split.
    """
    if n_parts < 1:
        raise ValueError(f"n_parts must be at least 1, got {n_parts}")
    owner = [0] * len(costs)
    loads = [(0.0, part) for part in range(n_parts)]
    for index in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        load, part = heapq.heappop(loads)
        owner[index] = part
        heapq.heappush(loads, (load + costs[index], part))
    return owner


class ProcessGroup:
    """The few collective operations lm-eval and the scorer need, over accelerate."""

    def __init__(self) -> None:
        from accelerate import Accelerator

        self.accelerator = Accelerator()

    @property
    def rank(self) -> int:
        return self.accelerator.process_index

    @property
    def world_size(self) -> int:
        return self.accelerator.num_processes

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.accelerator.gather(tensor)

    def all_gather_object(self, obj: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, obj)
        return gathered

    def gather_object(self, obj: Any, dst: int = 0) -> list[Any] | None:
        result = [None] * self.world_size if self.rank == dst else None
        torch.distributed.gather_object(obj=obj, object_gather_list=result, dst=dst)
        return result

    def barrier(self) -> None:
        self.accelerator.wait_for_everyone()


def launched_with_several_processes() -> bool:
    """True under ``accelerate launch``/``torchrun`` with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1
