# SPDX-License-Identifier: Apache-2.0
"""Replays of torch CUDA graphs at recap's flat cost.

torch 2.11 replays a graph by writing, for every generator state registered with it, the state's
seed and offset into two device tensors (two fill_ kernels: bench/RESULTS.md) before the
launch, whether the graph drew from that state or not. recap registers every live tracker state
before each capture, because torch refuses a registration once the capture has begun; a graph
that draws from one of eight tracker states would pay for nine (with the default generator's,
which torch registers itself).

So recap.torch drives the graphs captured while it is installed as it drives its own
(recap/csrc/graph_replay.cpp): at the end of the capture one captured kernel advances the device
offset of each state the graph drew from, so each launch leaves the next one's base in place; a
replay (recap._C.replay_method, torch.cuda.CUDAGraph.replay while installed) walks the graph's
own table of registered states as torch does, writes a state's seed and offset only when an
eager draw, a set, a capture or torch's own replay moved it since recap's last launch (two
stream memory writes, no kernel), advances the host offsets as torch does and launches the exec.
It does so only on the torch versions listed there, each checked in gpu-check against torch's
own replay (python/tests/gpu/replay_plans.py), and only while torch's Python ``replay`` is torch's
own plain call to the C++ one. Anywhere else torch's replay runs, and ``why`` says why;
``RECAP_TORCH_REPLAY=0`` turns it off. A replay the extension does not take (no exec yet, inside
a capture, a registered state capturing) goes to torch's replay, which raises where torch raises.
What stays different from torch: torch also rewrites the device tensors of states the graph does
not draw from, which only graphs drawing from them read, after their own replay wrote them; and
a capture made without torch.cuda.CUDAGraph's Python methods (torch._C._CUDAGraph directly) of a
graph registered with a state a recap graph advances is not seen: recap notices a registration
it did not see, not a second capture through the same registration.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, List, Optional, Tuple

import torch

from . import _ext

_lock = threading.Lock()
_bound: Optional[bool] = None  # whether recap replays graphs in this process (decided once)
why = ""                       # why it does not, when it does not


def stats() -> Dict[str, int]:
    """Plans made, replays recap made and torch made of planned graphs, slot writes (eager work
    between launches), captures given recap's advance node; empty without the extension."""
    ext = _ext.module()
    return {} if ext is None else dict(ext.replay_stats())


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
    if callable(getattr(torch.cuda.graphs, "register_graph_replay_start_hook", None)):
        # A torch whose replay fires lifecycle hooks: recap's C++ replay in its place would
        # silence them for every other consumer (profilers).
        return ("this torch fires CUDA-graph replay hooks, which recap's replay would skip: "
                "torch's replay runs")
    fn = orig["replay"]
    if getattr(fn, "__module__", None) != "torch.cuda.graphs" or \
            getattr(fn, "__qualname__", None) != "CUDAGraph.replay":
        return (f"torch.cuda.CUDAGraph.replay is {fn!r}, not torch's own (another library wraps "
                "it): its work would be skipped, so torch's replay runs")
    return ""


def ready(orig) -> bool:
    """Decided once per process (at recap.torch's install()); False when replays stay
    torch's."""
    global _bound, why
    if _bound is None:
        with _lock:
            if _bound is None:
                why = _decide(orig)
                _bound = not why
                if why and os.environ.get("RECAP_TORCH_REPLAY") != "0":
                    from . import _lib
                    _lib.log_once("info", f"recap.torch: {why}")
    return _bound


def replay_method(orig):
    """What torch.cuda.CUDAGraph.replay becomes while recap.torch is installed (None: torch's
    stays)."""
    return _ext.module().replay_method if ready(orig) else None


def begin(graph, orig):
    """Before torch's capture_begin: the graph's plan (made now, or kept from an earlier
    capture), or None when torch replays it."""
    d = getattr(graph, "__dict__", None)
    if d is None or not ready(orig):
        return None
    plan = d.get("_recap_plan")
    if plan is None:
        plan = d["_recap_plan"] = _ext.module().Plan()
    return plan


def begun(graph, plan) -> None:
    """After torch's capture_begin (which rewrote the registered states' device tensors)."""
    _ext.module().plan_begun(graph, plan)


def ending(graph, plan) -> None:
    """Before torch's capture_end: the captured node advancing each drawn state. Should it fail,
    the graph's replays write the states' tensors each time (exact, slower) and recap says so
    once."""
    try:
        _ext.module().plan_ending(graph, plan)
    except Exception as e:  # noqa: BLE001 - a speed-up: never the reason a capture fails
        from . import _lib
        _lib.log_once("warn", f"recap.torch: no advance node in a captured graph ({e}); its "
                      "replays write the generator states' tensors each time")


def ended(graph, plan) -> None:
    """After torch's capture_end: the exec (or kept graph) that holds the node."""
    _ext.module().plan_ended(graph, plan)


def plan_of(graph):
    """The graph's plan (None when torch replays it)."""
    d = getattr(graph, "__dict__", None)
    return None if d is None else d.get("_recap_plan")
