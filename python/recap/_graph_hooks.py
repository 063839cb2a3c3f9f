# SPDX-License-Identifier: Apache-2.0
"""recap.torch's one way into the lifecycle of torch's CUDA graphs, on every torch it supports.

torch 2.14 added global lifecycle hooks to ``torch.cuda.graphs``: a function registered with
``register_graph_capture_start_hook`` runs with every graph once its capture is live,
``..._capture_end_hook`` once the capture has ended (the captured graph still there),
``..._instantiate_hook`` after each instantiation. Where torch has them (found by their
presence, not by torch's version) recap registers its functions there, patches none of
``CUDAGraph``'s methods for them, and every hook torch fires for other consumers (profilers,
annotations) fires as before.

Older torch has no such hooks, so a shim gives it the same three points: it wraps
``torch.cuda.graphs.CUDAGraph``'s ``capture_begin``, ``capture_end`` and ``instantiate`` once and
runs the functions registered here where torch 2.14's methods run theirs (after torch's
capture_begin; after torch's capture_end; after an instantiation, which torch before 2.14 also
makes inside capture_end when the graph is not kept). Like torch's fan-out, the shim swallows a
hook's exception: one consumer never breaks a capture. So the functions recap runs at those
points are the same on torch 2.11 as on 2.14 and later.

Two points no torch hook offers (``before``), patched only while something needs them:
- before torch's capture_begin, outside the capture: registering generator states with the
  graph, which torch before 2.14 requires and refuses once the capture is live (torch's
  capture-start hook fires then). torch 2.14 registers a state lazily on its first draw, so
  there nothing needs this point.
- before torch's capture_end, still capturing: recap's advance node (recap/_replay.py), which must
  be captured into the graph; torch's capture-end hook fires after the capture ended.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Dict, List

import torch

POINTS = ("capture_start", "capture_end", "instantiate")
BEFORE = ("capture_begin", "capture_end")

_lock = threading.Lock()
_ids = iter(range(1, 1 << 62))
# The shim's registries (used only where torch has no hooks of its own).
_hooks: Dict[str, "OrderedDict[int, Callable]"] = {p: OrderedDict() for p in POINTS}
_before: Dict[str, "OrderedDict[int, Callable]"] = {b: OrderedDict() for b in BEFORE}
_orig: Dict[str, Callable] = {}  # CUDAGraph's methods this module wrapped, as they were


def torch_has_hooks() -> bool:
    """Whether this torch fires global CUDA-graph lifecycle hooks (torch 2.14 and later)."""
    g = torch.cuda.graphs
    return all(callable(getattr(g, f"register_graph_{p}_hook", None)) for p in POINTS)


class Handle:
    """What ``on`` and ``before`` return: ``remove()`` takes the function back out."""

    __slots__ = ("_remove",)

    def __init__(self, remove: Callable[[], None]) -> None:
        self._remove = remove

    def remove(self) -> None:
        fn, self._remove = self._remove, None
        if fn is not None:
            fn()


def on(point: str, fn: Callable) -> Handle:
    """Runs ``fn(graph)`` at ``point`` (capture_start, capture_end, instantiate) for every torch
    CUDA graph: through torch's own hook where torch has it, else through the shim."""
    if point not in POINTS:
        raise ValueError(f"recap: no graph hook point {point!r} (one of {', '.join(POINTS)})")
    if torch_has_hooks():
        h = getattr(torch.cuda.graphs, f"register_graph_{point}_hook")(fn)
        return Handle(h.remove)
    return _add(_hooks[point], fn)


def before(name: str, fn: Callable) -> Handle:
    """Runs ``fn(graph)`` before torch's ``CUDAGraph.<name>`` (capture_begin, capture_end) on
    any torch: a patch, for the two points no torch hook offers (see the module's text). An
    exception from ``fn`` is swallowed, as the hooks' are."""
    if name not in BEFORE:
        raise ValueError(f"recap: no graph method {name!r} to run before (one of "
                         f"{', '.join(BEFORE)})")
    return _add(_before[name], fn)


def _add(registry: "OrderedDict[int, Callable]", fn: Callable) -> Handle:
    with _lock:
        key = next(_ids)
        registry[key] = fn
        _patch()

    def remove() -> None:
        with _lock:
            registry.pop(key, None)
            _patch()

    return Handle(remove)


def _run(registry: "OrderedDict[int, Callable]", graph) -> None:
    for fn in list(registry.values()):
        try:
            fn(graph)
        except Exception:  # noqa: BLE001 - as torch's fan-out: never the reason a capture fails
            pass


def _instantiated(graph) -> bool:
    """Whether the graph holds an exec now (torch before 2.14 instantiates inside capture_end
    unless the graph is kept; its raw_cuda_graph_exec raises until then)."""
    has = getattr(graph, "_has_graph_exec", None)
    if isinstance(has, bool):
        return has
    try:
        graph.raw_cuda_graph_exec()
    except Exception:  # noqa: BLE001 - torch's "instantiate() first"
        return False
    return True


def _wrappers() -> Dict[str, Callable]:
    """The wrapped methods, made over the originals in ``_orig``."""
    orig = _orig

    def capture_begin(self, *args, **kwargs):
        _run(_before["capture_begin"], self)
        out = orig["capture_begin"](self, *args, **kwargs)
        _run(_hooks["capture_start"], self)
        return out

    def capture_end(self, *args, **kwargs):
        _run(_before["capture_end"], self)
        out = orig["capture_end"](self, *args, **kwargs)
        _run(_hooks["capture_end"], self)
        if _hooks["instantiate"] and _instantiated(self):
            _run(_hooks["instantiate"], self)
        return out

    def instantiate(self, *args, **kwargs):
        out = orig["instantiate"](self, *args, **kwargs)
        _run(_hooks["instantiate"], self)
        return out

    return {"capture_begin": capture_begin, "capture_end": capture_end,
            "instantiate": instantiate}


def _needed() -> List[str]:
    """The methods that must be wrapped now (under _lock)."""
    names = [b for b in BEFORE if _before[b]]
    if any(_hooks.values()):  # the shim (only registered into where torch has no hooks)
        names += ["capture_begin", "capture_end", "instantiate"]
    return sorted(set(names))


def _patch() -> None:
    """Wraps the methods something needs and puts back the rest (under _lock). A method another
    library wrapped over recap's since stays as it is (it calls recap's, which keeps working)."""
    cls = torch.cuda.graphs.CUDAGraph
    want = _needed()
    for name in list(_orig):
        if name not in want:
            mine = cls.__dict__.get(name)
            if getattr(mine, "_recap_hook", False):
                setattr(cls, name, _orig.pop(name))
    missing = [n for n in want if n not in _orig and hasattr(cls, n)]
    if not missing:
        return
    for name in missing:
        _orig[name] = getattr(cls, name)
    made = _wrappers()
    for name in missing:
        fn = made[name]
        fn.__wrapped__ = _orig[name]
        fn.__doc__ = _orig[name].__doc__
        fn.__name__ = fn.__qualname__ = name
        fn._recap_hook = True
        setattr(cls, name, fn)


def patched() -> List[str]:
    """The CUDAGraph methods this module has wrapped now (recap.torch.backend() reports it)."""
    with _lock:
        return sorted(_orig)
