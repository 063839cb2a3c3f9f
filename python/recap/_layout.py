# SPDX-License-Identifier: Apache-2.0
"""Where torch keeps a field, found by reading memory (recap.torch, recap/_replay.py).

recap/_torchops.c reads and writes fields of torch's C++ objects; where they lie is found on the
running torch, never taken from its headers. The searches follow words that may be anything
(some lie past the objects, in their heap neighbours), so every read goes through
``recap_torch_peek``, which answers None instead of faulting. This module holds the parts that
need no torch, so that CI tests them on fabricated layouts (python/tests/test_torchops.py).
"""
from __future__ import annotations

import ctypes
from typing import Callable, List, Optional, Sequence, Tuple

Peek = Callable[[int], Optional[int]]


def word(shim, addr: int) -> Optional[int]:
    """The 64-bit word at addr, or None where it cannot be read."""
    buf = ctypes.c_uint64()
    if addr < 1 << 12 or shim.recap_torch_peek(addr, ctypes.byref(buf), 8) != 0:
        return None
    return buf.value


# Two (seed, offset) pairs a state is set to while its fields are looked for: values no other
# word of the state holds by chance, the second different in both.
PROBE_VALUES = ((0x5EED_0000_1234_ABCD, 4096 + 12), (0x1234_5678, 8))


def state_fields(peek: Peek, impls: Sequence[int],
                 set_state: Callable[[int, int], None]) -> List[Tuple[int, int, int]]:
    """The candidate (state, seed, offset) places, in bytes, of a generator whose state is an
    object it points to (at::CUDAGeneratorImpl -> at::CUDAGeneratorState): ``impls`` are three
    generator objects, the first two sharing one state, the third another; ``set_state`` sets the
    shared state's seed and offset through the framework's API.

    A state pointer is a word the first two share and the third does not; the seed and offset
    are the only words of the object it points to equal to the values set, twice. Words past the
    objects (heap neighbours) may pass the first test by chance, rarely the second; every passing
    place is returned, in order, and the caller keeps the first whose reads and writes agree with
    the framework's."""
    a, b, d = impls
    out = []
    for k in range(8, 200, 8):
        wa, wb, wd = peek(a + k), peek(b + k), peek(d + k)
        if wa is None or wa != wb or wa == wd or wa % 8 or wa <= 1 << 16:
            continue
        found = None
        for seed, offset in PROBE_VALUES:
            set_state(seed, offset)
            seeds = [j for j in range(0, 64, 8) if peek(wa + j) == seed]
            offsets = [j for j in range(0, 64, 8) if peek(wa + j) == offset]
            if len(seeds) != 1 or len(offsets) != 1 or found not in (None, (seeds[0], offsets[0])):
                found = None
                break
            found = (seeds[0], offsets[0])
        if found is not None:
            out.append((k,) + found)
    return out
