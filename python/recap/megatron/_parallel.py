# SPDX-License-Identifier: Apache-2.0
"""recap.megatron's view of Megatron's parallel layout: this process's rank and the world size
of a parallel group (0 and 1 without Megatron or before it is initialized), and a tensor split
into this rank's 1-D chunk and gathered back (Megatron's own functions, imported when used)."""
from typing import Optional

import torch


def _parallel_state():
    try:
        from megatron.core import parallel_state
        return parallel_state
    except ImportError:
        return None


def _rank(getter: str, override: Optional[int]) -> int:
    if override is not None:
        return override
    ps = _parallel_state()
    if ps is None:
        return 0
    r = getattr(ps, getter)()
    return 0 if r is None else r


def _world(getter: str) -> int:
    ps = _parallel_state()
    fn = getattr(ps, getter, None) if ps is not None else None
    w = fn() if fn is not None else 1
    return 1 if not w else w


def _split_1d(t: torch.Tensor) -> torch.Tensor:
    from megatron.core.tensor_parallel.utils import split_tensor_into_1d_equal_chunks
    return split_tensor_into_1d_equal_chunks(t, new_buffer=True)


def _gather_1d(t: torch.Tensor) -> torch.Tensor:
    from megatron.core.tensor_parallel.utils import gather_split_1d_tensor
    return gather_split_1d_tensor(t)
