# SPDX-License-Identifier: Apache-2.0
"""recap/_torchops.c without torch: its operations bound to stand-in generator objects (a
pointer to a state holding seed and offset, as at::CUDAGeneratorImpl is laid out), called directly and through a recap framework generator and an
exact-capture scope. The values must be what torch's get_state/set_state layout says, the
refusals and hand-offs to the Python table as the file describes."""
import ctypes
import os
import random
import unittest

import recap
from recap import _abi, _lib

SHIM = os.path.join(os.path.dirname(os.path.abspath(recap.__file__)), "_lib",
                    "librecap_torch.so")


class State(ctypes.Structure):
    """An at::CUDAGeneratorState as this test lays it out: seed and offset after a header."""
    _fields_ = [("header", ctypes.c_uint64 * 2), ("seed", ctypes.c_uint64),
                ("offset", ctypes.c_uint64)]


class Impl(ctypes.Structure):
    """An at::CUDAGeneratorImpl: a pointer to its state after other fields."""
    _fields_ = [("header", ctypes.c_uint64 * 5), ("state", ctypes.POINTER(State))]

    def __init__(self, seed, offset):
        super().__init__()
        self.own = State((0, 0), seed, offset)
        self.state = ctypes.pointer(self.own)

    @property
    def seed(self):
        return self.state[0].seed

    @seed.setter
    def seed(self, v):
        self.state[0].seed = v

    @property
    def offset(self):
        return self.state[0].offset

    @offset.setter
    def offset(self, v):
        self.state[0].offset = v


FIELDS = (Impl.state.offset, State.seed.offset, State.offset.offset)


class Ctx(ctypes.Structure):
    _fields_ = [("slow", ctypes.POINTER(_abi.FrameworkOps)), ("impl", ctypes.c_void_p)]


def pack(seed, offset):
    return seed.to_bytes(8, "little") + offset.to_bytes(8, "little")


@unittest.skipIf(os.environ.get("RECAP_BUILD_TORCHOPS") == "0", "built without the C operations")
class TorchOps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.shim = ctypes.CDLL(SHIM)
        bind = cls.shim.recap_torch_bind
        bind.argtypes = [ctypes.c_size_t] * 3
        bind.restype = ctypes.c_int
        assert bind(4, 16, 24) == -1 and bind(40, 16, 16) == -1  # misplaced fields refused
        assert bind(*FIELDS) == 0
        for name in ("recap_torch_get_state", "recap_torch_set_state"):
            getattr(cls.shim, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        for name in ("recap_torch_state_get", "recap_torch_state_set"):
            getattr(cls.shim, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.c_char_p]
        for name in ("recap_torch_get_state", "recap_torch_set_state", "recap_torch_state_get",
                     "recap_torch_state_set"):
            getattr(cls.shim, name).restype = ctypes.c_int

    def setUp(self):
        self.rng = random.Random(int(os.environ.get("RECAP_TEST_SEED", "0")) or None)
        self.slow_calls = []
        self.slow_status = _abi.RECAP_OK
        self.slow = self.python_table()
        self.impl = Impl(self.rng.getrandbits(64), 4 * self.rng.getrandbits(40))
        self.ctx = Ctx(ctypes.pointer(self.slow), ctypes.addressof(self.impl))

    def python_table(self):
        """The slow table: only its set_state and state_set may be reached, and they record it."""
        ops = _abi.FrameworkOps()
        ops.version = _abi.RECAP_FRAMEWORK_OPS_VERSION
        ops.name = b"fake-torch"

        def set_state(_fw, buf):
            self.slow_calls.append(("set_state", ctypes.string_at(buf, 16)))
            if self.slow_status == _abi.RECAP_OK:
                raw = ctypes.string_at(buf, 16)
                self.impl.seed = int.from_bytes(raw[:8], "little")
                self.impl.offset = int.from_bytes(raw[8:], "little")
            return self.slow_status

        def state_set(_fw, obj, buf):
            self.slow_calls.append(("state_set", obj, ctypes.string_at(buf, 16)))
            return self.slow_status

        self.keep = [_abi.SetStateFn(set_state), _abi.StateSetFn(state_set)]
        ops.set_state, ops.state_set = self.keep
        return ops

    def test_reads_are_seed_then_offset(self):
        buf = ctypes.create_string_buffer(16)
        self.assertEqual(self.shim.recap_torch_get_state(ctypes.addressof(self.ctx), buf),
                         _abi.RECAP_OK)
        self.assertEqual(buf.raw, pack(self.impl.seed, self.impl.offset))
        other = Impl(self.rng.getrandbits(64), 4 * self.rng.getrandbits(40))
        self.assertEqual(self.shim.recap_torch_state_get(None, ctypes.addressof(other), buf),
                         _abi.RECAP_OK)
        self.assertEqual(buf.raw, pack(other.seed, other.offset))

    def test_same_seed_writes_the_offset_here(self):
        for _ in range(50):
            off = 4 * self.rng.getrandbits(40)
            st = self.shim.recap_torch_set_state(ctypes.addressof(self.ctx),
                                                 pack(self.impl.seed, off))
            self.assertEqual((st, self.impl.offset), (_abi.RECAP_OK, off))
        obj = Impl(5, 8)
        st = self.shim.recap_torch_state_set(ctypes.addressof(self.ctx), ctypes.addressof(obj),
                                             pack(5, 4096))
        self.assertEqual((st, obj.seed, obj.offset), (_abi.RECAP_OK, 5, 4096))
        self.assertEqual(self.slow_calls, [])

    def test_misaligned_offset_is_refused_and_changes_nothing(self):
        before = (self.impl.seed, self.impl.offset)
        for off in (1, 2, 3, 4 * self.rng.getrandbits(30) + 2):
            st = self.shim.recap_torch_set_state(ctypes.addressof(self.ctx),
                                                 pack(self.impl.seed, off))
            self.assertEqual(st, _abi.RECAP_ERR_MISALIGNED)
        self.assertEqual((self.impl.seed, self.impl.offset), before)
        self.assertEqual(self.slow_calls, [])

    def test_new_seed_goes_to_the_python_table(self):
        seed = self.impl.seed ^ 1
        st = self.shim.recap_torch_set_state(ctypes.addressof(self.ctx), pack(seed, 12))
        self.assertEqual(st, _abi.RECAP_OK)
        self.assertEqual(self.slow_calls, [("set_state", pack(seed, 12))])
        self.assertEqual((self.impl.seed, self.impl.offset), (seed, 12))
        obj = Impl(1, 0)
        self.slow_status = _abi.RECAP_ERR_STATE  # torch refused (inside a capture, say)
        st = self.shim.recap_torch_state_set(ctypes.addressof(self.ctx), ctypes.addressof(obj),
                                             pack(2, 0))
        self.assertEqual(st, _abi.RECAP_ERR_STATE)
        self.assertEqual(self.slow_calls[-1], ("state_set", ctypes.addressof(obj), pack(2, 0)))
        self.assertEqual((obj.seed, obj.offset), (1, 0))

    def test_scope_restores_through_the_c_table(self):
        """A framework generator whose value operations are the shim's: recap's exact-capture
        scope reads it on entry and writes the offset back on leaving."""
        ops = _abi.FrameworkOps()  # the value form alone
        ops.version, ops.name = _abi.RECAP_FRAMEWORK_OPS_VERSION, b"fake-torch"
        for field in ("get_state", "set_state"):
            ftype = dict(_abi.FrameworkOps._fields_)[field]
            addr = ctypes.cast(getattr(self.shim, "recap_torch_" + field), ctypes.c_void_p)
            setattr(ops, field, ftype(addr.value))
        g, scope = ctypes.c_void_p(), ctypes.c_void_p()
        _lib.call("recap_generator_create_framework", ctypes.byref(ops),
                  ctypes.byref(self.ctx), _abi.RECAP_DEVICE_HOST, ctypes.byref(g))
        try:
            before = (self.impl.seed, self.impl.offset)
            _lib.call("recap_exact_capture_enter", ctypes.byref(scope))
            self.impl.offset += 4 * (1 + self.rng.getrandbits(20))  # a warm-up drew
            _lib.call("recap_exact_capture_leave", scope)
            self.assertEqual((self.impl.seed, self.impl.offset), before)
            self.assertEqual(self.slow_calls, [])
            out = (ctypes.c_uint8 * 16)()
            _lib.call("recap_generator_get_state", g, out)
            self.assertEqual(bytes(out), pack(*before))
        finally:
            _lib.call("recap_generator_destroy", g)


if __name__ == "__main__":
    unittest.main()
