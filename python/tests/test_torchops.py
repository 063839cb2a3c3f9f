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


DOUBLE = os.environ.get("RECAP_CUDA_DOUBLE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "double", ".libs",
    "libcudadouble.so")


class GenState(ctypes.Structure):
    """An at::CUDAGeneratorState with the fields a replay uses (seed and offset where State has
    them: the shim's value binding is process-wide)."""
    _fields_ = [("header", ctypes.c_uint64 * 2), ("seed", ctypes.c_uint64),
                ("offset", ctypes.c_uint64), ("intragraph", ctypes.c_uint64),
                ("capturing", ctypes.c_uint8), ("pad", ctypes.c_uint8 * 7),
                ("graphs", ctypes.c_uint64 * 7), ("seed_ext", ctypes.c_void_p),
                ("offset_ext", ctypes.c_void_p)]


class Storage(ctypes.Structure):
    _fields_ = [("header", ctypes.c_uint64 * 2), ("data", ctypes.c_uint64)]


class TensorImpl(ctypes.Structure):
    _fields_ = [("header", ctypes.c_uint64 * 2), ("storage", ctypes.POINTER(Storage))]


class Entry(ctypes.Structure):
    """A ska::flat_hash_map entry of (state pointer, increment)."""
    _fields_ = [("distance", ctypes.c_int8), ("pad", ctypes.c_uint8 * 7), ("key", ctypes.c_void_p),
                ("value", ctypes.c_uint64)]


class Table(ctypes.Structure):
    _fields_ = [("entries", ctypes.c_void_p), ("slots_minus_one", ctypes.c_uint64),
                ("shift", ctypes.c_int8), ("lookups", ctypes.c_int8), ("pad", ctypes.c_uint8 * 2),
                ("load", ctypes.c_float), ("count", ctypes.c_uint64)]


class Graph(ctypes.Structure):
    """A C++ CUDAGraph as torch 2.11 lays out the fields a replay reads."""
    _fields_ = [("graph", ctypes.c_void_p), ("exec", ctypes.c_void_p), ("has_graph", ctypes.c_uint8),
                ("ended", ctypes.c_uint8), ("has_exec", ctypes.c_uint8), ("pad", ctypes.c_uint8 * 5),
                ("capture_id", ctypes.c_uint64), ("table", Table)]


@unittest.skipIf(os.environ.get("RECAP_BUILD_TORCHOPS") == "0", "built without the C operations")
@unittest.skipUnless(os.path.exists(DOUBLE) or os.environ.get("RECAP_CUDA_DOUBLE"),
                     "the CUDA test double is not built (make check builds it)")
class Replay(unittest.TestCase):
    """recap_torch_replay against the CUDA test double, on graphs laid out as torch's: at each
    replay it reads the graph's table of registered states; the seed and offset of the states
    with an increment reach their device tensors, their offsets advance by the increments as
    torch's replay advances them, the graph's current exec is launched, states without an
    increment are left alone; a replay it cannot do is handed back (-1) with nothing changed."""

    @classmethod
    def setUpClass(cls):
        cls.shim = sh = ctypes.CDLL(SHIM)
        sh.recap_torch_bind.argtypes = [ctypes.c_size_t] * 3
        assert sh.recap_torch_bind(*FIELDS) == 0
        assert GenState.seed.offset == State.seed.offset
        sh.recap_torch_bind_state.argtypes = [ctypes.c_size_t] * 6
        sh.recap_torch_bind_graph.argtypes = [ctypes.c_size_t] * 3
        sh.recap_torch_peek.argtypes = [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
        sh.recap_torch_graph_states.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                                ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        sh.recap_torch_graph_states.restype = ctypes.c_long
        sh.recap_torch_replay.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        saved = os.environ.get("RECAP_CUDA_DRIVER")
        os.environ["RECAP_CUDA_DRIVER"] = DOUBLE
        try:
            assert sh.recap_torch_driver() == 0, "the shim did not load the double's driver API"
        finally:
            if saved is None:
                del os.environ["RECAP_CUDA_DRIVER"]
            else:
                os.environ["RECAP_CUDA_DRIVER"] = saved
        cls.cu = cu = ctypes.CDLL(DOUBLE)
        cls.ctx, cls.stream = ctypes.c_void_p(), ctypes.c_void_p()
        cls.ok(cu.cuInit(0))
        cls.ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(cls.ctx), 0))
        cls.ok(cu.cuCtxSetCurrent(cls.ctx))
        cls.ok(cu.cuStreamCreate(ctypes.byref(cls.stream), 0))
        cls.ok(sh.recap_torch_bind_state(GenState.intragraph.offset, GenState.capturing.offset,
                                         GenState.seed_ext.offset, GenState.offset_ext.offset,
                                         TensorImpl.storage.offset, Storage.data.offset))
        cls.ok(sh.recap_torch_bind_graph(Graph.table.offset, Graph.exec.offset,
                                         Graph.has_exec.offset))

    @staticmethod
    def ok(rc):
        assert rc == 0, f"CUDA call failed: {rc}"

    def setUp(self):
        self.rng = random.Random(int(os.environ.get("RECAP_TEST_SEED", "0")) or None)
        self.keep = []

    def dev_alloc(self):
        d = ctypes.c_uint64()
        self.ok(self.cu.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(64)))
        return d.value

    def dev_read(self, addr):
        v = ctypes.c_uint64()
        self.ok(self.cu.cuStreamSynchronize(self.stream))
        self.ok(self.cu.cuMemcpyDtoH_v2(ctypes.byref(v), ctypes.c_uint64(addr),
                                        ctypes.c_size_t(8)))
        return v.value

    def state(self):
        """A generator state with its two device tensors."""
        st = GenState()
        st.seed, st.offset = self.rng.getrandbits(64), 4 * self.rng.getrandbits(40)
        for field in ("seed_ext", "offset_ext"):
            storage = Storage((0, 0), self.dev_alloc())
            impl = TensorImpl((0, 0), ctypes.pointer(storage))
            self.keep += [storage, impl]
            setattr(st, field, ctypes.addressof(impl))
        self.keep.append(st)
        return st

    def exec_(self, marker, value=0xC0FFEE):
        """An exec that writes `value` to `marker` (so a launch, and which, is seen)."""
        g, e = ctypes.c_void_p(), ctypes.c_void_p()
        self.ok(self.cu.cuStreamBeginCapture_v2(self.stream, 2))  # relaxed
        self.ok(self.cu.cuMemsetD32Async(ctypes.c_uint64(marker), value, ctypes.c_size_t(1),
                                         self.stream))
        self.ok(self.cu.cuStreamEndCapture(self.stream, ctypes.byref(g)))
        self.ok(self.cu.cuGraphInstantiateWithFlags(ctypes.byref(e), g, ctypes.c_uint64(0)))
        return e.value

    def graph(self, exec_, pairs, slots=16):
        """A graph object whose table holds (state, increment) pairs at random slots."""
        lookups = 4
        entries = (Entry * (slots + lookups))()
        for e in entries:
            e.distance = -1
        entries[-1].distance = 0  # the sentinel
        for (st, inc), i in zip(pairs, self.rng.sample(range(slots + lookups - 1), len(pairs))):
            entries[i].distance = self.rng.randrange(lookups)
            entries[i].key, entries[i].value = ctypes.addressof(st), inc
        g = Graph(exec=exec_, has_exec=1, ended=1)
        g.table = Table(ctypes.addressof(entries), slots - 1, 60, lookups, (0, 0), 0.5, len(pairs))
        self.keep += [entries, g]
        return g

    def ext(self, st, field):
        return TensorImpl.from_address(getattr(st, field)).storage[0].data

    def replay(self, g):
        return self.shim.recap_torch_replay(ctypes.addressof(g), self.stream)

    def test_the_table_reads_as_registered(self):
        pairs = [(self.state(), 4 * self.rng.getrandbits(8)) for _ in range(self.rng.randrange(1, 12))]
        g = self.graph(None, pairs)
        states, incs = (ctypes.c_void_p * 32)(), (ctypes.c_uint64 * 32)()
        n = self.shim.recap_torch_graph_states(ctypes.addressof(g), states, incs, 32)
        self.assertEqual(sorted(zip(states[:n], incs[:n])),
                         sorted((ctypes.addressof(s), i) for s, i in pairs))
        g.table.count += 1  # a table that does not read as one
        self.assertEqual(self.shim.recap_torch_graph_states(ctypes.addressof(g), states, incs, 32),
                         -1)
        g.table.count -= 1
        for bad in (0x10, 1 << 47 | 0x1000):  # words taken for a table while probing: no fault
            g.table.entries = bad
            self.assertEqual(
                self.shim.recap_torch_graph_states(ctypes.addressof(g), states, incs, 32), -1)

    def test_replays_write_drawn_states_and_advance_their_offsets(self):
        marker = self.dev_alloc()
        drawn = [(self.state(), 4 * (1 + self.rng.getrandbits(12))) for _ in range(3)]
        idle = self.state()
        odd = self.state()  # torch rounds increments up to a multiple of 4
        g = self.graph(self.exec_(marker), drawn + [(idle, 0), (odd, 6)])
        drawn.append((odd, 8))
        idle_before = (idle.seed, idle.offset)
        value = 0xC0FFEE
        for k in range(1, 21):
            if self.rng.random() < 0.5:  # eager draws between replays
                self.rng.choice(drawn)[0].offset += 4 * self.rng.getrandbits(10)
            if k == 10:  # an instantiate: the graph's exec changes (the old one still works)
                g.exec, value = self.exec_(marker, 0xBEEF), 0xBEEF
            before = [(s.seed, s.offset) for s, _ in drawn]
            self.ok(self.cu.cuMemsetD32Async(ctypes.c_uint64(marker), 0, ctypes.c_size_t(1),
                                             self.stream))
            self.assertEqual(self.replay(g), 0)
            self.assertEqual(self.dev_read(marker) & 0xFFFFFFFF, value)
            for (s, inc), (seed, off) in zip(drawn, before):
                self.assertEqual(self.dev_read(self.ext(s, "seed_ext")), seed)
                self.assertEqual(self.dev_read(self.ext(s, "offset_ext")), off)
                self.assertEqual((s.seed, s.offset), (seed, off + inc))
            self.assertEqual((idle.seed, idle.offset), idle_before)

    def test_replays_it_cannot_do_are_handed_back_unchanged(self):
        marker = self.dev_alloc()
        st, idle = self.state(), self.state()
        g = self.graph(self.exec_(marker), [(st, 16), (idle, 0)])
        before = (st.seed, st.offset)
        g.has_exec = 0  # kept for a later instantiate: torch instantiates at its replay
        self.assertEqual(self.replay(g), -1)
        g.has_exec = 1
        idle.capturing = 1  # a registered state in another capture: torch's replay raises
        self.assertEqual(self.replay(g), -1)
        idle.capturing = 0
        self.ok(self.cu.cuStreamBeginCapture_v2(self.stream, 2))
        self.assertEqual(self.replay(g), -1)  # inside a capture
        cg = ctypes.c_void_p()
        self.ok(self.cu.cuStreamEndCapture(self.stream, ctypes.byref(cg)))
        self.ok(self.cu.cuCtxSetCurrent(None))
        try:
            self.assertEqual(self.replay(g), -1)  # no current context: torch's replay binds one
        finally:
            self.ok(self.cu.cuCtxSetCurrent(self.ctx))
        impl = TensorImpl.from_address(st.offset_ext)
        kept = ctypes.addressof(impl.storage.contents)
        impl.storage = None  # an undefined tensor
        self.assertEqual(self.replay(g), -1)
        impl.storage = ctypes.pointer(Storage.from_address(kept))
        g.table.count = 3
        self.assertEqual(self.replay(g), -1)  # the table does not read
        g.table.count = 2
        self.assertEqual((st.seed, st.offset), before)
        self.assertEqual(self.replay(g), 0)
        self.assertEqual(st.offset, before[1] + 16)
        g.table.count = 0  # reset: torch's replay raises
        g.has_exec = 0
        self.assertEqual(self.replay(g), -1)

    def test_peek_reads_memory_and_refuses_what_is_not_mapped(self):
        v = ctypes.c_uint64(self.rng.getrandbits(64))
        out = ctypes.c_uint64()
        self.assertEqual(self.shim.recap_torch_peek(ctypes.addressof(v), ctypes.byref(out), 8), 0)
        self.assertEqual(out.value, v.value)
        for bad in (8, 1 << 47 | 0x1000):
            self.assertEqual(self.shim.recap_torch_peek(bad, ctypes.byref(out), 8), -1)

    def test_peek_through_a_pipe_where_process_vm_readv_is_refused(self):
        peek = self.shim.recap_torch_peek_pipe
        peek.argtypes = [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
        peek.restype = ctypes.c_int
        n = 4096 + self.rng.randrange(1, 5000)  # more than one chunk
        src = bytes(self.rng.getrandbits(8) for _ in range(n))
        buf = ctypes.create_string_buffer(src, n)
        out = ctypes.create_string_buffer(n)
        self.assertEqual(peek(ctypes.addressof(buf), out, n), 0)
        self.assertEqual(out.raw, src)
        word = ctypes.c_uint64()
        for bad in (8, 1 << 47 | 0x1000):
            self.assertEqual(peek(bad, ctypes.byref(word), 8), -1)

class FieldSearch(unittest.TestCase):
    """recap/_layout.py's search for a generator's state pointer, seed and offset, on fabricated
    generator objects read through the shim's safe peek: the true places are found wherever they
    lie, whatever the words around them hold (heap neighbours shared by chance, pointers to
    nothing, to objects holding the probe values once, to a copy of the state torch also writes);
    the order is the objects' own."""

    WORDS = 32  # 256 bytes: the search reads words 8 to 192 past each object

    @classmethod
    def setUpClass(cls):
        cls.shim = sh = ctypes.CDLL(SHIM)
        sh.recap_torch_peek.argtypes = [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
        sh.recap_torch_peek.restype = ctypes.c_int

    def setUp(self):
        self.rng = random.Random(int(os.environ.get("RECAP_TEST_SEED", "0")) or None)

    def words(self, n):
        """n words of noise, small and large: odd, so none is a pointer or a probe offset."""
        r = self.rng
        return (ctypes.c_uint64 * n)(*(r.choice((r.randrange(1 << 16), r.getrandbits(64))) | 1
                                       for _ in range(n)))

    def layout(self):
        """Three generator objects (the first two sharing a state), set_state, and the places
        the search must return."""
        from recap import _layout
        r = self.rng
        a, b, d = (self.words(self.WORDS) for _ in range(3))
        shared, other = self.words(8), self.words(8)
        keep = [a, b, d, shared, other]
        places = r.sample(range(1, 25), 8)  # word indexes in the objects, 8..192 bytes
        state_k = places.pop()
        seed_j, offset_j = r.sample(range(8), 2)
        a[state_k] = b[state_k] = ctypes.addressof(shared)
        d[state_k] = ctypes.addressof(other)
        written = [(shared, seed_j, offset_j)]
        want = [(state_k * 8, seed_j * 8, offset_j * 8)]
        for k in places[:r.randrange(len(places) + 1)]:
            kind = r.randrange(5)
            if kind == 0:  # a word all three share (a type's table, say)
                a[k] = b[k] = d[k] = ctypes.addressof(other)
                continue
            if kind == 1:  # a pointer to nothing
                a[k] = b[k] = (1 << 47) | (r.randrange(1, 1 << 20) << 12)
            else:
                e = self.words(8)
                keep.append(e)
                a[k] = b[k] = ctypes.addressof(e)
                if kind == 3:  # holds the first probe values, by chance, and keeps them
                    s0, o0 = _layout.PROBE_VALUES[0]
                    i, j = r.sample(range(8), 2)
                    e[i], e[j] = s0, o0
                elif kind == 4:  # a copy of the state, written with it
                    i, j = r.sample(range(8), 2)
                    written.append((e, i, j))
                    want.append((k * 8, i * 8, j * 8))
            d[k] = r.getrandbits(64)

        def set_state(seed, offset):
            for obj, i, j in written:
                obj[i], obj[j] = seed, offset

        impls = [ctypes.addressof(x) for x in (a, b, d)]
        return impls, set_state, sorted(want), keep

    def test_the_true_places_and_only_those_that_track_the_state(self):
        from recap import _layout
        peek = lambda addr: _layout.word(self.shim, addr)  # noqa: E731
        for _ in range(300):
            impls, set_state, want, _keep = self.layout()
            self.assertEqual(_layout.state_fields(peek, impls, set_state), want)

    def test_nothing_where_no_word_points_to_a_state(self):
        from recap import _layout
        peek = lambda addr: _layout.word(self.shim, addr)  # noqa: E731
        a, b, d = (self.words(self.WORDS) for _ in range(3))
        impls = [ctypes.addressof(x) for x in (a, b, d)]
        self.assertEqual(_layout.state_fields(peek, impls, lambda seed, offset: None), [])


if __name__ == "__main__":
    unittest.main()
