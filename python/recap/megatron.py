# SPDX-License-Identifier: Apache-2.0
"""Megatron-Core's ``tensor_parallel.random`` (0.19) running on recap.

Every public name of Megatron's module, with its signature and semantics, on recap's C tracker
(named states, forks, per-rank seeding, snapshots) driving torch's own CUDA generator through
``recap.torch``: inside ``fork()`` torch's dropout, randn and fused kernels draw from the named
state, exactly as with Megatron's module (bit for bit: tests/gpu/megatron_identity.py).

``install()`` makes an existing Megatron program use this module
(``megatron.core.tensor_parallel.random`` and the names ``megatron.core.tensor_parallel``
re-exports). Graph-safe trackers register their states with every torch CUDA graph captured
later (``recap.torch.install()``): no ``register_generator_state`` in user code.

Where this module departs from Megatron's, on purpose:
- ``CheckpointWithoutOutput(fp8=False)`` means no fp8 (Megatron's ``fp8 is not None`` turns fp8
  on for False, and then needs Transformer Engine).
- Checkpoint recomputes restore the RNG by value (recap snapshots), so a graph-safe tracker's
  recompute redraws the forward's numbers; Megatron's graph-safe path restores state objects that
  have advanced since the forward.
- ``set_states`` copies the values of the states it is given into the tracker's own state objects
  (graph-safe) instead of adopting the objects, so graphs that registered them stay valid.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional

from . import torch as rtorch  # first: without torch, its one clear ImportError
from . import _abi, _ext
import torch
from torch.utils.checkpoint import detach_variable
from . import _lib, _megatron_install
from ._lib import check, lib

try:  # Transformer Engine is optional, as in Megatron
    import transformer_engine  # noqa: F401
    from transformer_engine.pytorch.distributed import activation_recompute_forward
    from transformer_engine.pytorch.fp8 import FP8GlobalStateManager, fp8_autocast

    HAVE_TE = True
except (ImportError, ModuleNotFoundError):
    HAVE_TE = False

_MODEL_PARALLEL_RNG_TRACKER_NAME = _abi.RECAP_RNG_MODEL_PARALLEL
_EXPERT_PARALLEL_RNG_TRACKER_NAME = _abi.RECAP_RNG_EXPERT_PARALLEL
_DATA_PARALLEL_RNG_TRACKER_NAME = _abi.RECAP_RNG_DATA_PARALLEL
_GTP_REMAT_RNG_TRACKER_NAME = _abi.RECAP_RNG_GTP_REMAT
_EXPERT_GTP_REMAT_RNG_TRACKER_NAME = _abi.RECAP_RNG_EGTP_REMAT
_DEFAULT = _abi.RECAP_RNG_DEFAULT

_CUDA_RNG_STATE_TRACKER = None
_CUDA_RNG_STATE_TRACKER_INITIALIZED = False
IS_CHECKPOINTING = False

__all__ = [
    "CudaRNGStatesTracker", "initialize_rng_tracker", "get_cuda_rng_tracker",
    "model_parallel_cuda_manual_seed", "get_expert_parallel_rng_tracker_name",
    "get_data_parallel_rng_tracker_name", "get_gtp_remat_rng_tracker_name", "get_all_rng_states",
    "convert_cuda_rng_state", "is_graph_safe_cuda_rng_tracker",
    "cudagraph_needs_generator_registration", "prime_cuda_rng_states_for_graph_capture",
    "checkpoint", "CheckpointFunction", "CheckpointWithoutOutput",
    "CheckpointWithoutOutputFunction", "CheckpointWithoutOutputManager", "is_checkpointing",
    "install", "HAVE_TE",
]

_log = logging.getLogger("megatron.core.tensor_parallel.random")

# ------------------------------------------------------------------ torch state helpers (Megatron's)

# Megatron's names for them, defined in recap/_megatron_state.py; the parallel layout's helpers in
# recap/_megatron_parallel.py.
from ._megatron_state import (_device_index, _get_cuda_rng_state, _set_cuda_rng_state,  # noqa: E402,F401
                              _state_value, _value_tensor, convert_cuda_rng_state)
from ._megatron_parallel import _gather_1d, _rank, _split_1d, _world  # noqa: E402


def get_expert_parallel_rng_tracker_name() -> str:
    return _EXPERT_PARALLEL_RNG_TRACKER_NAME


def get_data_parallel_rng_tracker_name() -> str:
    return _DATA_PARALLEL_RNG_TRACKER_NAME


def get_gtp_remat_rng_tracker_name(is_expert: bool = False) -> str:
    return _EXPERT_GTP_REMAT_RNG_TRACKER_NAME if is_expert else _GTP_REMAT_RNG_TRACKER_NAME


# ------------------------------------------------------------------ the tracker


class CudaRNGStatesTracker:
    """Megatron's tracker on recap's C tracker, driving torch's default CUDA generator of the
    device current when it is first used. ``use_cudagraphable_rng`` makes its states torch state
    objects that stay valid inside CUDA graphs and are registered with every graph captured
    (recap.torch.install)."""

    def __init__(self, use_cudagraphable_rng: bool = False,
                 is_inference_rng_tracker: bool = False):
        self.use_cudagraphable_rng = use_cudagraphable_rng
        self.is_inference_rng_tracker = is_inference_rng_tracker
        if use_cudagraphable_rng:
            assert (hasattr(torch.cuda.CUDAGraph, "register_generator_state")
                    and hasattr(torch.Generator, "graphsafe_set_state")
                    and hasattr(torch.Generator, "graphsafe_get_state")
                    and hasattr(torch.Generator, "clone_state")), \
                "Tried using cudagraphs with RNG, however not detected in pytorch!"
        self._handle: Optional[ctypes.c_void_p] = None
        self._gen: Optional[rtorch.TorchGenerator] = None
        self._lock = threading.RLock()
        self.reset()

    # -------------------------------------------------------------- the C tracker

    def _tracker(self) -> ctypes.c_void_p:
        """The C tracker, created on first use (Megatron touches no device in __init__)."""
        if self._handle is None:
            self._gen = rtorch.generator()
            p = _abi.TrackerParams()
            p.flags = _abi.RECAP_TRACKER_GRAPH_SAFE if self.use_cudagraphable_rng else 0
            p.generator = self._gen.handle
            h = ctypes.c_void_p()
            check(lib().recap_tracker_create(ctypes.byref(p), ctypes.byref(h)),
                  "recap_tracker_create")
            self._handle = h
            self._owner = _TrackerOwner(h)
            if self.use_cudagraphable_rng:
                rtorch.install()
                rtorch.register_tracker(self)
        return self._handle

    def _native_result(self, r):
        """The result of a recap._C tracker-state call, (status, failed call, result); a failed
        status raises recap's typed error, as _call does."""
        st, what, value = r
        if st != _abi.RECAP_OK:
            self._raise(st, what)
        return value

    def _native_states(self):
        """recap._C when it reads and writes the whole map in one call, else None."""
        self._tracker()
        C = _ext.module()
        if C is None or not hasattr(C, "get_values") or not self._gen.fast or \
                not _ext.bound("states"):
            return None
        return C

    def _call(self, name: str, *args) -> None:
        st = getattr(lib(), name)(*args)
        if st != _abi.RECAP_OK:
            self._raise(st, name)

    def _raise(self, st: int, what: str) -> None:
        """recap's typed error for a failed status (RecapStateError for RECAP_ERR_STATE), or the
        exception torch raised in the operation that failed, caused by it. The error is never
        a local of a frame it passes through (see TorchGenerator.raise_pending: a cycle that
        keeps the caller's frames for the collector)."""
        if self._gen is not None:
            self._gen.raise_pending(_lib.error(st, what))
        raise _lib.error(st, what)

    # The C tracker is destroyed by _TrackerOwner when its last holder goes: this tracker, or
    # a fork object kept beyond it (which holds the owner, not the tracker: no cycle).

    # -------------------------------------------------------------- Megatron's API

    def is_initialized(self) -> bool:
        return self._is_initialized

    def reset(self) -> None:
        """Empties the states and the used seeds; uninitialized."""
        self._is_initialized = False
        self._opaque: Dict[str, Any] = {}
        self._names: List[str] = []
        self._seeds = set()
        self._forks: Dict[str, Any] = {}  # name -> recap._C.Fork (fork() below)
        if self._handle is not None:
            self._call("recap_tracker_reset", self._handle)

    def get_states(self) -> Dict[str, Any]:
        """name -> state: uint8[16] tensors, or torch.Generator objects (graph-safe)."""
        out: Dict[str, Any] = {}
        if self._handle is None or not any(n not in self._opaque for n in self._names):
            return {n: self._opaque[n] for n in self._names if n in self._opaque}
        C = self._native_states()
        if C is not None:  # one call for the whole map (recap/csrc/tracker_states.cpp)
            names = [n for n in self._names if n not in self._opaque]
            get = C.get_objects if self.use_cudagraphable_rng else C.get_values
            got = dict(zip(names, self._native_result(get(self._handle.value, names))))
            return {n: self._opaque[n] if n in self._opaque else got[n] for n in self._names}
        if self.use_cudagraphable_rng:
            obj = ctypes.c_void_p()
            for n in self._names:
                if n in self._opaque:
                    out[n] = self._opaque[n]
                    continue
                self._call("recap_tracker_state_object", self._handle, n.encode(),
                           ctypes.byref(obj))
                out[n] = self._gen.object(obj.value)
            return out
        buf = (ctypes.c_uint8 * _abi.RECAP_STATE_BYTES)()
        states = ctypes.c_void_p()
        self._call("recap_tracker_get_states", self._handle, ctypes.byref(states))
        try:
            for n in self._names:
                if n in self._opaque:
                    out[n] = self._opaque[n]
                    continue
                self._call("recap_states_lookup", states, n.encode(), buf)
                out[n] = _value_tensor(bytes(buf))
        finally:
            lib().recap_states_free(states)
        return out

    @property
    def states_(self) -> Dict[str, Any]:
        return self.get_states()

    @states_.setter
    def states_(self, states: Dict[str, Any]) -> None:
        self.set_states(states)

    def graph_safe_generators(self) -> List[torch.Generator]:
        """The state objects automatic graph registration registers."""
        if not self.use_cudagraphable_rng or self._handle is None:
            return []
        return [g for n, g in self.get_states().items()
                if n not in self._opaque and isinstance(g, torch.Generator)]

    def set_states(self, states: Dict[str, Any]) -> None:
        """Replaces the states (values are copied; the used seeds stay, as in Megatron).
        Values that are not generator states are kept as given, and cannot be forked."""
        self._is_initialized = True
        values = {}
        opaque = {}
        for name, v in states.items():
            if isinstance(v, (torch.Tensor, torch.Generator)):
                values[name] = _state_value(v)
            else:
                opaque[name] = v
        C = self._native_states() if values or self._handle is not None else None
        if C is not None:  # one call (recap/csrc/tracker_states.cpp)
            self._native_result(C.set_values(self._tracker().value, list(values.items())))
        elif values or self._handle is not None:
            s = ctypes.c_void_p()
            check(lib().recap_states_create(ctypes.byref(s)), "recap_states_create")
            try:
                for name, b in values.items():
                    buf = (ctypes.c_uint8 * _abi.RECAP_STATE_BYTES).from_buffer_copy(b)
                    self._call("recap_states_put", s, name.encode(), buf)
                self._call("recap_tracker_set_states", self._tracker(), s)
            finally:
                lib().recap_states_free(s)
        self._opaque = opaque
        self._names = list(states.keys())
        self._forks = {}

    def add(self, name: str, seed: int) -> None:
        """Adds a state equal to the generator freshly seeded with ``seed``."""
        self._is_initialized = True
        if seed in self._seeds:
            raise Exception("seed {} already exists".format(seed))
        self._seeds.add(seed)
        if name in self._names:
            raise Exception("cuda rng state {} already exists".format(name))
        self._call("recap_tracker_add", self._tracker(), name.encode(), seed)
        self._names.append(name)

    def fork(self, name: str = _MODEL_PARALLEL_RNG_TRACKER_NAME):
        """Installs the named state in torch's generator for the block, then puts the outer one
        back (nested forks A, B, A draw what the same forks one after another would). Where
        torch's generator runs its operations in recap._C, the context manager is recap._C's
        (recap/csrc/fork.cpp: one object per name, kept, so a fork allocates nothing and costs
        one call in and one out); otherwise a Python one with the same behaviour."""
        f = self._forks.get(name)
        if f is not None:
            return f
        if name not in self._names or name in self._opaque:
            raise Exception("cuda rng state {} is not added".format(name))
        f = self._native_fork(name)
        if f is None:
            return self._fork_py(name)
        self._forks[name] = f
        return f

    def _native_fork(self, name: str):
        C = _ext.module()
        h = self._tracker()
        if C is None or not hasattr(C, "Fork") or not self._gen.fast or \
                not _ext.bound("fork"):
            return None
        me = weakref.ref(self)  # held in C++, where the collector cannot see a cycle

        def fail(st: int, what: str) -> None:
            if what == "recap_tracker_unfork" and st == _abi.RECAP_ERR_STATE:
                raise Exception("current state name is not the same as the desired state name "
                                f"{name}: " + lib().recap_last_error().decode())
            t = me()
            if t is not None:
                t._raise(st, what)
            raise _lib.error(st, what)
        f = _NativeFork(h.value, name, fail, _log.warning)
        f._owner = self._owner  # a fork object kept beyond the tracker keeps its C tracker
        return f

    @contextlib.contextmanager
    def _fork_py(self, name: str):
        h = self._tracker()
        tok = ctypes.c_uint64()
        self._call("recap_tracker_fork", h, name.encode(), ctypes.byref(tok))
        cpu_rng_state = torch.get_rng_state()
        try:
            yield
        finally:
            if not torch.equal(cpu_rng_state, torch.get_rng_state()):
                _log.warning("CPU RNG state changed within GPU RNG context")
            st = lib().recap_tracker_unfork(h, tok.value)
            if st == _abi.RECAP_ERR_STATE:
                raise Exception("current state name is not the same as the desired state name "
                                f"{name}: " + lib().recap_last_error().decode())
            if st != _abi.RECAP_OK:
                self._call("recap_tracker_unfork", h, tok.value)

    # -------------------------------------------------------------- snapshots (recap's)

    def _snapshot(self) -> "_Snapshot":
        return _Snapshot(self)


class _TrackerOwner:
    """Owns a C tracker: destroys it when the last Python object holding it goes."""

    __slots__ = ("handle",)

    def __init__(self, handle: ctypes.c_void_p) -> None:
        self.handle = handle

    def __del__(self):
        h, self.handle = self.handle, None
        if h is not None:
            try:
                lib().recap_tracker_destroy(h)
            except Exception:  # noqa: BLE001 - interpreter teardown
                pass


_native_cls = None  # recap._C.Fork with ContextDecorator, made on first use


def _NativeFork(*args):
    global _native_cls
    if _native_cls is None:
        class NativeFork(_ext.module().Fork, contextlib.ContextDecorator):
            """recap._C.Fork, usable as a decorator too (as the generator-based one was)."""

            def _recreate_cm(self):
                return self  # nested and recursive uses push onto the same object's stacks
        _native_cls = NativeFork
    return _native_cls(*args)


class _Snapshot:
    """The tracker's whole RNG state (torch's generator and every named state) as a recap
    snapshot, plus torch's CPU generator: what a checkpoint restores for its recompute."""

    def __init__(self, tracker: CudaRNGStatesTracker):
        self.tracker = tracker
        self.cpu = torch.get_rng_state()
        h = ctypes.c_void_p()
        check(lib().recap_snapshot_create(ctypes.byref(h)), "recap_snapshot_create")
        self.handle = h
        tracker._call("recap_snapshot_take", tracker._tracker(), h)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        self.tracker._call("recap_snapshot_restore", self.tracker._tracker(), self.handle)

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h is not None:
            try:
                lib().recap_snapshot_destroy(h)
            except Exception:  # noqa: BLE001
                pass

# ------------------------------------------------------------------ the process's tracker


def initialize_rng_tracker(use_te_rng_tracker: bool = False, inference_rng_tracker: bool = False,
                           use_cudagraphable_rng: bool = False, force_reset: bool = False):
    """Creates the global tracker (once; force_reset replaces it)."""
    global _CUDA_RNG_STATE_TRACKER, _CUDA_RNG_STATE_TRACKER_INITIALIZED
    if force_reset:
        _CUDA_RNG_STATE_TRACKER = None
        _CUDA_RNG_STATE_TRACKER_INITIALIZED = False
    if _CUDA_RNG_STATE_TRACKER_INITIALIZED:
        return
    kwargs = {"use_cudagraphable_rng": use_cudagraphable_rng or use_te_rng_tracker,
              "is_inference_rng_tracker": inference_rng_tracker}
    base = CudaRNGStatesTracker
    if inference_rng_tracker:
        class InferenceCudaRNGStatesTracker(base):
            """No states, no forks: inference needs no dropout."""

            def add(self, name, seed):
                pass

            def set_states(self, states):
                pass

            def fork(self, name=_MODEL_PARALLEL_RNG_TRACKER_NAME):
                return contextlib.nullcontext()

        cls = InferenceCudaRNGStatesTracker
    else:
        cls = base
    _CUDA_RNG_STATE_TRACKER = cls(**kwargs)
    _CUDA_RNG_STATE_TRACKER_INITIALIZED = True


def get_cuda_rng_tracker(use_te_rng_tracker: bool = False, inference_rng_tracker: bool = False,
                         use_cudagraphable_rng: bool = False):
    """The global tracker (created on first call with these options)."""
    initialize_rng_tracker(use_te_rng_tracker, inference_rng_tracker, use_cudagraphable_rng)
    return _CUDA_RNG_STATE_TRACKER


def model_parallel_cuda_manual_seed(seed: int, te_rng_tracker: bool = False,
                                    inference_rng_tracker: bool = False,
                                    use_cudagraphable_rng: bool = False,
                                    tp_rank: Optional[int] = None, ep_rank: Optional[int] = None,
                                    etp_rank: Optional[int] = None,
                                    force_reset_rng: bool = False):
    """Seeds the default generator with ``seed`` and adds data-, model- and expert-parallel
    states (and the GTP remat states when those groups are larger than one) with Megatron's
    arithmetic. Ranks come from megatron.core.parallel_state unless given."""
    tp = _rank("get_tensor_model_parallel_rank", tp_rank)
    ep = _rank("get_expert_model_parallel_rank", ep_rank)
    etp = _rank("get_expert_tensor_parallel_rank", etp_rank)
    gtp_size = _world("get_gtp_weight_remat_world_size")
    egtp_size = _world("get_expert_gtp_weight_remat_world_size")
    gtp = _rank("get_gtp_weight_remat_rank", None) if gtp_size > 1 else 0
    egtp = _rank("get_expert_gtp_weight_remat_rank", None) if egtp_size > 1 else 0
    initialize_rng_tracker(te_rng_tracker, inference_rng_tracker, use_cudagraphable_rng,
                           force_reset=force_reset_rng)
    t = _CUDA_RNG_STATE_TRACKER
    tp_seed = seed + 2718 + tp
    ep_seed = seed + 1024 + 100 * ep + etp
    plan = [(_DATA_PARALLEL_RNG_TRACKER_NAME, seed), (_MODEL_PARALLEL_RNG_TRACKER_NAME, tp_seed),
            (_EXPERT_PARALLEL_RNG_TRACKER_NAME, ep_seed)]
    if gtp_size > 1:
        plan.append((_GTP_REMAT_RNG_TRACKER_NAME, tp_seed + 65536 * (1 + gtp)))
    if egtp_size > 1:
        plan.append((_EXPERT_GTP_REMAT_RNG_TRACKER_NAME, ep_seed + 32768 + 65536 * (1 + egtp)))
    if type(t) is CudaRNGStatesTracker and seed > 0:
        # One all-or-nothing C call: reset, seed torch's generator, add the states.
        r = _abi.ParallelRanks(tp, tp + 1, ep, ep + 1, etp, etp + 1, gtp, max(gtp_size, 1),
                               egtp, max(egtp_size, 1))
        t.reset()
        t._call("recap_tracker_seed_parallel", t._tracker(), seed, ctypes.byref(r))
        t._is_initialized = True
        t._names = [n for n, _ in plan]
        t._seeds = {s for _, s in plan}
        return
    t.reset()
    torch.cuda.manual_seed(seed)
    for name, s in plan:
        t.add(name, s)


def is_graph_safe_cuda_rng_tracker(cuda_rng_tracker) -> bool:
    return bool(getattr(cuda_rng_tracker, "use_cudagraphable_rng", False))


def get_all_rng_states() -> Dict[str, Any]:
    """The global tracker's states (what graph code registers with its graphs)."""
    assert _CUDA_RNG_STATE_TRACKER_INITIALIZED, \
        "Tried getting all rng states but RNG Tracker has not been initalized!"
    if isinstance(_CUDA_RNG_STATE_TRACKER, CudaRNGStatesTracker):
        return _CUDA_RNG_STATE_TRACKER.states_
    return {}


def cudagraph_needs_generator_registration() -> bool:
    """Whether this torch rejects draws from generator states not registered with a capture
    (asked through recap's framework table: recap_generator_needs_registration)."""
    g = rtorch.generator()
    needs = ctypes.c_int()
    check(lib().recap_generator_needs_registration(g.handle, ctypes.byref(needs)),
          "recap_generator_needs_registration")
    return bool(needs.value)


def prime_cuda_rng_states_for_graph_capture(graph: torch.cuda.CUDAGraph) -> int:
    """Registers every graph-safe state of every recap tracker, and the default generators,
    with ``graph`` before its capture; returns how many states. Not needed where
    recap.torch.install() runs (graph-safe trackers and install() run it)."""
    n = rtorch.register_with(graph, rtorch.registered_states())
    for g in torch.cuda.default_generators:
        graph.register_generator_state(g)
        n += 1
    return n


def _get_all_rng_states():
    """(CPU state, CUDA generator state, tracker states), Megatron's triple."""
    t = get_cuda_rng_tracker()
    return (torch.get_rng_state(), _get_cuda_rng_state(graph_safe=False), t.get_states())


def _set_all_rng_states(cpu_rng_state, cuda_rng_state, cuda_rng_state_tracker) -> None:
    torch.set_rng_state(cpu_rng_state)
    _set_cuda_rng_state(convert_cuda_rng_state(cuda_rng_state, to_graphable=False))
    get_cuda_rng_tracker().set_states(cuda_rng_state_tracker)


@contextlib.contextmanager
def _fork_rng():
    snap = _snapshot_all()
    try:
        yield
    finally:
        snap.restore()


def _snapshot_all():
    """A recap snapshot of the global tracker (the generator it drives, every named state) and
    torch's CPU generator."""
    t = get_cuda_rng_tracker()
    if isinstance(t, CudaRNGStatesTracker):
        return t._snapshot()
    return _TripleSnapshot()


class _TripleSnapshot:
    def __init__(self):
        self.states = _get_all_rng_states()

    def restore(self):
        _set_all_rng_states(*self.states)


def _set_checkpointing() -> None:
    global IS_CHECKPOINTING
    IS_CHECKPOINTING = True


def _unset_checkpointing() -> None:
    global IS_CHECKPOINTING
    IS_CHECKPOINTING = False


def is_checkpointing() -> bool:
    return IS_CHECKPOINTING

# ------------------------------------------------------------------ checkpoint


def _graph_warmup_or_capture() -> bool:
    try:
        from megatron.core.transformer import cuda_graphs
        if cuda_graphs.is_graph_warmup() or cuda_graphs.is_graph_capturing():
            return True
    except (ImportError, AttributeError):
        pass
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class CheckpointFunction(torch.autograd.Function):
    """Megatron's checkpoint: the forward runs without keeping activations, the backward
    restores the RNG (a recap snapshot taken before the forward), recomputes and back-propagates;
    the states current before the recompute come back afterwards."""

    @staticmethod
    def forward(ctx, run_function, distribute_saved_activations, *args):
        _set_checkpointing()
        ctx.run_function = run_function
        ctx.distribute_saved_activations = distribute_saved_activations
        ctx.rng = _snapshot_all()
        with torch.no_grad():
            outputs = run_function(*args)
        if distribute_saved_activations:
            ctx.input_0_shape = args[0].data.shape
            args[0].data = _split_1d(args[0].data)
        ctx.save_for_backward(*args)
        _unset_checkpointing()
        return outputs

    @staticmethod
    def backward(ctx, *args):
        if not torch.autograd._is_checkpoint_valid():
            raise RuntimeError("Checkpointing is not compatible with .grad(), "
                               "please use .backward() if possible")
        _set_checkpointing()
        inputs = ctx.saved_tensors
        if ctx.distribute_saved_activations:
            inputs[0].data = _gather_1d(inputs[0].data).view(ctx.input_0_shape)
        with _fork_rng():
            ctx.rng.restore()
            detached = detach_variable(inputs)
            with torch.enable_grad():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, args)
                 if torch.is_tensor(o) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True,"
                               " this checkpoint() is not necessary")
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in detached)
        _unset_checkpointing()
        return (None, None) + grads


def checkpoint(function: Callable, distribute_saved_activations: bool, *args):
    """Checkpoints ``function(*args)``; a plain call during graph warm-up and capture."""
    if _graph_warmup_or_capture():
        return function(*args)
    return CheckpointFunction.apply(function, distribute_saved_activations, *args)


class CheckpointWithoutOutputFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, checkpoint_without_output_obj, *args):
        ctx.fp8 = checkpoint_without_output_obj.fp8
        ctx.fp8_recipe = FP8GlobalStateManager.get_fp8_recipe() if ctx.fp8 else None
        with torch.no_grad():
            outputs = run_function(*args)
        ctx.save_for_backward(*detach_variable(args))
        checkpoint_without_output_obj.ctx = ctx
        return outputs

    @staticmethod
    def backward(ctx, *args):
        inputs = ctx.inputs
        outputs = ctx.outputs
        torch.autograd.backward(outputs, args)
        ctx.outputs = None
        ctx.inputs = None
        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in inputs)
        return (None, None) + grads


class CheckpointWithoutOutput:
    """Megatron's CheckpointWithoutOutput: run a function keeping only its inputs, release its
    outputs' storage (``discard_output_and_register_recompute``), and rebuild them in place when
    the hook tensor's gradient is computed, with the RNG restored (a recap snapshot) so the
    rebuild is bit-identical; every view of a released output sees the rebuilt data."""

    def __init__(self, fp8: Optional[bool] = False):
        self.fp8 = bool(fp8)
        self.run_function = None
        self.rng = None
        self.ctx = None
        self.outputs = None

    def checkpoint(self, run_function, *args):
        self.run_function = run_function
        if _graph_warmup_or_capture():
            return run_function(*args)
        self.rng = _snapshot_all()
        outputs = CheckpointWithoutOutputFunction.apply(run_function, self, *args)
        self.outputs = outputs
        if isinstance(self.outputs, torch.Tensor):
            self.outputs = (self.outputs,)
        return outputs

    def _recompute(self, _):
        if self.ctx is None or _graph_warmup_or_capture():
            return
        if not torch.cuda.is_available() or not torch.cuda.is_current_stream_capturing():
            if not torch.autograd._is_checkpoint_valid():
                raise RuntimeError("Checkpointing is not compatible with .grad(), "
                                   "please use .backward() if possible")
        with _fork_rng():
            self.rng.restore()
            saved = self.ctx.saved_tensors
            inputs = []
            for t in saved:
                d = t.detach()
                d.requires_grad_(t.requires_grad)
                inputs.append(d)
            with torch.enable_grad():
                if self.fp8:
                    with fp8_autocast(enabled=True, fp8_recipe=self.ctx.fp8_recipe), \
                            activation_recompute_forward(activation_recompute=True,
                                                         recompute_phase=True):
                        outputs = self.run_function(*inputs)
                else:
                    outputs = self.run_function(*inputs)
        self.run_function = None
        self.rng = None
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        for old, new in zip(self.outputs, outputs):
            _refill_storage(old, new)
        self.ctx.outputs = outputs
        self.ctx.inputs = inputs
        self.outputs = None
        self.ctx = None

    def discard_output_and_register_recompute(self, hook_tensor):
        if _graph_warmup_or_capture():
            return
        for output in self.outputs:
            output.untyped_storage().resize_(0)
        if hook_tensor.requires_grad:
            hook_tensor.register_hook(self._recompute)


def _refill_storage(old: torch.Tensor, new: torch.Tensor) -> None:
    """Gives the released output back its storage, holding the rebuilt data: every view of it
    (saved for backward by later ops) sees the data, as with Megatron's share_storage."""
    storage = old.untyped_storage()
    src = new.detach().untyped_storage()
    storage.resize_(src.nbytes())
    storage.copy_(src)


class CheckpointWithoutOutputManager:
    """Regions whose outputs feed one another (one checkpoint's output is the next one's input):
    ``checkpoint`` runs each, ``discard_all_outputs_and_register_recompute(hook_tensor)``
    releases every output and arms one hook that rebuilds them in forward order."""

    def __init__(self, fp8: Optional[bool] = False):
        self.fp8 = fp8
        self.checkpoints: List[CheckpointWithoutOutput] = []

    def checkpoint(self, run_function, *args):
        c = CheckpointWithoutOutput(self.fp8)
        self.checkpoints.append(c)
        return c.checkpoint(run_function, *args)

    def _recompute_all(self, grad):
        for c in self.checkpoints:
            c._recompute(grad)
        self.checkpoints = []

    def discard_all_outputs_and_register_recompute(self, hook_tensor):
        if _graph_warmup_or_capture():
            return
        for c in self.checkpoints:
            for output in c.outputs:
                output.untyped_storage().resize_(0)
        if hook_tensor.requires_grad:
            hook_tensor.register_hook(self._recompute_all)

# ------------------------------------------------------------------ install

# The names megatron.core.tensor_parallel re-exports from its random module.
_REEXPORTED = ["CheckpointWithoutOutput", "checkpoint", "convert_cuda_rng_state",
               "get_cuda_rng_tracker", "get_data_parallel_rng_tracker_name",
               "get_expert_parallel_rng_tracker_name", "is_graph_safe_cuda_rng_tracker",
               "model_parallel_cuda_manual_seed"]
_installed = False


def install() -> None:
    """Makes Megatron-Core use this module: ``megatron.core.tensor_parallel.random`` becomes it
    (imported later, through an import hook, or already, by replacing the module and the names
    other Megatron modules imported from it); without Transformer Engine,
    ``TECudaRNGStatesTracker`` (a MagicMock class in Megatron then) becomes recap's graph-safe
    tracker. Also installs automatic registration (recap.torch.install). Idempotent. (How:
    recap/_megatron_install.py.)"""
    global _installed
    _megatron_install.install(sys.modules[__name__])
    _installed = True


def install_hook() -> None:
    """The part of install() that needs nothing imported: Megatron's module is answered with
    this one whenever it is imported (recap-run's start-up, before Megatron is)."""
    _megatron_install.install_hook(sys.modules[__name__])
