# SPDX-License-Identifier: Apache-2.0
"""recap.megatron's tracker: Megatron's ``CudaRNGStatesTracker`` on recap's C tracker, the way
its named states go into C and back (chosen once per tracker), its fork objects and the
snapshots a checkpoint restores."""
from __future__ import annotations

import abc
import contextlib
import ctypes
import logging
import threading
import weakref
from typing import Any, Dict, List, Optional

import torch

from .. import _abi, _ext, _lib
from .. import torch as rtorch
from .._lib import check, lib
from ._state import _state_value, _value_tensor

_MODEL_PARALLEL_RNG_TRACKER_NAME = _abi.RECAP_RNG_MODEL_PARALLEL
_log = logging.getLogger("megatron.core.tensor_parallel.random")


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
        self._states: Optional[_StatesInC] = None  # chosen with the C tracker (_tracker)
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
            self._states = _states_in_c(self)
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
        mine = [n for n in self._names if n not in self._opaque] if self._handle is not None \
            else []
        if not mine:
            return {n: self._opaque[n] for n in self._names if n in self._opaque}
        got = dict(zip(mine, self._states.get(self, mine)))
        return {n: got[n] if n in got else self._opaque[n] for n in self._names}

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
        if values or self._handle is not None:
            self._tracker()
            self._states.set(self, values)
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

    def _seed_parallel(self, seed: int, ranks: "_abi.ParallelRanks", plan) -> None:
        """model_parallel_cuda_manual_seed in one all-or-nothing C call: reset, seed torch's
        generator, add ``plan``'s (name, seed) states."""
        self.reset()
        self._call("recap_tracker_seed_parallel", self._tracker(), seed, ctypes.byref(ranks))
        self._is_initialized = True
        self._names = [n for n, _ in plan]
        self._seeds = {s for _, s in plan}

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


# ------------------------------------------------------------------ the states' way into C


class _StatesInC(abc.ABC):
    """How a tracker reads (``get``: the states named, in order) and writes (``set``: name ->
    16 bytes, replacing the map) its named states. One is chosen when the C tracker is made
    (_states_in_c); get_states and set_states have one body each over it."""

    @abc.abstractmethod
    def get(self, t: CudaRNGStatesTracker, names: List[str]) -> List[Any]: ...

    @abc.abstractmethod
    def set(self, t: CudaRNGStatesTracker, values: Dict[str, bytes]) -> None: ...


class _WholeMap(_StatesInC):
    """recap._C reads or writes the whole map in one call (recap/csrc/tracker_states.cpp):
    where torch's generator runs its operations in recap._C."""

    def __init__(self, C, graph_safe: bool) -> None:
        self._get = C.get_objects if graph_safe else C.get_values
        self._set = C.set_values

    def get(self, t, names):
        return t._native_result(self._get(t._handle.value, names))

    def set(self, t, values):
        t._native_result(self._set(t._handle.value, list(values.items())))


class _ByName(_StatesInC):
    """librecap's C calls through ctypes, one state at a time: values (uint8[16] tensors)."""

    def get(self, t, names):
        buf = (ctypes.c_uint8 * _abi.RECAP_STATE_BYTES)()
        states = ctypes.c_void_p()
        t._call("recap_tracker_get_states", t._handle, ctypes.byref(states))
        try:
            out = []
            for n in names:
                t._call("recap_states_lookup", states, n.encode(), buf)
                out.append(_value_tensor(bytes(buf)))
            return out
        finally:
            lib().recap_states_free(states)

    def set(self, t, values):
        s = ctypes.c_void_p()
        check(lib().recap_states_create(ctypes.byref(s)), "recap_states_create")
        try:
            for name, b in values.items():
                buf = (ctypes.c_uint8 * _abi.RECAP_STATE_BYTES).from_buffer_copy(b)
                t._call("recap_states_put", s, name.encode(), buf)
            t._call("recap_tracker_set_states", t._handle, s)
        finally:
            lib().recap_states_free(s)


class _ObjectsByName(_ByName):
    """The same for a graph-safe tracker, whose states read as torch state objects."""

    def get(self, t, names):
        obj = ctypes.c_void_p()
        out = []
        for n in names:
            t._call("recap_tracker_state_object", t._handle, n.encode(), ctypes.byref(obj))
            out.append(t._gen.object(obj.value))
        return out


def _states_in_c(t: CudaRNGStatesTracker) -> _StatesInC:
    C = _ext.module()
    if C is not None and hasattr(C, "get_values") and t._gen.fast and _ext.bound("states"):
        return _WholeMap(C, t.use_cudagraphable_rng)
    return _ObjectsByName() if t.use_cudagraphable_rng else _ByName()


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
