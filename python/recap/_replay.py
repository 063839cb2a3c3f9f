# SPDX-License-Identifier: Apache-2.0
"""Replays of torch CUDA graphs that pay only for the generator states they draw from.

torch 2.11 replays a graph by writing, for every generator state registered with it, the state's
seed and offset into two device tensors (two fill_ kernels, about 14 us of host time) before the
launch, whether the graph drew from that state or not. recap registers every live tracker state
before each capture, because torch refuses a registration once the capture has begun; a graph
that draws from one of eight states would pay for nine (with the default generator's).

So recap.torch replays the graphs it can account for itself (recap/_torchops.c,
recap_torch_replay): the seed and offset of the states the graph drew from, written with stream
memory operations, their offsets advanced as torch advances them, then the launch. A graph gets
such a plan only when

- recap knows every state torch registered with it: those recap registered, those registered
  through ``CUDAGraph.register_generator_state`` from Python, and the default generator's state
  that ``capture_begin`` registers; their number must equal the size of torch's own table
  (read from the graph object). A state registered any other way leaves the graph to torch.
- recap found, on the running torch, where a state keeps its in-graph increment, its capture
  flag and its two device tensors, and a probe graph replayed through the plan drew exactly what
  torch's own replay drew from the same state, and left the same offset.

Any doubt leaves torch's replay in place. ``RECAP_TORCH_REPLAY=0`` turns this off. A replay the
plan cannot do (no exec yet, inside a capture, on another device) goes to torch's replay, which
raises where torch raises.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import List, Optional

import torch

from . import torch as rtorch

_lock = threading.Lock()
_bound: Optional[bool] = None
why = ""               # why plans are off, when they are
_count_at = 0          # the graph's table size in a CUDAGraph object
_shim = None
_replay_fn = None
_raw_stream = None
_get_device = None
stats = {"plans": 0, "left_to_torch": 0}


class _CAI:
    """A device address as __cuda_array_interface__, for torch.as_tensor (no copy)."""

    def __init__(self, addr: int, dtype: str = "<i8") -> None:
        self.__cuda_array_interface__ = {"shape": (1,), "typestr": dtype, "strides": None,
                                         "data": (addr, False), "version": 3}


def _peek(addr: int) -> Optional[int]:
    buf = ctypes.c_uint64()
    if addr < 1 << 12 or _shim.recap_torch_peek(addr, ctypes.byref(buf), 8) != 0:
        return None
    return buf.value


def _peek_bytes(addr: int, n: int) -> Optional[bytes]:
    buf = ctypes.create_string_buffer(n)
    return buf.raw if _shim.recap_torch_peek(addr, buf, n) == 0 else None


def _cpp(graph) -> int:
    """The C++ CUDAGraph behind a torch.cuda.CUDAGraph (a pybind11 instance holds its value
    pointer right after the Python header). Checked by _find_count_at."""
    return _peek(id(graph) + object.__basicsize__) or 0


def _state_ptr(gen: torch.Generator) -> int:
    """The at::CUDAGeneratorState a torch.Generator (or graph-safe state object) uses now."""
    return _peek(rtorch._impl(gen) + rtorch._torchops_fields[0]) or 0


def _find_tensor_chain(dev: int):
    """Where a TensorImpl keeps its StorageImpl pointer and a StorageImpl its data pointer:
    the (storage_at, data_at) that lead from three tensors' TensorImpl (Tensor._cdata) to their
    data_ptr()."""
    found = None
    for t in (torch.empty(3, device=dev), torch.empty(1000, dtype=torch.int64, device=dev),
              torch.zeros(7, dtype=torch.uint8, device=dev)):
        here = set()
        for s in range(8, 256, 8):
            p = _peek(t._cdata + s)
            if p is None or p % 8:
                continue
            for d in range(0, 64, 8):
                if _peek(p + d) == t.data_ptr():
                    here.add((s, d))
        found = here if found is None else found & here
    # torch's CUDA allocator keeps the address twice in a DataPtr (data and context): the first.
    return min(found) if found and len({s for s, _ in found}) == 1 else None


def _find_count_at() -> Optional[int]:
    """The word of a C++ CUDAGraph that counts its registered generator states: the one that
    reads 0, 1, 2, 3 in four graphs holding that many."""
    reg = torch._C._CUDAGraph.register_generator_state
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    states = [gen.clone_state() for _ in range(3)]
    graphs = [torch.cuda.CUDAGraph() for _ in range(4)]
    for n, g in enumerate(graphs):
        for s in states[:n]:
            reg(g, s)
    objs = [_cpp(g) for g in graphs]
    if not all(objs):
        return None
    hits = [k for k in range(0, 512, 8) if [_peek(o + k) for o in objs] == [0, 1, 2, 3]]
    return hits[0] if len(hits) == 1 else None


def _probe_capture(dev: int, orig):
    """A graph that draws from a fresh state, captured on a private stream: (graph, state,
    output, state bytes during the capture, state bytes after it)."""
    gen = torch.cuda.default_generators[dev]
    s = gen.clone_state()
    g = torch.cuda.CUDAGraph()
    torch._C._CUDAGraph.register_generator_state(g, s)
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    st = _state_ptr(s)
    with torch.cuda.stream(side):
        x = torch.empty(4096, device=dev)
        orig["capture_begin"](g, capture_error_mode="relaxed")
        try:
            torch.rand(4096, device=dev, generator=s, out=x)
            during = _peek_bytes(st, 128)
        finally:
            orig["capture_end"](g)
    torch.cuda.current_stream(dev).wait_stream(side)
    return g, s, x, during, _peek_bytes(st, 128)


def _u64(b: bytes, k: int) -> int:
    return int.from_bytes(b[k:k + 8], "little")


def _read_dev(addr: int, blocks) -> Optional[int]:
    """The 64-bit value at a device address, if it lies in one of torch's allocated blocks
    (address, size): nothing else is read."""
    if any(a <= addr <= a + n - 8 for a, n in blocks):
        return int(torch.as_tensor(_CAI(addr), device="cuda").item())
    return None


def _no(reason: str) -> bool:
    global why
    why = reason
    return False


def _bind(dev: int, orig) -> bool:
    """Finds and checks what a replay needs on this torch; True when plans can be made."""
    global _shim, _count_at, _replay_fn, _raw_stream, _get_device
    shim = rtorch._torchops()
    if shim is None or os.environ.get("RECAP_TORCH_REPLAY") == "0":
        return _no("recap/_torchops.c is not built, or RECAP_TORCH_REPLAY=0")
    _shim = shim
    shim.recap_torch_peek.argtypes = [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    shim.recap_torch_peek.restype = ctypes.c_int
    shim.recap_torch_driver.restype = ctypes.c_int
    shim.recap_torch_bind_replay.argtypes = [ctypes.c_size_t] * 6
    shim.recap_torch_bind_replay.restype = ctypes.c_int
    shim.recap_torch_state_increment.argtypes = [ctypes.c_void_p]
    shim.recap_torch_state_increment.restype = ctypes.c_uint64
    shim.recap_torch_plan_create.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                             ctypes.POINTER(ctypes.c_void_p),
                                             ctypes.POINTER(ctypes.c_uint64)]
    shim.recap_torch_plan_create.restype = ctypes.c_void_p
    shim.recap_torch_plan_destroy.argtypes = [ctypes.c_void_p]
    shim.recap_torch_plan_destroy.restype = None
    shim.recap_torch_plan_set_exec.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    shim.recap_torch_plan_set_exec.restype = None
    for name in ("recap_torch_plan_states", "recap_torch_plan_replays"):
        getattr(shim, name).argtypes = [ctypes.c_void_p]
        getattr(shim, name).restype = ctypes.c_uint64
    shim.recap_torch_replay.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    shim.recap_torch_replay.restype = ctypes.c_int
    if shim.recap_torch_driver() != 0:
        return _no("the driver's stream memory operations or cuGraphLaunch were not found")
    rtorch.generator(dev)  # binds the state's seed and offset (recap/_torchops.c)
    if not rtorch._torchops_bound:
        return _no("torch's generator fields were not found (recap/_torchops.c unbound)")
    _, seed_at, offset_at = rtorch._torchops_fields
    chain = _find_tensor_chain(dev)
    count_at = _find_count_at()
    if chain is None or count_at is None:
        return _no("a tensor's storage or a graph's generator table was not found")
    _count_at = count_at

    g, s, x, during, after = _probe_capture(dev, orig)
    if during is None or after is None or _peek(_cpp(g) + count_at) != 2:
        return _no("the probe capture's table or state could not be read")
    seed = (0x5EED_7A11_0000_0000 | (os.getpid() & 0xFFFF)) & ((1 << 63) - 1)
    base = 4 * 1021
    s.set_state(torch.frombuffer(bytearray(rtorch._pack(seed, base)), dtype=torch.uint8))
    orig["replay"](g)  # torch's own: writes seed and base into the state's device tensors
    want = x.clone()
    inc = rtorch._state_bytes(s.get_state())
    inc = int.from_bytes(inc[8:], "little") - base
    torch.cuda.synchronize(dev)
    if inc <= 0:
        return _no("the probe graph drew nothing")
    intra = [k for k in range(offset_at + 8, min(offset_at + 64, len(during) - 8), 8)
             if _u64(during, k) == inc and _u64(after, k) == inc]
    if len(intra) != 1:
        return _no("the state's in-graph increment was not found")
    flag = [k for k in range(intra[0] + 8, min(intra[0] + 16, len(during))) if during[k] == 1 and after[k] == 0]
    if len(flag) != 1:
        return _no("the state's capture flag was not found")
    st = _state_ptr(s)
    storage_at, data_at = chain
    blocks = [(b["address"], b["size"]) for seg in torch.cuda.memory_snapshot()
              for b in seg.get("blocks", ()) if b.get("state") == "active_allocated"]
    ext = {}
    for k in range(flag[0] + 1, flag[0] + 160):
        if k % 8:
            continue
        p = _peek(st + k)
        q = _peek(p + storage_at) if p is not None else None
        a = _peek(q + data_at) if q is not None else None
        v = _read_dev(a, blocks) if a else None
        if v in (seed, base) and v not in ext:
            ext[v] = k
    if set(ext) != {seed, base} or \
            shim.recap_torch_bind_replay(intra[0], flag[0], ext[seed], ext[base], storage_at,
                                         data_at) != 0:
        return _no("the state's device tensors were not found")

    # The proof: the same replay through a plan draws what torch's drew, and leaves the offset.
    _raw_stream = torch._C._cuda_getCurrentRawStream
    _get_device = torch._C._cuda_getDevice
    _replay_fn = shim.recap_torch_replay
    s.set_state(torch.frombuffer(bytearray(rtorch._pack(seed, base)), dtype=torch.uint8))
    x.zero_()
    plan = _make_plan(g, [st], dev)
    if plan is None:
        return _no("no plan could be made for the probe graph")
    rc = plan.replay()
    if rc != 0:
        return _no(f"a replay through the plan failed ({rc})")
    torch.cuda.synchronize(dev)
    got = rtorch._state_bytes(s.get_state())
    if not torch.equal(x, want) or got != rtorch._pack(seed, base + inc):
        return _no("a replay through the plan did not match torch's")
    return True


class _Plan:
    """A graph's replay plan (recap_torch_plan_t), freed with it."""

    __slots__ = ("ptr", "device", "exec_known", "__weakref__")

    def __init__(self, ptr: int, device: int, exec_known: bool) -> None:
        self.ptr = ptr
        self.device = device
        self.exec_known = exec_known

    def replay(self) -> int:
        """0 when replayed; -1 when torch's replay must run; else the driver's error."""
        if _get_device() != self.device:
            return -1
        return _replay_fn(self.ptr, _raw_stream(self.device))

    def set_exec(self, exec_: int) -> None:
        _shim.recap_torch_plan_set_exec(self.ptr, exec_)
        self.exec_known = True

    @property
    def states(self) -> int:
        return _shim.recap_torch_plan_states(self.ptr)

    @property
    def replays(self) -> int:
        return _shim.recap_torch_plan_replays(self.ptr)

    def __del__(self) -> None:
        if self.ptr and _shim is not None:
            _shim.recap_torch_plan_destroy(self.ptr)
            self.ptr = 0


def _exec_of(graph) -> Optional[int]:
    try:
        return graph.raw_cuda_graph_exec() or None
    except RuntimeError:  # keep_graph=True and not instantiated yet
        return None


def _make_plan(graph, states: List[int], dev: int) -> Optional[_Plan]:
    incs = [_shim.recap_torch_state_increment(st) for st in states]
    exec_ = _exec_of(graph)
    arr = (ctypes.c_void_p * max(1, len(states)))(*states)
    ptr = _shim.recap_torch_plan_create(exec_, len(states), arr,
                                        (ctypes.c_uint64 * max(1, len(incs)))(*incs))
    return _Plan(ptr, dev, exec_ is not None) if ptr else None


# ------------------------------------------------------------------ hooks called by recap.torch

def ready(orig) -> bool:
    """Binds once per process (on the first capture recap sees); False when plans are off."""
    global _bound
    if _bound is None:
        with _lock:
            if _bound is None:
                try:
                    _bound = _bind(torch.cuda.current_device(), orig)
                except Exception as e:  # noqa: BLE001 - any surprise: torch's replay stays
                    _bound = _no(f"{type(e).__name__}: {e}")
    return _bound


def note_state(graph, gen: torch.Generator) -> None:
    """A state registered with `graph` from Python, which a plan must account for (kept as the
    object: its state is read when the capture ends)."""
    graph.__dict__.setdefault("_recap_known", []).append(gen)


def begin(graph, orig) -> None:
    """Before torch's capture_begin (recap's registrations are noted already): the default
    generator's state, which torch's capture_begin registers itself."""
    if not ready(orig):
        return
    dev = torch.cuda.current_device()
    known = graph.__dict__.setdefault("_recap_known", [])
    known.append(torch.cuda.default_generators[dev].graphsafe_get_state())
    graph.__dict__["_recap_device"] = dev


def end(graph) -> None:
    """After torch's capture_end: a plan, when every state torch registered is known."""
    objs = graph.__dict__.pop("_recap_known", None)
    dev = graph.__dict__.pop("_recap_device", None)
    if not _bound or objs is None or dev is None:
        return
    known = {_state_ptr(o) for o in objs}
    if 0 in known or _peek(_cpp(graph) + _count_at) != len(known):
        stats["left_to_torch"] += 1
        return
    plan = _make_plan(graph, sorted(known), dev)
    if plan is None:
        stats["left_to_torch"] += 1
        return
    graph.__dict__["_recap_plan"] = plan
    stats["plans"] += 1


def plan_of(graph) -> Optional[_Plan]:
    """The graph's plan (None when torch replays it)."""
    return graph.__dict__.get("_recap_plan")
