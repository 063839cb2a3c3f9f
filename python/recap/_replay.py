# SPDX-License-Identifier: Apache-2.0
"""Replays of torch CUDA graphs that pay only for the generator states they draw from.

torch 2.11 replays a graph by writing, for every generator state registered with it, the state's
seed and offset into two device tensors (two fill_ kernels, some 10 us of host time) before the
launch, whether the graph drew from that state or not. recap registers every live tracker state
before each capture, because torch refuses a registration once the capture has begun; a graph
that draws from one of eight tracker states would pay for nine (with the default generator's,
which torch registers itself).

So recap.torch replays the graphs captured while it is installed through its extension
(recap/csrc/graph_replay.cpp): at each replay it walks the graph's own table of registered
states, as torch's replay does, writes the seed and offset of those the graph draws from (stream
memory writes, no kernels), advances them as torch does, and launches the graph's exec. It does
so only on the torch versions listed there, each checked in gpu-check against torch's own replay
(tests/python/replay_plans.py), and only while torch's Python ``replay`` is torch's own plain
call to the C++ one. Anywhere else torch's replay runs, and ``why`` says why;
``RECAP_TORCH_REPLAY=0`` turns it off. A replay the extension does not take (no exec yet, inside
a capture, a registered state capturing) goes to torch's replay, which raises where torch raises.
One difference stays: torch also rewrites the device tensors of states the graph does not draw
from, which only graphs drawing from them read, after their own replay wrote them.
"""
from __future__ import annotations

import os
import threading
from typing import List, Optional, Tuple

import torch

from . import _ext

_lock = threading.Lock()
_bound: Optional[bool] = None  # whether recap replays graphs in this process (decided once)
why = ""                       # why it does not, when it does not
stats = {"plans": 0, "replays": 0, "to_torch": 0}


def graph_states(graph) -> Optional[List[Tuple[int, int]]]:
    """The (state address, increment) pairs torch's table holds for ``graph``, or None."""
    ext = _ext.module()
    return None if ext is None else ext.graph_states(graph)


def _decide(orig) -> str:
    """Why recap must leave replays to torch in this process ("" when it need not)."""
    if os.environ.get("RECAP_TORCH_REPLAY") == "0":
        return "RECAP_TORCH_REPLAY=0"
    ext = _ext.module()
    if ext is None:
        return _ext.why
    if not ext.REPLAY_VERIFIED:
        return (f"recap's replay was not checked against torch {torch.__version__}'s "
                "(recap/csrc/graph_replay.cpp lists the versions it was): torch's replay runs")
    fn = orig["replay"]
    if getattr(fn, "__module__", None) != "torch.cuda.graphs" or \
            getattr(fn, "__qualname__", None) != "CUDAGraph.replay":
        return (f"torch.cuda.CUDAGraph.replay is {fn!r}, not torch's own (another library wraps "
                "it): its work would be skipped, so torch's replay runs")
    return ""


def ready(orig) -> bool:
    """Decided once per process (on the first capture recap sees); False when replays stay
    torch's."""
    global _bound, why
    if _bound is None:
        with _lock:
            if _bound is None:
                why = _decide(orig)
                _bound = not why
    return _bound


class _Plan:
    """A graph recap replays; the table and exec are read at each replay."""

    __slots__ = ("replays",)

    def __init__(self) -> None:
        self.replays = 0

    def replay(self, graph) -> bool:
        """True when replayed by recap; False when torch's replay must run (nothing done)."""
        if _ext.module().replay(graph):
            self.replays += 1
            stats["replays"] += 1
            return True
        stats["to_torch"] += 1
        return False


def begin(graph, orig) -> None:
    """Before torch's capture_begin: the graph is recap's to replay from now on."""
    d = getattr(graph, "__dict__", None)
    if d is None or not ready(orig) or "_recap_plan" in d:
        return
    d["_recap_plan"] = _Plan()
    stats["plans"] += 1


def plan_of(graph) -> Optional[_Plan]:
    """The graph's plan (None when torch replays it)."""
    d = getattr(graph, "__dict__", None)
    return None if d is None else d.get("_recap_plan")
