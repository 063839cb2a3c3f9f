# SPDX-License-Identifier: Apache-2.0
"""recap's own dropout for PyTorch: masks drawn from a recap generator (``RecapTracker``), by a
Triton kernel (or a CUDA C kernel through CuPy) implementing Philox4x32-10 in recap's layout:
element group g (4 elements) keeps element 4g+j iff word j of curand_init(seed, g, offset) is at
least the threshold, with (seed, offset) from ``recap_generator_reserve`` (read from recap's
device slot inside a CUDA-graph capture, as ``recap_philox_unpack``). Graph replays of such
dropouts cost recap's flat launch advance (bench/RESULTS.md, "Graph launch cost") instead
of torch's two fill kernels per registered generator.

Reached as ``recap.torch.dropout``, ``recap.torch.RecapTracker`` and friends (imported on first
use: Triton loads only then).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import tempfile

import torch

from . import _abi, _lib
from ._lib import check, lib

try:
    import triton
    import triton.language as tl
except ImportError:  # the CuPy kernel, or no dropout
    triton = None
    tl = None

MODEL_PARALLEL = _abi.RECAP_RNG_MODEL_PARALLEL
DATA_PARALLEL = _abi.RECAP_RNG_DATA_PARALLEL
EXPERT_PARALLEL = _abi.RECAP_RNG_EXPERT_PARALLEL
PhiloxArgs = _abi.PhiloxArgs


def _copy_args(a):
    c = PhiloxArgs()
    ctypes.pointer(c)[0] = a
    return c


def _stream_handle(device):
    """The recap_stream_t for work on `device` now: torch's current stream (a host tracker
    takes none)."""
    if device == _abi.RECAP_DEVICE_HOST:
        return None
    return torch.cuda.current_stream(device).cuda_stream


class RecapTracker:
    """recap's tracker driving a recap device generator (not torch's): what ``dropout`` draws
    from. ``seed_parallel`` is model_parallel_cuda_manual_seed, ``fork`` Megatron's fork."""

    def __init__(self, device=None, graph_safe=True):
        if device is None:
            device = torch.cuda.current_device()
        self.device = device
        p = _abi.TrackerParams(_abi.RECAP_TRACKER_GRAPH_SAFE if graph_safe else 0, None, device,
                               None)
        h = ctypes.c_void_p()
        check(lib().recap_tracker_create(ctypes.byref(p), ctypes.byref(h)),
              "recap_tracker_create")
        self.handle = h.value
        g = ctypes.c_void_p()
        check(lib().recap_tracker_generator(self.handle, ctypes.byref(g)),
              "recap_tracker_generator")
        self.generator = g.value

    def close(self):
        if self.handle:
            check(lib().recap_tracker_destroy(self.handle), "recap_tracker_destroy")
            self.handle = None

    def seed_parallel(self, seed, ranks=None):
        ranks = ranks if ranks is not None else _abi.ParallelRanks(0, 1, 0, 1, 0, 1, 0, 1, 0, 1)
        if not isinstance(ranks, _abi.ParallelRanks):  # another binding's struct, same layout
            ranks = _abi.ParallelRanks.from_buffer_copy(ranks)
        check(lib().recap_tracker_seed_parallel(self.handle, int(seed), ctypes.byref(ranks)),
              "recap_tracker_seed_parallel")

    def add(self, name, seed):
        check(lib().recap_tracker_add(self.handle, name.encode(), int(seed)), "recap_tracker_add")

    def fork_begin(self, name=MODEL_PARALLEL):
        tok = ctypes.c_uint64()
        check(lib().recap_tracker_fork(self.handle, name.encode(), ctypes.byref(tok)),
              f"fork({name})")
        return tok.value

    def fork_end(self, token):
        check(lib().recap_tracker_unfork(self.handle, token), "unfork")

    @contextlib.contextmanager
    def fork(self, name=MODEL_PARALLEL):
        tok = self.fork_begin(name)
        try:
            yield
        finally:
            self.fork_end(tok)

    def current_name(self):
        s = ctypes.c_char_p()
        check(lib().recap_tracker_current_name(self.handle, ctypes.byref(s)),
              "recap_tracker_current_name")
        return s.value.decode()

    def states(self):
        """{name: (seed, offset)} of the named states, by value."""
        st = ctypes.c_void_p()
        check(lib().recap_tracker_get_states(self.handle, ctypes.byref(st)),
              "recap_tracker_get_states")
        try:
            n = ctypes.c_size_t()
            check(lib().recap_states_count(st, ctypes.byref(n)), "recap_states_count")
            out = {}
            for i in range(n.value):
                name = ctypes.c_char_p()
                check(lib().recap_states_name(st, i, ctypes.byref(name)), "recap_states_name")
                buf = (ctypes.c_uint8 * _abi.RECAP_STATE_BYTES)()
                check(lib().recap_states_lookup(st, name.value, buf), "recap_states_lookup")
                raw = bytes(buf)
                out[name.value.decode()] = (int.from_bytes(raw[:8], "little"),
                                            int.from_bytes(raw[8:], "little"))
            return out
        finally:
            lib().recap_states_free(st)

    def generator_state(self):
        buf = (ctypes.c_uint8 * _abi.RECAP_STATE_BYTES)()
        check(lib().recap_generator_get_state(self.generator, buf), "recap_generator_get_state")
        raw = bytes(buf)
        return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")

    def reserve(self, n, stream=None):
        """Philox arguments for a kernel about to run on `stream` (default: torch's current
        stream) drawing n values per thread; captured arguments inside a capture."""
        if stream is None:
            stream = _stream_handle(self.device)
        a = PhiloxArgs()
        check(lib().recap_generator_reserve(self.generator, stream, n, ctypes.byref(a)),
              "recap_generator_reserve")
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
    """The folder holding recap/philox.h: RECAP_INCLUDE, the copy in the wheel, else the source
    tree this package sits in."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.environ.get("RECAP_INCLUDE"), os.path.join(here, "include"),
              os.path.join(here, "..", "..", "include")):
        if d and os.path.exists(os.path.join(d, "recap", "philox.h")):
            return os.path.normpath(d)
    raise OSError("recap/philox.h not found: set RECAP_INCLUDE to recap's include folder")


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
    launch at all (outside a capture, with a warning in recap's log)."""
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
        _lib.log_once("warn", f"recap.torch: Triton cannot launch ({e!r}); using the CuPy kernel")
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
        ctx.args, ctx.p = _copy_args(args), p
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
