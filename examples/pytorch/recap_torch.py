# SPDX-License-Identifier: Apache-2.0
"""recap_torch: a PyTorch plugin over librecap, through ctypes.

What it gives a PyTorch training job (see README.md beside this file):

- ``Runtime``: librecap loaded with ctypes (``RECAP_LIB``, else the loader's search path, else the
  build tree), its status codes turned into ``RecapError``.
- ``Tracker``: a Megatron-style RNG tracker (``recap_tracker_*``) on a CUDA device, graph-safe by
  default; ``seed_parallel`` is ``model_parallel_cuda_manual_seed`` and ``fork`` the tracker's
  fork context (tokens checked by recap).
- ``dropout``: a dropout whose mask comes from the tracker's generator through a Triton kernel that
  implements Philox4x32-10 in recap's layout: element group g (4 elements) uses the words
  curand_init(seed, g, offset) draws, where (seed, offset) come from ``recap_generator_reserve``
  (read from recap's device slot inside a CUDA-graph capture, as ``recap_philox_unpack``).
- ``RecomputeRegion``: Megatron's ``CheckpointWithoutOutput`` on recap's region API: recap drives
  the lifecycle (RNG snapshot, run without recording, stashed inputs, released outputs, trigger,
  rebuild with the RNG restored) and torch's autograd does the work through host operations
  written in Python (storage through ``untyped_storage().resize_``/``set_``, recording through
  grad mode, triggers through tensor hooks, saved inputs through ``ctx.save_for_backward``).
- ``Graph``: ``torch.cuda.CUDAGraph`` plus the capture events recap needs when no hook reports
  them (``recap_capture_prime`` ... ``recap_graph_will_launch``); under ``LD_PRELOAD=librecap-preload.so``
  it makes none of those calls.
"""
import contextlib
import ctypes
import itertools
import os
import sys
import threading

import torch

try:
    import recap  # installed (pip install ./python)
except ImportError:  # the source tree's package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import recap
from recap import RecapError as _PackageError  # noqa: E402

try:
    import triton
    import triton.language as tl
except ImportError:  # the plugin still loads (tracker, regions); dropout needs Triton
    triton = None
    tl = None

__all__ = ["RecapError", "Runtime", "Tracker", "dropout", "TorchHost", "RecomputeRegion", "Graph",
           "philox4x32_10", "reference_keep", "MODEL_PARALLEL", "DATA_PARALLEL", "EXPERT_PARALLEL"]

# ------------------------------------------------------------------------------- C ABI mirror

# What the recap package already declares (checked against recap.h by its tests) is taken from
# it; the region declarations below are this example's.
from recap import _abi  # noqa: E402

RECAP_OK = _abi.RECAP_OK
RECAP_ERR_STATE = _abi.RECAP_ERR_STATE
RECAP_DEVICE_HOST = _abi.RECAP_DEVICE_HOST
RECAP_TRACKER_GRAPH_SAFE = _abi.RECAP_TRACKER_GRAPH_SAFE
RECAP_REGION_RETAIN_INPUTS = 1
RECAP_TYPE_VOID, RECAP_TYPE_UINT64, RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT = 0, 4, 8, 9
RECAP_PASS_FIRST, RECAP_PASS_RECOMPUTE = 0, 1
RECAP_REGION_STATES = ("NEW", "RECORDED", "RELEASED", "REBUILT", "DONE")
HOOKS_NAMES = {_abi.RECAP_HOOKS_NONE: "none", _abi.RECAP_HOOKS_PRELOAD: "preload",
               _abi.RECAP_HOOKS_CUPTI: "cupti", _abi.RECAP_HOOKS_INJECTION: "injection"}

DEFAULT = _abi.RECAP_RNG_DEFAULT
MODEL_PARALLEL = _abi.RECAP_RNG_MODEL_PARALLEL
EXPERT_PARALLEL = _abi.RECAP_RNG_EXPERT_PARALLEL
DATA_PARALLEL = _abi.RECAP_RNG_DATA_PARALLEL

c_status = _abi.c_status
vp = _abi.vp


class PhiloxArgs(_abi.PhiloxArgs):
    """recap_philox_args_t (include/recap/philox.h)."""

    def copy(self):
        c = PhiloxArgs()
        ctypes.pointer(c)[0] = self
        return c

    def __repr__(self):
        if self.captured:
            return (f"PhiloxArgs(captured, seed_ptr=0x{self.seed_ptr or 0:x}, "
                    f"offset_ptr=0x{self.offset_ptr or 0:x}, intragraph={self.offset_intragraph})")
        return f"PhiloxArgs(seed={self.seed}, offset={self.offset})"


TrackerParams = _abi.TrackerParams


class ParallelRanks(_abi.ParallelRanks):
    """recap_parallel_ranks_t, given as (rank, size) pairs."""

    def __init__(self, tp=(0, 1), ep=(0, 1), etp=(0, 1), gtp_remat=(0, 1), egtp_remat=(0, 1)):
        super().__init__(tp[0], tp[1], ep[0], ep[1], etp[0], etp[1], gtp_remat[0], gtp_remat[1],
                         egtp_remat[0], egtp_remat[1])


class CaptureStats(_abi.CaptureStats):
    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_}


class Value(ctypes.Union):
    """recap_value_t."""
    _fields_ = [("i32", ctypes.c_int32), ("i64", ctypes.c_int64), ("u32", ctypes.c_uint32),
                ("u64", ctypes.c_uint64), ("f32", ctypes.c_float), ("f64", ctypes.c_double),
                ("ptr", vp), ("buf", vp)]


# Engine operations (recap_engine_ops_t), in the struct's order.
TRIGGER_FN = ctypes.CFUNCTYPE(c_status, vp)
_OPS = [
    ("buffer_arg", ctypes.CFUNCTYPE(c_status, vp, vp, ctypes.POINTER(vp))),
    ("needs_grad", ctypes.CFUNCTYPE(ctypes.c_int, vp, vp)),
    ("alloc_like", ctypes.CFUNCTYPE(c_status, vp, vp, ctypes.POINTER(vp))),
    ("free_buffer", ctypes.CFUNCTYPE(c_status, vp, vp)),
    ("free_storage", ctypes.CFUNCTYPE(c_status, vp, vp)),
    ("share_storage", ctypes.CFUNCTYPE(c_status, vp, vp, vp)),
    ("same_storage", ctypes.CFUNCTYPE(ctypes.c_int, vp, vp, vp)),
    ("set_recording", ctypes.CFUNCTYPE(c_status, vp, ctypes.c_int, ctypes.POINTER(ctypes.c_int))),
    ("add_trigger", ctypes.CFUNCTYPE(c_status, vp, vp, vp, vp, ctypes.POINTER(vp))),
    ("remove_trigger", ctypes.CFUNCTYPE(c_status, vp, vp)),
    ("save", ctypes.CFUNCTYPE(c_status, vp, vp, ctypes.POINTER(vp))),
    ("load", ctypes.CFUNCTYPE(c_status, vp, vp, ctypes.POINTER(vp))),
    ("drop", ctypes.CFUNCTYPE(c_status, vp, vp)),
    ("context_enter", ctypes.CFUNCTYPE(c_status, vp, ctypes.c_int, ctypes.POINTER(vp))),
    ("context_exit", ctypes.CFUNCTYPE(c_status, vp, vp)),
    ("distribute", ctypes.CFUNCTYPE(c_status, vp, vp, ctypes.POINTER(vp))),
    ("all_gather", ctypes.CFUNCTYPE(c_status, vp, vp, ctypes.POINTER(vp))),
]
_OP_TYPES = dict(_OPS)


class HostOps(ctypes.Structure):
    _fields_ = _OPS


class RegionParams(ctypes.Structure):
    _fields_ = [("ops", ctypes.POINTER(HostOps)), ("host", vp), ("tracker", vp),
                ("manager", vp), ("flags", ctypes.c_uint32)]


_PROTOS = {
    # name: (argtypes, restype); restype None means recap_status_t
    "recap_abi_version": ([], ctypes.c_int),
    "recap_version_string": ([], ctypes.c_char_p),
    "recap_strerror": ([c_status], ctypes.c_char_p),
    "recap_last_error": ([], ctypes.c_char_p),
    "recap_device_count": ([ctypes.POINTER(ctypes.c_int)], None),
    "recap_generator_reserve": ([vp, vp, ctypes.c_uint64, ctypes.POINTER(PhiloxArgs)], None),
    "recap_generator_seed": ([vp, ctypes.POINTER(ctypes.c_uint64)], None),
    "recap_generator_offset": ([vp, ctypes.POINTER(ctypes.c_uint64)], None),
    "recap_tracker_create": ([ctypes.POINTER(TrackerParams), ctypes.POINTER(vp)], None),
    "recap_tracker_destroy": ([vp], None),
    "recap_tracker_seed_parallel": ([vp, ctypes.c_int64, ctypes.POINTER(ParallelRanks)], None),
    "recap_tracker_add": ([vp, ctypes.c_char_p, ctypes.c_uint64], None),
    "recap_tracker_fork": ([vp, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)], None),
    "recap_tracker_unfork": ([vp, ctypes.c_uint64], None),
    "recap_tracker_generator": ([vp, ctypes.POINTER(vp)], None),
    "recap_tracker_current_name": ([vp, ctypes.POINTER(ctypes.c_char_p)], None),
    "recap_tracker_get_states": ([vp, ctypes.POINTER(vp)], None),
    "recap_states_free": ([vp], None),
    "recap_states_lookup": ([vp, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint8)], None),
    "recap_snapshot_create": ([ctypes.POINTER(vp)], None),
    "recap_snapshot_destroy": ([vp], None),
    "recap_snapshot_take": ([vp, vp], None),
    "recap_snapshot_restore": ([vp, vp], None),
    "recap_capture_prime": ([vp], None),
    "recap_capture_will_end": ([vp], None),
    "recap_capture_ended": ([vp, vp], None),
    "recap_graph_instantiated": ([vp, vp], None),
    "recap_graph_destroyed": ([vp], None),
    "recap_graph_exec_destroyed": ([vp], None),
    "recap_graph_will_launch": ([vp, vp], None),
    "recap_graph_launch_failed": ([vp], None),
    "recap_capture_needs_registration": ([ctypes.POINTER(ctypes.c_int)], None),
    "recap_capture_stats": ([ctypes.POINTER(CaptureStats)], None),
    "recap_hooks_active": ([ctypes.POINTER(ctypes.c_int)], None),
    "recap_signature_create": ([ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_size_t,
                                ctypes.POINTER(vp)], None),
    "recap_signature_destroy": ([vp], None),
    "recap_region_create": ([ctypes.POINTER(RegionParams), ctypes.POINTER(vp)], None),
    "recap_region_destroy": ([vp], None),
    "recap_region_record": ([vp, vp, vp, ctypes.POINTER(Value), ctypes.c_size_t], None),
    "recap_region_release": ([vp, vp], None),
    "recap_region_rebuild": ([vp], None),
    "recap_region_finish": ([vp], None),
    "recap_region_state": ([vp, ctypes.POINTER(ctypes.c_int)], None),
    "recap_region_is_plain": ([vp, ctypes.POINTER(ctypes.c_int)], None),
    "recap_is_checkpointing": ([ctypes.POINTER(ctypes.c_int)], None),
}


# The package's error class, so one except clause catches what the plugin and the package raise.
RecapError = _PackageError


class Runtime:
    """librecap, loaded once per process (``Runtime.get()``)."""
    _instance = None

    def __init__(self, path=None):
        # The package's lookup: the preloaded copy first (a second copy would not see what the
        # hooks report), then RECAP_LIB, the wheel's copy, the build tree, the loader's path.
        self.path = path or recap.library_path()
        self.lib = ctypes.CDLL(self.path)
        for name, (argtypes, restype) in _PROTOS.items():
            f = getattr(self.lib, name)
            f.argtypes = argtypes
            f.restype = c_status if restype is None else restype
        self._needs = None

    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def call(self, name, *args, what=None):
        st = getattr(self.lib, name)(*args)
        if st != RECAP_OK:
            raise RecapError(st, f"{self.lib.recap_strerror(st).decode()}: "
                                 f"{self.lib.recap_last_error().decode()}", what or name)
        return st

    @property
    def version(self):
        abi = self.lib.recap_abi_version()
        return f"{self.lib.recap_version_string().decode()} (ABI {abi >> 16}.{abi & 0xffff})"

    def hooks(self):
        """The interception front end reporting this process's captures ("none": explicit)."""
        h = ctypes.c_int()
        self.call("recap_hooks_active", ctypes.byref(h))
        return HOOKS_NAMES.get(h.value, str(h.value))

    def needs_registration(self):
        """1 when no hook reports captures (this plugin then reports them itself), 0 when
        recap's hooks do (LD_PRELOAD=librecap-preload.so). Needs a GPU; outside any capture; cached."""
        if self._needs is None:
            v = ctypes.c_int()
            self.call("recap_capture_needs_registration", ctypes.byref(v))
            self._needs = v.value
        return self._needs

    def capture_stats(self):
        s = CaptureStats()
        self.call("recap_capture_stats", ctypes.byref(s))
        return s.as_dict()


# ------------------------------------------------------------------------------- tracker, dropout

# recap's own tracker and dropout kernels (Triton, CuPy) live in the recap package now
# (python/recap/_dropout.py, reached as recap.torch.*); this example re-exports them.
from recap import _dropout as _rd  # noqa: E402
from recap._dropout import (_CUDA_SRC, _cuda_options, curand_words, dropout,  # noqa: E402,F401
                            dropout_threshold, include_dir, kernel_backend, launch_dropout,
                            philox4x32_10, reference_keep)

Tracker = _rd.RecapTracker

# ------------------------------------------------------------------------------- regions

class TorchHost:
    """recap's host operations implemented with torch: buffers are tensors, named by small
    integer handles; recording is grad mode; triggers are tensor hooks; saved inputs go through
    ctx.save_for_backward of the region's autograd node (so saved-tensor hooks see them)."""

    def __init__(self, runtime=None):
        self.rt = runtime or Runtime.get()
        self.bufs = {}          # handle -> tensor (None: an output not produced yet)
        self.released = {}      # handle -> storage bytes freed by free_storage
        self.cookies = {}       # saved cookie -> (region, index)
        self.hooks = {}         # trigger handle -> RemovableHandle
        self.regions = {}       # region id -> RecomputeRegion (for the trampoline)
        self.pending = []       # exceptions raised inside callbacks, re-raised by the caller
        self.passes = []        # recompute-context stack
        self.stats = {"first": 0, "recompute": 0, "triggers": 0, "released_bytes": 0}
        self._ids = itertools.count(1)
        self._recording = None  # the region whose record is running (for save)
        self._keep = []         # ctypes callbacks must outlive the table
        ops = HostOps()
        for name, fn in (("needs_grad", self._needs_grad), ("alloc_like", self._alloc_like),
                         ("free_buffer", self._free_buffer), ("free_storage", self._free_storage),
                         ("share_storage", self._share_storage),
                         ("same_storage", self._same_storage),
                         ("set_recording", self._set_recording),
                         ("add_trigger", self._add_trigger),
                         ("remove_trigger", self._remove_trigger), ("save", self._save),
                         ("load", self._load), ("drop", self._drop),
                         ("context_enter", self._context_enter),
                         ("context_exit", self._context_exit)):
            cb = _OP_TYPES[name](self._guard(fn, name))
            self._keep.append(cb)
            setattr(ops, name, cb)
        self.ops = ops
        self._sigs = {}
        self._tramps = {}

    # --- plumbing
    def _guard(self, fn, name):
        def wrapped(*a):
            try:
                r = fn(*a)
                return RECAP_OK if r is None else r
            except BaseException as e:  # never let an exception unwind through C
                self.pending.append((name, e))
                return RECAP_ERR_STATE
        return wrapped

    def raise_pending(self, cause=None):
        if self.pending:
            name, e = self.pending[0]
            self.pending.clear()
            raise RuntimeError(f"recap engine operation {name} failed: {e!r}") from e
        if cause is not None:
            raise cause

    def call(self, name, *args):
        try:
            self.rt.call(name, *args)
        except RecapError as e:
            self.raise_pending(e)
        self.raise_pending()

    def new_handle(self, t):
        h = next(self._ids)
        self.bufs[h] = t
        return h

    def forget(self, h):
        self.bufs.pop(h, None)
        self.released.pop(h, None)

    # --- the operations
    def _needs_grad(self, host, buf):
        t = self.bufs[buf]
        return 1 if t is not None and t.requires_grad else 0

    def _alloc_like(self, host, like, buf_p):
        t = self.bufs[like]
        with torch.no_grad():
            if like in self.released:
                # A released output: grow its own storage back and hand recap a second tensor
                # over it; the recompute writes there, so views of the output and the
                # references autograd saved see the data without a storage copy.
                st = t.untyped_storage()
                st.resize_(self.released.pop(like))
                fresh = t.new_empty(0).set_(st, t.storage_offset(), t.size(), t.stride())
            else:
                fresh = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        buf_p[0] = self.new_handle(fresh)

    def _free_buffer(self, host, buf):
        self.forget(buf)

    def _free_storage(self, host, buf):
        t = self.bufs[buf]
        st = t.untyped_storage()
        self.released[buf] = st.nbytes()
        self.stats["released_bytes"] += st.nbytes()
        st.resize_(0)

    def _share_storage(self, host, dst, src):
        d, s = self.bufs[dst], self.bufs[src]
        if self._same(d, s):
            return  # alloc_like already gave the recompute the output's own storage
        with torch.no_grad():
            st = d.untyped_storage()
            st.resize_(s.untyped_storage().nbytes())
            st.copy_(s.untyped_storage())
        self.released.pop(dst, None)

    @staticmethod
    def _same(a, b):
        sa, sb = a.untyped_storage(), b.untyped_storage()
        if sa.data_ptr() and sb.data_ptr():
            return sa.data_ptr() == sb.data_ptr()
        return sa._cdata == sb._cdata

    def _same_storage(self, host, a, b):
        ta, tb = self.bufs.get(a), self.bufs.get(b)
        return 1 if ta is not None and tb is not None and self._same(ta, tb) else 0

    def _set_recording(self, host, enable, prev_p):
        prev_p[0] = 1 if torch.is_grad_enabled() else 0
        torch.set_grad_enabled(bool(enable))

    def _add_trigger(self, host, buf, fn, arg, handle_p):
        trig = TRIGGER_FN(fn)

        def hook(grad):
            self.stats["triggers"] += 1
            _check_capture_thread()
            st = trig(arg)
            if st != RECAP_OK:
                self.raise_pending(RecapError(st, "{}: {}".format(
                    self.rt.lib.recap_strerror(st).decode(),
                    self.rt.lib.recap_last_error().decode()), "recompute trigger"))
            self.raise_pending()
            return None

        h = next(self._ids)
        self.hooks[h] = self.bufs[buf].register_hook(hook)
        handle_p[0] = h

    def _remove_trigger(self, host, handle):
        rh = self.hooks.pop(handle, None)
        if rh is not None:
            rh.remove()

    def _save(self, host, buf, saved_p):
        region = self._recording
        t = self.bufs[buf]
        d = t.detach()
        d.requires_grad_(t.requires_grad)
        region._to_save.append(d)
        cookie = next(self._ids)
        self.cookies[cookie] = (region, len(region._to_save) - 1)
        saved_p[0] = cookie

    def _load(self, host, saved, buf_p):
        region, i = self.cookies[saved]
        t = region._saved()[i]
        region._loaded[i] = t
        buf_p[0] = self.new_handle(t)
        region._handles.append(buf_p[0])

    def _drop(self, host, saved):
        self.cookies.pop(saved, None)

    def _context_enter(self, host, pass_, ctx_p):
        self.passes.append(pass_)
        self.stats["first" if pass_ == RECAP_PASS_FIRST else "recompute"] += 1
        ctx_p[0] = len(self.passes)

    def _context_exit(self, host, ctx):
        self.passes.pop()

    def current_pass(self):
        """RECAP_PASS_FIRST / RECAP_PASS_RECOMPUTE inside a region's function, else None."""
        return self.passes[-1] if self.passes else None

    # --- recorded calls: one trampoline and one signature per (inputs, outputs) count
    def _trampoline(self, nin, nout):
        key = (nin, nout)
        if key not in self._tramps:
            ftype = ctypes.CFUNCTYPE(None, ctypes.c_uint64, *([vp] * (nin + nout)))

            def tramp(rid, *handles):
                try:
                    self.regions[rid]._run(handles[:nin], handles[nin:])
                except BaseException as e:
                    self.pending.append(("region function", e))

            cb = ftype(tramp)
            types = (ctypes.c_int * (1 + nin + nout))(
                RECAP_TYPE_UINT64, *([RECAP_TYPE_BUFFER] * nin),
                *([RECAP_TYPE_BUFFER_OUT] * nout))
            sig = vp()
            self.rt.call("recap_signature_create", RECAP_TYPE_VOID, types, 1 + nin + nout,
                         ctypes.byref(sig))
            self._tramps[key] = (cb, sig.value)
        return self._tramps[key]


class _RegionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, region, *inputs):
        outs = region._record(inputs)
        ctx.save_for_backward(*region._to_save)
        region._ctx = ctx
        ctx.region = region
        return outs if len(outs) > 1 else outs[0]

    @staticmethod
    def backward(ctx, *grads):
        region = ctx.region
        try:
            grads_in = region._backward(grads)
        finally:
            region.close()
        return (None,) + tuple(grads_in)


_capture_threads = set()


def _check_capture_thread():
    """recap binds a capture to the thread that began it: a recompute inside a capture must run
    on that thread (Graph.capture turns autograd's device threads off for that reason)."""
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing() and \
            threading.get_ident() not in _capture_threads:
        raise RuntimeError("recompute inside a CUDA-graph capture on a thread that did not begin "
                           "the capture: recap's snapshots would not be capture-relative; run "
                           "backward under torch.autograd.set_multithreading_enabled(False)")


class RecomputeRegion:
    """Megatron's CheckpointWithoutOutput on recap's region API.

        region = RecomputeRegion(host, tracker)
        h = region.checkpoint(fn, x)          # fn runs without autograd; x is kept
        y = next_layer(h)
        region.discard_output_and_register_recompute(y)   # h's storage is freed
        ... y's gradient arrives -> recap rebuilds h (RNG restored) before next_layer's backward
    """

    def __init__(self, host, tracker, retain_inputs=False):
        self.host, self.tracker = host, tracker
        self.rid = next(host._ids)
        params = RegionParams(ctypes.pointer(host.ops), None, tracker.handle if tracker else None,
                              None, RECAP_REGION_RETAIN_INPUTS if retain_inputs else 0)
        h = vp()
        host.call("recap_region_create", ctypes.byref(params), ctypes.byref(h))
        self.handle = h.value
        host.regions[self.rid] = self
        self._handles, self._to_save, self._loaded = [], [], {}
        self._ctx = None
        self._rebuilt = {}
        self.fn = None

    # --- the Megatron-shaped front
    def checkpoint(self, fn, *inputs):
        self.fn = fn
        out = _RegionFunction.apply(self, *inputs)
        if self.is_plain():
            self.close()
        return out

    def discard_output_and_register_recompute(self, hook_tensor):
        self.release(hook_tensor)

    # --- recap calls
    def state(self):
        s = ctypes.c_int()
        self.host.call("recap_region_state", self.handle, ctypes.byref(s))
        return RECAP_REGION_STATES[s.value]

    def is_plain(self):
        p = ctypes.c_int()
        self.host.call("recap_region_is_plain", self.handle, ctypes.byref(p))
        return bool(p.value)

    def release(self, trigger=None):
        if self.handle is None:
            return  # a plain region (no input needed a gradient) was closed after its run
        th = None
        if trigger is not None:
            th = self.host.new_handle(trigger)
            self._handles.append(th)
        self.host.call("recap_region_release", self.handle, th)

    def rebuild(self):
        self.host.call("recap_region_rebuild", self.handle)

    def close(self):
        if self.handle:
            self.host.call("recap_region_destroy", self.handle)
            self.handle = None
        for h in self._handles:
            self.host.forget(h)
        self._handles = []
        self.host.regions.pop(self.rid, None)
        self._ctx = None
        self._rebuilt = {}
        self._loaded = {}
        self._to_save = []

    # --- internals
    def _saved(self):
        return self._ctx.saved_tensors

    def _record(self, inputs):
        h = self.host
        in_h = [h.new_handle(t) for t in inputs]
        self._out_h = [h.new_handle(None)]  # one output: fn returns one tensor
        self._handles += in_h + self._out_h
        cb, sig = h._trampoline(len(in_h), len(self._out_h))
        vals = (Value * (1 + len(in_h) + len(self._out_h)))()
        vals[0].u64 = self.rid
        for i, x in enumerate(in_h + self._out_h):
            vals[1 + i].buf = x
        h._recording = self
        try:
            h.call("recap_region_record", self.handle, sig, ctypes.cast(cb, vp), vals, len(vals))
        finally:
            h._recording = None
        return tuple(h.bufs[x] for x in self._out_h)

    def _run(self, in_h, out_h):
        """The recorded function: fn on the inputs, written to the outputs."""
        ins = [self.host.bufs[x] for x in in_h]
        res = self.fn(*ins)
        res = res if isinstance(res, tuple) else (res,)
        for x, r in zip(out_h, res):
            t = self.host.bufs[x]
            if t is None:          # the first run: the result is the output
                self.host.bufs[x] = r
            else:                  # the recompute: into the buffer recap allocated
                t.copy_(r)
                self._rebuilt[x] = t

    def _backward(self, grads):
        st = self.state()
        if st == "RECORDED":       # never released: release now, the rebuild needs it
            self.release(None)
            st = "RELEASED"
        if st == "RELEASED":       # the trigger did not fire (no trigger tensor)
            _check_capture_thread()
            self.rebuild()
        outs = list(self._rebuilt.values())
        if len(outs) != len(grads):
            raise RuntimeError(f"region rebuilt {len(outs)} outputs for {len(grads)} gradients")
        torch.autograd.backward(outs, grads)
        self.host.call("recap_region_finish", self.handle)
        n = len(self._to_save)
        return [self._loaded[i].grad if i in self._loaded else None for i in range(n)]


# ------------------------------------------------------------------------------- graphs

class Graph:
    """torch.cuda.CUDAGraph with recap told of its capture, instantiation and launches.

    explicit=None asks recap (recap_capture_needs_registration): with LD_PRELOAD=librecap-preload.so the
    hooks see torch's cudaStreamBeginCapture/EndCapture/GraphInstantiate/GraphLaunch and this
    class makes no recap call; without them it reports the events itself."""

    def __init__(self, runtime=None, explicit=None):
        self.rt = runtime or Runtime.get()
        self.explicit = bool(self.rt.needs_registration()) if explicit is None else explicit
        self.g = torch.cuda.CUDAGraph(keep_graph=True)
        self.graph = self.exec = None
        self.calls = []  # the recap calls made (explicit mode), for the summary

    def _rc(self, name, *args):
        self.calls.append(name)
        self.rt.call(name, *args)

    @contextlib.contextmanager
    def capture(self, pool=None, stream=None):
        tid = threading.get_ident()
        cap_stream = None
        try:
            with torch.cuda.graph(self.g, pool=pool, stream=stream):
                cap_stream = torch.cuda.current_stream().cuda_stream
                _capture_threads.add(tid)
                if self.explicit:
                    # First recap thing inside the capture: prime the generator states (device
                    # slots, allocated under the relaxed capture mode) and bind the capture.
                    self._rc("recap_capture_prime", cap_stream)
                # Backward on this thread: a recompute inside the capture restores
                # capture-relative RNG snapshots, which recap keeps per capturing thread.
                with torch.autograd.set_multithreading_enabled(False):
                    yield self
                if self.explicit:
                    self._rc("recap_capture_will_end", cap_stream)  # the advance node
        except BaseException:
            if self.explicit and cap_stream is not None:
                self.rt.lib.recap_capture_ended(cap_stream, None)  # forget the failed capture
            raise
        finally:
            _capture_threads.discard(tid)
        self.graph = self.g.raw_cuda_graph()
        if self.explicit:
            self._rc("recap_capture_ended", cap_stream, self.graph)
        self.g.instantiate()
        self.exec = self.g.raw_cuda_graph_exec()
        if self.explicit:
            self._rc("recap_graph_instantiated", self.graph, self.exec)

    def replay(self):
        if self.explicit:
            self._rc("recap_graph_will_launch", self.exec, torch.cuda.current_stream().cuda_stream)
        try:
            self.g.replay()
        except BaseException:
            if self.explicit:
                self.rt.lib.recap_graph_launch_failed(self.exec)
            raise

    def reset(self):
        if self.explicit and self.exec:
            self._rc("recap_graph_exec_destroyed", self.exec)
            self._rc("recap_graph_destroyed", self.graph)
        self.graph = self.exec = None
        self.g.reset()
