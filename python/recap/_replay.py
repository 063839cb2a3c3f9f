# SPDX-License-Identifier: Apache-2.0
"""Replays of torch CUDA graphs that pay only for the generator states they draw from.

torch 2.11 replays a graph by writing, for every generator state registered with it, the state's
seed and offset into two device tensors (two fill_ kernels, about 14 us of host time) before the
launch, whether the graph drew from that state or not. recap registers every live tracker state
before each capture, because torch refuses a registration once the capture has begun; a graph
that draws from one of eight tracker states would pay for nine (with the default generator's,
which torch registers itself).

So recap.torch replays the graphs captured while it is installed itself (recap/_torchops.c,
recap_torch_replay): at each replay it reads the graph's own table of registered states and
their increments, as torch's replay does, writes the seed and offset of those with an increment
(stream memory operations, no kernels), advances their offsets as torch does, and launches the
graph's current exec. Nothing is cached between replays, so a reset, instantiate or new capture
made any way (through torch._C too) is followed, and a state registered any way is seen.

Where torch keeps the table, the exec, and each state's increment, capture flag and device
tensors is found on the running torch, each checked against what torch's API says (tables of
0 to 9 states, a captured graph, a graph kept for a later instantiate), and the whole is used
only after a probe graph replayed through it, with its device tensors cleared first, drew exactly
what torch's own replay drew and left the same offset. torch's Python-level replay must be the
plain call to the C++ one (later torch adds bookkeeping there). Any doubt leaves torch's replay
in place, and ``why`` says what; ``RECAP_TORCH_REPLAY=0`` turns it off. A replay it cannot do
(no exec yet, inside a capture, no current context, another device) goes to torch's replay, which
raises where torch raises. One difference stays: torch also rewrites the device tensors of
states the graph did not draw from; a graph that draws from a state whose increment is 0 in its
table (torch sets 0 when a state is registered again after the capture, and then repeats that
state's numbers at every replay) reads whatever those tensors last held instead.
"""
from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import List, Optional, Tuple

import torch

from . import torch as rtorch

_lock = threading.Lock()
_bound: Optional[bool] = None
why = ""               # why plans are off, when they are
_shim = None
_replay_fn = None
_raw_stream = None
_get_device = None
stats = {"plans": 0, "replays": 0, "to_torch": 0}
_TABLE_COUNT_AT = 24   # ska::flat_hash_map's element count, from its start (recap/_torchops.c)


class _CAI:
    """A device address as __cuda_array_interface__, for torch.as_tensor (no copy)."""

    def __init__(self, addr: int) -> None:
        self.__cuda_array_interface__ = {"shape": (1,), "typestr": "<i8", "strides": None,
                                         "data": (addr, False), "version": 3}


def _dev_tensor(addr: int) -> torch.Tensor:
    return torch.as_tensor(_CAI(addr), device="cuda")


def _peek(addr: int) -> Optional[int]:
    return rtorch._word(_shim, addr)


def _peek_bytes(addr: int, n: int) -> Optional[bytes]:
    buf = ctypes.create_string_buffer(n)
    return buf.raw if _shim.recap_torch_peek(addr, buf, n) == 0 else None


def _cpp(graph) -> int:
    """The C++ CUDAGraph behind a torch.cuda.CUDAGraph (a pybind11 instance holds its value
    pointer right after the Python header). Checked by _find_table."""
    return _peek(id(graph) + object.__basicsize__) or 0


def _state_ptr(gen: torch.Generator) -> int:
    """The at::CUDAGeneratorState a torch.Generator (or graph-safe state object) uses now."""
    return _peek(rtorch._impl(gen) + rtorch._torchops_fields[0]) or 0


def graph_states(graph) -> Optional[List[Tuple[int, int]]]:
    """The (state, increment) pairs torch's table holds for ``graph``, or None."""
    if _shim is None:
        return None
    cap = 256
    states, incs = (ctypes.c_void_p * cap)(), (ctypes.c_uint64 * cap)()
    n = _shim.recap_torch_graph_states(_cpp(graph), states, incs, cap)
    if n < 0 or n > cap:
        return None
    return [(states[i] or 0, incs[i]) for i in range(n)]


def _find_tensor_chain(dev: int):
    """Where a TensorImpl keeps its StorageImpl pointer and a StorageImpl its data pointer:
    the (storage_at, data_at) that lead from five tensors' TensorImpl (Tensor._cdata) to their
    data_ptr()."""
    found = None
    for t in (torch.empty(3, device=dev), torch.empty(1000, dtype=torch.int64, device=dev),
              torch.zeros(7, dtype=torch.uint8, device=dev), torch.ones(1, device=dev),
              torch.empty(4097, dtype=torch.float16, device=dev)):
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


def _find_table(dev: int) -> Optional[int]:
    """Where a C++ CUDAGraph keeps its table of registered states: a word of the object that
    counts 0, 1, 3, 6, 9 in five graphs holding that many states is the table's element count
    if, bound there, the table reads back exactly the states registered in each graph (words
    past the object belong to its heap neighbours and may count by chance: the read-back
    decides)."""
    reg = torch._C._CUDAGraph.register_generator_state
    gen = torch.cuda.default_generators[dev]
    states = [gen.clone_state() for _ in range(9)]
    sizes = (0, 1, 3, 6, 9)
    graphs = [torch.cuda.CUDAGraph() for _ in sizes]
    for n, g in zip(sizes, graphs):
        for s in states[:n]:
            reg(g, s)
    objs = [_cpp(g) for g in graphs]
    if not all(objs):
        return None
    want = [sorted((_state_ptr(s), 0) for s in states[:n]) for n in sizes]
    for k in range(_TABLE_COUNT_AT, 256, 8):
        if [_peek(o + k) for o in objs] != list(sizes):
            continue
        table_at = k - _TABLE_COUNT_AT
        if _shim.recap_torch_bind_graph(table_at, 0, 0) != 0:
            return None
        got = [graph_states(g) for g in graphs]
        if all(x is not None and sorted(x) == w for x, w in zip(got, want)):
            return table_at
    return None


def _capture(g, dev: int, orig, fn) -> None:
    """Captures fn() into g on a private stream, in relaxed mode (other threads unaffected)."""
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        orig["capture_begin"](g, capture_error_mode="relaxed")
        try:
            fn()
        finally:
            orig["capture_end"](g)
    torch.cuda.current_stream(dev).wait_stream(side)


def _u64(b: bytes, k: int) -> int:
    return int.from_bytes(b[k:k + 8], "little")


def _read_dev(addr: int, blocks) -> Optional[int]:
    """The 64-bit value at a device address, if it lies in one of torch's allocated blocks
    (address, size): nothing else is read."""
    if any(a <= addr <= a + n - 8 for a, n in blocks):
        return int(_dev_tensor(addr).item())
    return None


def _no(reason: str) -> bool:
    global why
    why = reason
    return False


def _bind(dev: int, orig) -> bool:
    """Finds and checks what a replay needs on this torch; True when graphs can be replayed."""
    global _shim, _replay_fn, _raw_stream, _get_device
    shim = rtorch._torchops()
    if shim is None or os.environ.get("RECAP_TORCH_REPLAY") == "0":
        return _no("recap/_torchops.c is not built, or RECAP_TORCH_REPLAY=0")
    if not set(orig["replay"].__code__.co_names) <= {"super", "replay"} or \
            not hasattr(torch._C._CUDAGraph, "raw_cuda_graph_exec") or \
            not hasattr(torch._C._CUDAGraph, "instantiate"):
        return _no("this torch's CUDAGraph.replay does more than replay, or lacks "
                   "raw_cuda_graph_exec/instantiate")
    _shim = shim
    sz, vp, u64 = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_uint64
    for name, args, res in (
            ("recap_torch_driver", [], ctypes.c_int),
            ("recap_torch_bind_state", [sz] * 6, ctypes.c_int),
            ("recap_torch_bind_graph", [sz] * 3, ctypes.c_int),
            ("recap_torch_graph_states", [vp, ctypes.POINTER(vp), ctypes.POINTER(u64), sz],
             ctypes.c_long),
            ("recap_torch_replay", [vp, vp], ctypes.c_int)):
        fn = getattr(shim, name)
        fn.argtypes, fn.restype = args, res
    if shim.recap_torch_driver() != 0:
        return _no("the driver's stream memory operations, context or cuGraphLaunch were not "
                   "found")
    rtorch.generator(dev)  # binds the state's seed and offset (recap/_torchops.c)
    if not rtorch._torchops_bound:
        return _no("torch's generator fields were not found (recap/_torchops.c unbound)")
    _, seed_at, offset_at = rtorch._torchops_fields
    chain = _find_tensor_chain(dev)
    if chain is None:
        return _no("where a tensor keeps its storage and data was not found")
    table_at = _find_table(dev)
    if table_at is None:
        return _no("a graph's table of registered states was not found")

    # A graph drawing from a fresh state s; torch's capture_begin registers the default
    # generator's state beside it.
    gen = torch.cuda.default_generators[dev]
    s = gen.clone_state()
    g = torch.cuda.CUDAGraph()
    torch._C._CUDAGraph.register_generator_state(g, s)
    st, home = _state_ptr(s), _state_ptr(gen)
    x = torch.empty(4096, device=dev)
    seen = {}

    def draw():
        torch.rand(4096, device=dev, generator=s, out=x)
        seen["during"] = _peek_bytes(st, 128)

    _capture(g, dev, orig, draw)
    during, after = seen.get("during"), _peek_bytes(st, 128)
    seed = (0x5EED_7A11_0000_0000 | (os.getpid() & 0xFFFF)) & ((1 << 63) - 1)
    base = 4 * 1021
    s.set_state(torch.frombuffer(bytearray(rtorch._pack(seed, base)), dtype=torch.uint8))
    orig["replay"](g)  # torch's own: writes seed and base into the state's device tensors
    want = x.clone()
    inc = int.from_bytes(rtorch._state_bytes(s.get_state())[8:], "little") - base
    torch.cuda.synchronize(dev)
    if during is None or after is None or inc <= 0:
        return _no("the probe graph drew nothing, or its state could not be read")
    if sorted(graph_states(g) or []) != sorted({(st, inc), (home, 0)}):
        return _no("the probe graph's table did not read as its registrations")
    intra = [k for k in range(offset_at + 8, min(offset_at + 64, len(during) - 8), 8)
             if _u64(during, k) == inc and _u64(after, k) == inc]
    if len(intra) != 1:
        return _no("the state's in-graph increment was not found")
    flag = [k for k in range(intra[0] + 8, min(intra[0] + 16, len(during)))
            if during[k] == 1 and after[k] == 0]
    if len(flag) != 1:
        return _no("the state's capture flag was not found")

    # The exec and the flag saying it exists: a kept graph not instantiated yet has no exec.
    cpp = _cpp(g)
    exec_at = [k for k in range(0, 64, 8) if _peek(cpp + k) == g.raw_cuda_graph_exec()]
    kept = torch.cuda.CUDAGraph(keep_graph=True)
    _capture(kept, dev, orig, lambda: x.add_(1))
    if len(exec_at) != 1:
        return _no("the graph's exec was not found")
    before = _peek_bytes(_cpp(kept), exec_at[0] + 24)
    torch._C._CUDAGraph.instantiate(kept)
    later, mine = _peek_bytes(_cpp(kept), exec_at[0] + 24), _peek_bytes(cpp, exec_at[0] + 24)
    has = [b for b in range(exec_at[0] + 8, exec_at[0] + 24)
           if before and later and mine and before[b] == 0 and later[b] == 1 and mine[b] == 1]
    if len(has) != 1 or shim.recap_torch_bind_graph(table_at, exec_at[0], has[0]) != 0:
        return _no("the flag saying a graph has an exec was not found")

    # The state's device tensors: the two words leading to seed and base on the device.
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
            ext[v] = (k, a)
    if set(ext) != {seed, base} or \
            shim.recap_torch_bind_state(intra[0], flag[0], ext[seed][0], ext[base][0],
                                        storage_at, data_at) != 0:
        return _no("the state's device tensors were not found")

    # The proof: from the same state, with its device tensors cleared, a replay through recap
    # draws what torch's drew and leaves the same offset.
    _raw_stream = torch._C._cuda_getCurrentRawStream
    _get_device = torch._C._cuda_getDevice
    _replay_fn = shim.recap_torch_replay
    s.set_state(torch.frombuffer(bytearray(rtorch._pack(seed, base)), dtype=torch.uint8))
    for _, a in ext.values():
        _dev_tensor(a).zero_()
    x.zero_()
    rc = _replay_fn(cpp, _raw_stream(dev))
    if rc != 0:
        return _no(f"a replay through recap failed ({rc})")
    torch.cuda.synchronize(dev)
    got = rtorch._state_bytes(s.get_state())
    if not torch.equal(x, want) or got != rtorch._pack(seed, base + inc):
        return _no("a replay through recap did not match torch's")
    return True


class _Plan:
    """A graph recap replays: its C++ object and capture device. The table and exec are read
    at each replay (recap_torch_replay)."""

    __slots__ = ("graph", "cpp", "device", "replays")

    def __init__(self, graph, device: int) -> None:
        self.graph = weakref.ref(graph)  # the C++ object lives as long as the Python one
        self.cpp = _cpp(graph)
        self.device = device
        self.replays = 0

    def replay(self) -> int:
        """0 when replayed; -1 when torch's replay must run; else the driver's error."""
        if _get_device() != self.device or self.graph() is None:
            rc = -1
        else:
            rc = _replay_fn(self.cpp, _raw_stream(self.device))
        if rc == 0:
            self.replays += 1
            stats["replays"] += 1
        elif rc < 0:
            stats["to_torch"] += 1
        return rc


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


def begin(graph, orig) -> None:
    """Before torch's capture_begin: the graph is recap's to replay from now on."""
    if not ready(orig) or "_recap_plan" in graph.__dict__:
        return
    try:
        plan = _Plan(graph, torch.cuda.current_device())
    except Exception:  # noqa: BLE001 - no weak reference, say: torch replays it; the capture goes on
        return
    # The replay reads the object directly: only where its table reads safely as one (a
    # subclass laid out otherwise is left to torch).
    if plan.cpp and graph_states(graph) is not None:
        graph.__dict__["_recap_plan"] = plan
        stats["plans"] += 1


def plan_of(graph) -> Optional[_Plan]:
    """The graph's plan (None when torch replays it)."""
    return graph.__dict__.get("_recap_plan")
