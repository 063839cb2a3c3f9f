# SPDX-License-Identifier: Apache-2.0
"""Megatron-Core's ``tensor_parallel.random`` (0.19) running on recap.

Every public name of Megatron's module, with its signature and semantics, on recap's C tracker
(named states, forks, per-rank seeding, snapshots) driving torch's own CUDA generator through
``recap.torch``: inside ``fork()`` torch's dropout, randn and fused kernels draw from the named
state, exactly as with Megatron's module (bit for bit: python/tests/gpu/megatron_gpu.py identity).

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

The package: Megatron's public names and the process's tracker here; the tracker class and its
states' way into C in ``_tracker``, the checkpoints in ``_checkpoint``, torch state helpers in
``_state``, the parallel layout in ``_parallel``, and how ``install()`` works in ``_install``.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import sys
from typing import Any, Dict, Optional

from .. import torch as rtorch  # first: without torch, its one clear ImportError
from .. import _abi
import torch
from .._lib import check, lib
from . import _install

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


# Megatron's names for the torch state helpers (_state.py), the tracker (_tracker.py) and the
# checkpoints (_checkpoint.py), imported here so that this module has every name Megatron's has.
from ._state import (_device_index, _get_cuda_rng_state, _set_cuda_rng_state,  # noqa: E402,F401
                     _state_value, _value_tensor, convert_cuda_rng_state)
from ._parallel import _gather_1d, _rank, _split_1d, _world  # noqa: E402,F401
from ._tracker import CudaRNGStatesTracker, _Snapshot  # noqa: E402,F401
from ._tracker import _NativeFork, _TrackerOwner  # noqa: E402,F401  (recap's tests use them)
from . import _checkpoint  # noqa: E402
from ._checkpoint import (HAVE_TE, CheckpointFunction, CheckpointWithoutOutput,  # noqa: E402,F401
                          CheckpointWithoutOutputFunction, CheckpointWithoutOutputManager,
                          _graph_warmup_or_capture, _refill_storage, checkpoint)

_checkpoint._m = sys.modules[__name__]


def get_expert_parallel_rng_tracker_name() -> str:
    return _EXPERT_PARALLEL_RNG_TRACKER_NAME


def get_data_parallel_rng_tracker_name() -> str:
    return _DATA_PARALLEL_RNG_TRACKER_NAME


def get_gtp_remat_rng_tracker_name(is_expert: bool = False) -> str:
    return _EXPERT_GTP_REMAT_RNG_TRACKER_NAME if is_expert else _GTP_REMAT_RNG_TRACKER_NAME


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
        t._seed_parallel(seed, _abi.ParallelRanks(tp, tp + 1, ep, ep + 1, etp, etp + 1, gtp,
                                                  max(gtp_size, 1), egtp, max(egtp_size, 1)),
                         plan)
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
    recap/_install.py.)"""
    global _installed
    _install.install(sys.modules[__name__])
    _installed = True


def install_hook() -> None:
    """The part of install() that needs nothing imported: Megatron's module is answered with
    this one whenever it is imported (recap-run's start-up, before Megatron is)."""
    _install.install_hook(sys.modules[__name__])
