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
  them (``recap_capture_prime`` ... ``recap_graph_will_launch``); under ``LD_PRELOAD=librecap.so``
  it makes none of those calls.
"""
import contextlib
import ctypes
import ctypes.util
import itertools
import os
import sys
import tempfile
import threading

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the plugin still loads (tracker, regions); dropout needs Triton
    triton = None
    tl = None

__all__ = ["RecapError", "Runtime", "Tracker", "dropout", "TorchHost", "RecomputeRegion", "Graph",
           "philox4x32_10", "reference_keep", "MODEL_PARALLEL", "DATA_PARALLEL", "EXPERT_PARALLEL"]

# ------------------------------------------------------------------------------- C ABI mirror

RECAP_OK = 0
RECAP_ERR_STATE = -11
RECAP_DEVICE_HOST = -1
RECAP_TRACKER_GRAPH_SAFE = 1
RECAP_REGION_RETAIN_INPUTS = 1
RECAP_TYPE_VOID, RECAP_TYPE_UINT64, RECAP_TYPE_BUFFER, RECAP_TYPE_BUFFER_OUT = 0, 4, 8, 9
RECAP_PASS_FIRST, RECAP_PASS_RECOMPUTE = 0, 1
RECAP_REGION_STATES = ("NEW", "RECORDED", "RELEASED", "REBUILT", "DONE")
HOOKS_NAMES = {0: "none", 1: "preload", 2: "cupti", 3: "injection"}

DEFAULT = "default-rng"
MODEL_PARALLEL = "model-parallel-rng"
EXPERT_PARALLEL = "expert-parallel-rng"
DATA_PARALLEL = "data-parallel-rng"

c_status = ctypes.c_int
vp = ctypes.c_void_p


class PhiloxArgs(ctypes.Structure):
    """recap_philox_args_t (include/recap/philox.h)."""
    _fields_ = [("seed", ctypes.c_uint64), ("offset", ctypes.c_uint64),
                ("seed_ptr", vp), ("offset_ptr", vp),
                ("offset_intragraph", ctypes.c_uint64),
                ("captured", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]

    def copy(self):
        c = PhiloxArgs()
        ctypes.pointer(c)[0] = self
        return c

    def __repr__(self):
        if self.captured:
            return (f"PhiloxArgs(captured, seed_ptr=0x{self.seed_ptr or 0:x}, "
                    f"offset_ptr=0x{self.offset_ptr or 0:x}, intragraph={self.offset_intragraph})")
        return f"PhiloxArgs(seed={self.seed}, offset={self.offset})"


class TrackerParams(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint32), ("generator", vp), ("device", ctypes.c_int),
                ("host_generator", vp)]


class ParallelRanks(ctypes.Structure):
    """recap_parallel_ranks_t."""
    _fields_ = [(n, ctypes.c_int) for n in (
        "tp_rank", "tp_size", "ep_rank", "ep_size", "etp_rank", "etp_size",
        "gtp_remat_rank", "gtp_remat_size", "egtp_remat_rank", "egtp_remat_size")]

    def __init__(self, tp=(0, 1), ep=(0, 1), etp=(0, 1), gtp_remat=(0, 1), egtp_remat=(0, 1)):
        super().__init__(tp[0], tp[1], ep[0], ep[1], etp[0], etp[1], gtp_remat[0], gtp_remat[1],
                         egtp_remat[0], egtp_remat[1])


class CaptureStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "captures", "graphs_with_rng", "launches", "slot_writes", "states_primed",
        "live_records")]

    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_}


class Value(ctypes.Union):
    """recap_value_t."""
    _fields_ = [("i32", ctypes.c_int32), ("i64", ctypes.c_int64), ("u32", ctypes.c_uint32),
                ("u64", ctypes.c_uint64), ("f32", ctypes.c_float), ("f64", ctypes.c_double),
                ("ptr", vp), ("buf", vp)]


# Host operations (recap_host_ops_t), in the struct's order.
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


class RecapError(RuntimeError):
    def __init__(self, what, status, message):
        super().__init__(f"{what}: {message}")
        self.status = status


def _preloaded():
    """The librecap named in LD_PRELOAD, if any: the plugin must use that very instance (a
    second copy would not see what the hooks report)."""
    for tok in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        if os.path.basename(tok).startswith("librecap.so"):
            return tok
    return None


def _find_library():
    """The preloaded librecap, else RECAP_LIB (a file or a folder), else the loader's search
    (LD_LIBRARY_PATH, ldconfig), else the build tree this file sits in."""
    pre = _preloaded()
    if pre:
        return pre
    env = os.environ.get("RECAP_LIB")
    if env:
        return os.path.join(env, "librecap.so") if os.path.isdir(env) else env
    for name in ("librecap.so.1", "librecap.so"):
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            pass
    found = ctypes.util.find_library("recap")
    if found:
        return found
    tree = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", ".libs",
                        "librecap.so")
    if os.path.exists(tree):
        return os.path.normpath(tree)
    raise OSError("librecap not found: set RECAP_LIB to librecap.so (or its folder)")


class Runtime:
    """librecap, loaded once per process (``Runtime.get()``)."""
    _instance = None

    def __init__(self, path=None):
        self.path = path or _find_library()
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
            raise RecapError(what or name, st, f"{self.lib.recap_strerror(st).decode()}: "
                                               f"{self.lib.recap_last_error().decode()}")
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
        recap's hooks do (LD_PRELOAD=librecap.so). Needs a GPU; outside any capture; cached."""
        if self._needs is None:
            v = ctypes.c_int()
            self.call("recap_capture_needs_registration", ctypes.byref(v))
            self._needs = v.value
        return self._needs

    def capture_stats(self):
        s = CaptureStats()
        self.call("recap_capture_stats", ctypes.byref(s))
        return s.as_dict()


# ------------------------------------------------------------------------------- tracker


def _stream_handle(device):
    """The recap_stream_t for work on `device` now: torch's current stream (a host tracker
    takes none)."""
    if device == RECAP_DEVICE_HOST:
        return None
    return torch.cuda.current_stream(device).cuda_stream


class Tracker:
    """recap's RNG tracker (Megatron's CudaRNGStatesTracker) driving its own generator."""

    def __init__(self, device=None, graph_safe=True, runtime=None):
        self.rt = runtime or Runtime.get()
        if device is None:
            device = torch.cuda.current_device()
        self.device = device
        p = TrackerParams(RECAP_TRACKER_GRAPH_SAFE if graph_safe else 0, None, device, None)
        h = vp()
        self.rt.call("recap_tracker_create", ctypes.byref(p), ctypes.byref(h))
        self.handle = h.value
        g = vp()
        self.rt.call("recap_tracker_generator", self.handle, ctypes.byref(g))
        self.generator = g.value

    def close(self):
        if self.handle:
            self.rt.call("recap_tracker_destroy", self.handle)
            self.handle = None

    def seed_parallel(self, seed, ranks=None):
        """model_parallel_cuda_manual_seed(seed, ranks): resets the tracker, seeds its generator
        (data parallel) and adds the model-, expert- (and remat) parallel states per rank."""
        ranks = ranks if ranks is not None else ParallelRanks()
        self.rt.call("recap_tracker_seed_parallel", self.handle, int(seed), ctypes.byref(ranks))

    def add(self, name, seed):
        self.rt.call("recap_tracker_add", self.handle, name.encode(), int(seed))

    def fork_begin(self, name=MODEL_PARALLEL):
        """Installs the named state in the tracker's generator; returns the fork's token."""
        tok = ctypes.c_uint64()
        self.rt.call("recap_tracker_fork", self.handle, name.encode(), ctypes.byref(tok),
                     what=f"fork({name})")
        return tok.value

    def fork_end(self, token):
        """Ends the fork `token` names; recap refuses (RECAP_ERR_STATE, nothing changed) unless
        it is the innermost open fork."""
        self.rt.call("recap_tracker_unfork", self.handle, token, what="unfork")

    @contextlib.contextmanager
    def fork(self, name=MODEL_PARALLEL):
        """Runs the body with the named state installed in the tracker's generator (Megatron's
        get_cuda_rng_tracker().fork(name))."""
        tok = self.fork_begin(name)
        try:
            yield
        finally:
            self.fork_end(tok)

    def current_name(self):
        s = ctypes.c_char_p()
        self.rt.call("recap_tracker_current_name", self.handle, ctypes.byref(s))
        return s.value.decode()

    def states(self):
        """{name: (seed, offset)} of the named states, by value."""
        st = vp()
        self.rt.call("recap_tracker_get_states", self.handle, ctypes.byref(st))
        try:
            out = {}
            for name in (MODEL_PARALLEL, DATA_PARALLEL, EXPERT_PARALLEL):
                buf = (ctypes.c_uint8 * 16)()
                if self.rt.lib.recap_states_lookup(st.value, name.encode(), buf) == RECAP_OK:
                    raw = bytes(buf)
                    out[name] = (int.from_bytes(raw[:8], "little"),
                                 int.from_bytes(raw[8:], "little"))
            return out
        finally:
            self.rt.call("recap_states_free", st.value)

    def generator_state(self):
        s, o = ctypes.c_uint64(), ctypes.c_uint64()
        self.rt.call("recap_generator_seed", self.generator, ctypes.byref(s))
        self.rt.call("recap_generator_offset", self.generator, ctypes.byref(o))
        return s.value, o.value

    def reserve(self, n, stream=None):
        """Philox arguments for a kernel about to run on `stream` (default: torch's current
        stream) drawing n values per thread; captured arguments inside a capture."""
        if stream is None:
            stream = _stream_handle(self.device)
        a = PhiloxArgs()
        self.rt.call("recap_generator_reserve", self.generator, stream, n, ctypes.byref(a))
        return a


# ------------------------------------------------------------------------------- Philox reference

_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Random123's Philox4x32-10 in plain Python (recap_philox4x32_10)."""
    x0, x1, x2, x3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = _M0 * x0, _M1 * x2
        x0, x1, x2, x3 = ((p1 >> 32) ^ x1 ^ k0) & _MASK32, p1 & _MASK32, \
            ((p0 >> 32) ^ x3 ^ k1) & _MASK32, p0 & _MASK32
        k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return x0, x1, x2, x3


def curand_words(seed, subsequence, offset, count):
    """The words curand(&st) returns after curand_init(seed, subsequence, offset, &st)
    (recap_philox_init + recap_philox_next)."""
    key = (seed & _MASK32, seed >> 32 & _MASK32)
    ctr = (offset >> 2) + ((subsequence & (2**64 - 1)) << 64)
    idx = offset & 3
    out = []
    while len(out) < count:
        block = philox4x32_10((ctr & _MASK32, ctr >> 32 & _MASK32, ctr >> 64 & _MASK32,
                               ctr >> 96 & _MASK32), key)
        out.extend(block[idx:])
        idx = 0
        # recap_philox_ctr_add: the low 64 bits carry into the high half (128-bit counter).
        ctr = (ctr + 1) & (2**128 - 1)
    return out[:count]


def dropout_threshold(p):
    """Element kept iff its word >= this (so P(keep) = 1 - p to 2^-32)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability {p}: must be in [0, 1)")
    return min(int(round(p * 2**32)), 2**32 - 1)


def reference_keep(seed, offset, n, p):
    """The keep mask (list of bools) recap's dropout draws for n elements with state
    (seed, offset): element 4g+j keeps iff word j of curand_init(seed, g, offset) >= threshold."""
    t = dropout_threshold(p)
    keep = []
    for g in range((n + 3) // 4):
        keep.extend(w >= t for w in curand_words(seed, g, offset, 4))
    return keep[:n]


# ------------------------------------------------------------------------------- dropout kernel

def _i32(v):
    """A 32-bit word as the signed int Triton passes as i32 (the kernel bitcasts it back)."""
    v &= _MASK32
    return v - (1 << 32) if v >= (1 << 31) else v


class _DevPtr:
    """A raw device address handed to Triton as an int64 pointer (recap's device slot)."""
    dtype = torch.int64

    def __init__(self, addr):
        self.addr = addr

    def data_ptr(self):
        return self.addr


if triton is not None:
    @triton.jit(do_not_specialize=["seed_src", "off_src", "seed_lo", "seed_hi", "off_lo",
                                   "off_hi", "captured", "thresh", "n_elem"])
    def _recap_dropout_kernel(x_ptr, y_ptr, mask_ptr, seed_src, off_src, seed_lo, seed_hi,
                              off_lo, off_hi, captured, thresh, scale, n_elem,
                              BLOCK: tl.constexpr, WRITE_MASK: tl.constexpr):
        # recap_philox_unpack: by value (seed, offset), or inside a captured graph read from
        # recap's device slot plus this draw's capture-relative offset (off_* then holds it).
        v_seed = (seed_hi.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | \
            seed_lo.to(tl.uint32, bitcast=True).to(tl.uint64)
        v_off = (off_hi.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | \
            off_lo.to(tl.uint32, bitcast=True).to(tl.uint64)
        d_seed = tl.load(seed_src).to(tl.uint64, bitcast=True)
        d_off = tl.load(off_src).to(tl.uint64, bitcast=True)
        is_cap = captured != 0
        seed = tl.where(is_cap, d_seed, v_seed)
        offset = tl.where(is_cap, d_off + v_off, v_off)

        # Group g (elements 4g..4g+3) = curand_init(seed, g, offset): counter (offset/4, g),
        # key seed; offsets from recap are multiples of 4, so the group's 4 words are one block.
        g = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        zero = tl.zeros([BLOCK], dtype=tl.uint32)
        ctr = offset >> 2
        c0 = zero + ctr.to(tl.uint32)
        c1 = zero + (ctr >> 32).to(tl.uint32)
        c2 = g.to(tl.uint32)
        c3 = (g >> 32).to(tl.uint32)
        k0 = zero + seed.to(tl.uint32)
        k1 = zero + (seed >> 32).to(tl.uint32)
        # Philox4x32-10 with explicit 32-bit multiplies (recap_philox4x32_10).
        M0: tl.constexpr = 0xD2511F53
        M1: tl.constexpr = 0xCD9E8D57
        W0: tl.constexpr = 0x9E3779B9
        W1: tl.constexpr = 0xBB67AE85
        for _ in tl.static_range(10):
            _c0, _c2 = c0, c2
            c0 = tl.umulhi(M1, _c2) ^ c1 ^ k0
            c2 = tl.umulhi(M0, _c0) ^ c3 ^ k1
            c1 = tl.mul(M1, _c2, sanitize_overflow=False)
            c3 = tl.mul(M0, _c0, sanitize_overflow=False)
            k0 = tl.add(k0, W0, sanitize_overflow=False)
            k1 = tl.add(k1, W1, sanitize_overflow=False)

        j = tl.arange(0, 4)[None, :]
        w = tl.where(j == 0, c0[:, None], tl.where(j == 1, c1[:, None],
                                                   tl.where(j == 2, c2[:, None], c3[:, None])))
        offs = g[:, None] * 4 + j
        m = offs < n_elem
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        keep = w >= thresh.to(tl.uint32, bitcast=True)
        y = tl.where(keep, x.to(tl.float32) * scale, 0.0)
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)
        if WRITE_MASK:
            tl.store(mask_ptr + offs, keep.to(tl.int8), mask=m)

_BLOCK = 256  # groups per program (1024 elements)
_dummy = {}


def _slot_dummy(device):
    """Valid memory for the slot pointers when the arguments come by value."""
    key = str(device)
    if key not in _dummy:
        _dummy[key] = torch.zeros(2, dtype=torch.int64, device=device)
    return _dummy[key]


def _launch_triton(x, y, args, p, mask_out=None, slot=None):
    if triton is None:
        raise RuntimeError("Triton is not installed")
    n = x.numel()
    if args.captured:
        if slot is not None:
            seed_src, off_src = slot
        else:
            seed_src, off_src = _DevPtr(args.seed_ptr), _DevPtr(args.offset_ptr)
        val_seed, val_off = 0, args.offset_intragraph
    else:
        d = _slot_dummy(x.device)
        seed_src, off_src = d[0:1], d[1:2]
        val_seed, val_off = args.seed, args.offset
    grid = (triton.cdiv((n + 3) // 4, _BLOCK),)
    _recap_dropout_kernel[grid](
        x, y, mask_out if mask_out is not None else y, seed_src, off_src,
        _i32(val_seed), _i32(val_seed >> 32), _i32(val_off), _i32(val_off >> 32),
        1 if args.captured else 0, _i32(dropout_threshold(p)), 1.0 / (1.0 - p), n,
        BLOCK=_BLOCK, WRITE_MASK=mask_out is not None, num_warps=4)
    return y


# The same dropout in CUDA C, drawing through include/recap/philox.h itself (recap_philox_unpack,
# recap_philox_init, recap_philox_next), compiled by NVRTC through CuPy: a second backend, and
# the device-side reference the Triton kernel is checked against when CuPy is present.
_CUDA_SRC = r"""
#include <recap/philox.h>
extern "C" __global__ void recap_dropout_f32(
    unsigned long long x_p, unsigned long long y_p, unsigned long long mask_p,
    unsigned long long seed, unsigned long long offset, unsigned long long seed_ptr,
    unsigned long long offset_ptr, unsigned long long intragraph, unsigned int captured,
    unsigned int thresh, float scale, long long n)
{
    const float *x = (const float *)x_p;
    float *y = (float *)y_p;
    signed char *mask = (signed char *)mask_p;
    recap_philox_args_t a;
    a.seed = seed; a.offset = offset;
    a.seed_ptr = (const uint64_t *)seed_ptr; a.offset_ptr = (const uint64_t *)offset_ptr;
    a.offset_intragraph = intragraph; a.captured = captured; a.reserved = 0;
    uint64_t s, o;
    recap_philox_unpack(&a, &s, &o);
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= (n + 3) / 4)
        return;
    recap_philox_stream_t st;
    recap_philox_init(s, (uint64_t)g, o, &st);   /* curand_init(seed, g, offset) */
    for (int j = 0; j < 4; j++) {
        uint32_t w = recap_philox_next(&st);
        long long e = 4 * g + j;
        if (e < n) {
            int keep = w >= thresh;
            y[e] = keep ? x[e] * scale : 0.0f;
            if (mask)
                mask[e] = (signed char)keep;
        }
    }
}
"""
_cupy_kernel = None


def include_dir():
    """The folder holding recap/philox.h: RECAP_INCLUDE, else the source tree of this file."""
    d = os.environ.get("RECAP_INCLUDE") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
    if not os.path.exists(os.path.join(d, "recap", "philox.h")):
        raise OSError(f"recap/philox.h not found under {d}: set RECAP_INCLUDE")
    return os.path.normpath(d)


def _cuda_options():
    # NVRTC has no <stdint.h>; philox.h needs only the two fixed-width types.
    fake = tempfile.mkdtemp(prefix="recap_nvrtc_")
    with open(os.path.join(fake, "stdint.h"), "w") as f:
        f.write("typedef unsigned int uint32_t;\ntypedef unsigned long long uint64_t;\n")
    return ("-I" + fake, "-I" + include_dir())


def _launch_cupy(x, y, args, p, mask_out=None, slot=None):
    global _cupy_kernel
    import cupy
    import numpy as np
    if x.dtype != torch.float32 or y.dtype != torch.float32:
        raise TypeError("the CuPy dropout backend takes float32")
    if _cupy_kernel is None:
        _cupy_kernel = cupy.RawKernel(_CUDA_SRC, "recap_dropout_f32", options=_cuda_options())
    n = x.numel()
    if args.captured and slot is not None:
        sp, op = slot[0].data_ptr(), slot[1].data_ptr()
    else:
        sp, op = args.seed_ptr or 0, args.offset_ptr or 0
    u64 = np.uint64
    a = (u64(x.data_ptr()), u64(y.data_ptr()),
         u64(mask_out.data_ptr() if mask_out is not None else 0), u64(args.seed),
         u64(args.offset), u64(sp), u64(op), u64(args.offset_intragraph), np.uint32(args.captured),
         np.uint32(dropout_threshold(p)), np.float32(1.0 / (1.0 - p)), np.int64(n))
    groups = (n + 3) // 4
    with cupy.cuda.Device(x.device.index), \
            cupy.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream):
        _cupy_kernel(((groups + 255) // 256,), (256,), a)
    return y


_BACKENDS = {"triton": _launch_triton, "cupy": _launch_cupy}
_backend = {"name": os.environ.get("RECAP_TORCH_KERNEL") or ("triton" if triton else "cupy"),
            "tried": False}


def kernel_backend():
    """The kernel dropout launches: "triton" (default) or "cupy" (RECAP_TORCH_KERNEL)."""
    return _backend["name"]


def launch_dropout(x, y, args, p, mask_out=None, slot=None, backend=None):
    """y = dropout(x) with the Philox arguments `args` (a PhiloxArgs from reserve(4)).
    `slot` (two int64 tensors: seed, base offset) stands in for recap's device slot in tests.
    Without a backend named, the first launch falls back from Triton to CuPy if Triton cannot
    launch at all (outside a capture, with a note on stderr)."""
    n = x.numel()
    if n >= 2**31:
        raise ValueError("dropout of 2^31 elements or more")
    if (args.offset_intragraph if args.captured else args.offset) % 4:
        raise ValueError("Philox offset is not a multiple of 4")
    if backend is not None:
        return _BACKENDS[backend](x, y, args, p, mask_out, slot)
    if _backend["tried"] or _backend["name"] != "triton" or not x.is_cuda:
        return _BACKENDS[_backend["name"]](x, y, args, p, mask_out, slot)
    _backend["tried"] = True
    try:
        return _launch_triton(x, y, args, p, mask_out, slot)
    except Exception as e:  # noqa: BLE001 - a broken Triton install: use the CUDA C kernel
        if torch.cuda.is_current_stream_capturing():
            raise
        print(f"recap_torch: Triton cannot launch ({e!r}); using the CuPy kernel",
              file=sys.stderr)
        _backend["name"] = "cupy"
        return _launch_cupy(x, y, args, p, mask_out, slot)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p, tracker, mask_out):
        x = x.contiguous()
        # One Philox block (4 words) per element group: reserve(4) advances the offset by 4.
        args = tracker.reserve(4)
        y = torch.empty_like(x)
        launch_dropout(x, y, args, p, mask_out)
        ctx.args, ctx.p = args.copy(), p
        return y

    @staticmethod
    def backward(ctx, gy):
        # Dropout is linear: the gradient is the same mask applied to gy. The mask is redrawn
        # from the saved arguments (by value, or the slot the running graph launch still holds).
        gx = torch.empty_like(gy, memory_format=torch.contiguous_format)
        launch_dropout(gy.contiguous(), gx, ctx.args, ctx.p)
        return gx, None, None, None


def dropout(x, p, tracker, training=True, mask_out=None):
    """Dropout drawing from `tracker`'s generator (whatever state a fork installed).
    mask_out (int8, like x) receives the keep mask, for tests."""
    if not training or p == 0.0:
        return x
    return _Dropout.apply(x, p, tracker, mask_out)


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
            raise RuntimeError(f"recap host operation {name} failed: {e!r}") from e
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
                self.raise_pending(RecapError("recompute trigger", st, "{}: {}".format(
                    self.rt.lib.recap_strerror(st).decode(),
                    self.rt.lib.recap_last_error().decode())))
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

    explicit=None asks recap (recap_capture_needs_registration): with LD_PRELOAD=librecap.so the
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
