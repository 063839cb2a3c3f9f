# SPDX-License-Identifier: Apache-2.0
"""recap._C.Fork, recap.megatron's fork as a C++ context manager (recap/csrc/fork.cpp), without
a device: the object drives any recap tracker, so these tests give it host trackers. Random
sequences of nested forks (names repeating, as A, B, A) with "draws" (the generator's offset
moved) between them, through the native object and through librecap's calls directly on a twin
tracker: the generator's and every named state's values equal after each step. Exceptions
inside blocks, leaving out of order (Megatron's message; the fork stays open and can still be
left), failures of the C call raised by the Python callback, the CPU generator check (warned
after a draw from torch's CPU generator inside the block, silent otherwise), decorator use, and
no allocation per fork once the object's stacks have grown."""
import ctypes
import os
import random
import unittest

try:
    import torch
except ImportError:
    torch = None

SEED = int(os.environ.get("RECAP_TEST_SEED", "0") or 0) or random.randrange(1, 1 << 31)
NAMES = [b"data-parallel-rng", b"model-parallel-rng", b"expert-parallel-rng", b"x"]


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class NativeFork(unittest.TestCase):
    def setUp(self):
        from recap import _ext, _abi, _lib
        import recap.megatron as rm
        self.C = _ext.module()
        self.assertIsNotNone(self.C, _ext.why)
        self.abi, self.lib, self.rm = _abi, _lib, rm
        self.ext = _ext
        self.assertTrue(_ext.bound("fork"))
        self.rng = random.Random(SEED)
        self.trackers = []

    def tearDown(self):
        for t in self.trackers:
            self.lib.call("recap_tracker_destroy", t)

    def tracker(self, seeds):
        p = self.abi.TrackerParams(0, None, self.abi.RECAP_DEVICE_HOST, None)
        t = ctypes.c_void_p()
        self.lib.call("recap_tracker_create", ctypes.byref(p), ctypes.byref(t))
        self.trackers.append(t)
        for n, s in zip(NAMES, seeds):
            self.lib.call("recap_tracker_add", t, n, s)
        return t

    def gen(self, t):
        g = ctypes.c_void_p()
        self.lib.call("recap_tracker_generator", t, ctypes.byref(g))
        return g

    def values(self, t):
        """The generator's value and every named state's (bytes)."""
        buf = (ctypes.c_uint8 * 16)()
        self.lib.call("recap_generator_get_state", self.gen(t), buf)
        out = [bytes(buf)]
        s = ctypes.c_void_p()
        self.lib.call("recap_tracker_get_states", t, ctypes.byref(s))
        try:
            for n in NAMES:
                self.lib.call("recap_states_lookup", s, n, buf)
                out.append(bytes(buf))
        finally:
            self.lib.call("recap_states_free", s)
        return out

    def draw(self, t, k):
        """k draws' worth of offset (4 words each) on the tracker's generator."""
        buf = (ctypes.c_uint8 * 16)()
        g = self.gen(t)
        self.lib.call("recap_generator_get_state", g, buf)
        off = int.from_bytes(bytes(buf[8:]), "little") + 4 * k
        buf[8:] = off.to_bytes(8, "little")
        self.lib.call("recap_generator_set_state", g, buf)

    def raise_recap(self, st, what):  # not `fail`: that is unittest.TestCase.fail
        raise self.lib.error(st, what)

    def native(self, t, name, warn=None):
        return self.rm._NativeFork(t.value, name.decode(), self.raise_recap,
                                   warn or (lambda msg: None))

    def test_random_nested_sequences_equal_the_c_calls(self):
        for round_ in range(20):
            seeds = [self.rng.randrange(1, 1 << 40) for _ in NAMES]
            a, b = self.tracker(seeds), self.tracker(seeds)
            objs = {n: self.native(a, n) for n in NAMES}
            open_a, open_b = [], []
            for step in range(self.rng.randrange(5, 40)):
                op = self.rng.random()
                if op < 0.4 and len(open_a) < 6:
                    n = self.rng.choice(NAMES)
                    objs[n].__enter__()
                    tok = ctypes.c_uint64()
                    self.lib.call("recap_tracker_fork", b, n, ctypes.byref(tok))
                    open_a.append(n)
                    open_b.append(tok.value)
                elif op < 0.7 and open_a:
                    self.assertFalse(objs[open_a.pop()].__exit__(None, None, None))
                    self.lib.call("recap_tracker_unfork", b, open_b.pop())
                else:
                    k = self.rng.randrange(1, 1000)
                    self.draw(a, k)
                    self.draw(b, k)
                self.assertEqual(self.values(a), self.values(b),
                                 f"seed {SEED}, round {round_}, step {step}")
            while open_a:
                objs[open_a.pop()].__exit__(None, None, None)
                self.lib.call("recap_tracker_unfork", b, open_b.pop())
            self.assertEqual(self.values(a), self.values(b), f"seed {SEED}")
            self.assertTrue(all(o.depth == 0 for o in objs.values()))

    def test_with_blocks_exceptions_and_decorators(self):
        t = self.tracker([11, 12, 13, 14])
        ref = self.tracker([11, 12, 13, 14])
        f = self.native(t, NAMES[1])
        with self.assertRaises(KeyError):
            with f as got:
                self.assertIsNone(got, "fork yields None, as Megatron's")
                self.draw(t, 5)
                raise KeyError("inside")
        self.assertEqual(f.depth, 0, "an exception inside closes the fork")
        tok = ctypes.c_uint64()
        self.lib.call("recap_tracker_fork", ref, NAMES[1], ctypes.byref(tok))
        self.draw(ref, 5)
        self.lib.call("recap_tracker_unfork", ref, tok.value)
        self.assertEqual(self.values(t), self.values(ref))

        @self.native(t, NAMES[2])
        def inside(k):
            self.draw(t, k)
            return k
        self.assertEqual(inside(3), 3)
        self.assertEqual(inside(4), 4)
        for k in (3, 4):
            self.lib.call("recap_tracker_fork", ref, NAMES[2], ctypes.byref(tok))
            self.draw(ref, k)
            self.lib.call("recap_tracker_unfork", ref, tok.value)
        self.assertEqual(self.values(t), self.values(ref))

    def test_out_of_order_and_failures(self):
        t = self.tracker([1, 2, 3, 4])
        me = self
        raised = []

        def fail(st, what):  # as recap.megatron's: Megatron's message for an out-of-order unfork
            raised.append((st, what))
            if what == "recap_tracker_unfork" and st == me.abi.RECAP_ERR_STATE:
                raise Exception("current state name is not the same as the desired state name")
            raise me.lib.error(st, what)
        fa = self.rm._NativeFork(t.value, "x", fail, lambda m: None)
        fb = self.rm._NativeFork(t.value, "model-parallel-rng", fail, lambda m: None)
        fa.__enter__()
        fb.__enter__()
        with self.assertRaisesRegex(Exception, "current state name is not the same"):
            fa.__exit__(None, None, None)
        self.assertEqual(fa.depth, 1, "still open after the refused exit")
        fb.__exit__(None, None, None)
        fa.__exit__(None, None, None)
        self.assertEqual((fa.depth, fb.depth), (0, 0))
        nope = self.rm._NativeFork(t.value, "never-added", fail, lambda m: None)
        with self.assertRaises(self.lib.RecapError):
            nope.__enter__()
        self.assertEqual(nope.depth, 0)
        self.assertEqual([w for _, w in raised],
                         ["recap_tracker_unfork", "recap_tracker_fork"])
        with self.assertRaises(Exception):
            nope.__exit__(None, None, None)  # leaving what was never entered: torch's error

    def test_cpu_generator_check(self):
        t = self.tracker([5, 6, 7, 8])
        said = []
        f = self.native(t, NAMES[0], warn=said.append)
        with f:
            self.draw(t, 7)  # recap's generator: not torch's CPU one
        self.assertEqual(said, [])
        with f:
            torch.rand(1)
        self.assertEqual(said, ["CPU RNG state changed within GPU RNG context"])
        with f:
            torch.randn(1)  # Box-Muller caches a sample or moves the twister: either is seen
        self.assertEqual(len(said), 2)

    def test_no_allocation_per_fork(self):
        import tracemalloc
        t = self.tracker([1, 2, 3, 4])
        f = self.native(t, NAMES[3])
        for _ in range(100):
            with f:
                pass
        tracemalloc.start()
        try:
            snap0 = tracemalloc.take_snapshot()
            for _ in range(2000):
                with f:
                    with f:
                        pass
            snap1 = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename")
                    if s.size_diff > 0 and "tracemalloc" not in str(s.traceback))
        self.assertLess(grown, 4096, "Python memory grew with the forks")


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class TrackerStates(unittest.TestCase):
    """recap._C.get_values/set_values (recap/csrc/tracker_states.cpp), the whole map in one
    call, against librecap's calls one name at a time on the same host trackers."""

    tearDown, tracker, gen, draw = (NativeFork.tearDown, NativeFork.tracker, NativeFork.gen,
                                    NativeFork.draw)

    def setUp(self):
        NativeFork.setUp(self)
        self.assertTrue(self.ext.bound("states"))

    def ok(self, r):
        """The result of a recap._C tracker-state call, raising recap's error for a failure."""
        st, what, value = r
        if st != self.abi.RECAP_OK:
            raise self.lib.error(st, what)
        return value

    def lookup(self, t, names):
        s = ctypes.c_void_p()
        buf = (ctypes.c_uint8 * 16)()
        self.lib.call("recap_tracker_get_states", t, ctypes.byref(s))
        try:
            out = []
            for n in names:
                self.lib.call("recap_states_lookup", s, n, buf)
                out.append(bytes(buf))
            return out
        finally:
            self.lib.lib().recap_states_free(s)

    def test_get_values_equal_the_c_calls(self):
        for _ in range(20):
            t = self.tracker([self.rng.randrange(1, 1 << 62) for _ in NAMES])
            for _ in range(self.rng.randrange(4)):  # move some states on
                tok = ctypes.c_uint64()
                self.lib.call("recap_tracker_fork", t, self.rng.choice(NAMES), ctypes.byref(tok))
                self.draw(t, self.rng.randrange(1, 100))
                self.lib.call("recap_tracker_unfork", t, tok)
            names = self.rng.sample(NAMES, self.rng.randrange(1, len(NAMES) + 1))
            got = self.ok(self.C.get_values(t.value, [n.decode() for n in names]))
            self.assertTrue(all(x.dtype == torch.uint8 and x.shape == (16,) for x in got))
            self.assertEqual([bytes(x.tolist()) for x in got], self.lookup(t, names))

    def test_set_values_replace_the_map(self):
        for _ in range(20):
            t = self.tracker([1, 2, 3, 4])
            names = self.rng.sample(NAMES, self.rng.randrange(1, len(NAMES) + 1))
            vals = [self.rng.randrange(1 << 64).to_bytes(8, "little") +
                    (4 * self.rng.randrange(1 << 60)).to_bytes(8, "little") for _ in names]
            self.ok(self.C.set_values(t.value, [(n.decode(), v) for n, v in zip(names, vals)]))
            self.assertEqual(self.lookup(t, names), vals)
            s = ctypes.c_void_p()
            n = ctypes.c_size_t()
            self.lib.call("recap_tracker_get_states", t, ctypes.byref(s))
            self.lib.call("recap_states_count", s, ctypes.byref(n))
            self.lib.lib().recap_states_free(s)
            self.assertEqual(n.value, len(names), "the map holds exactly what was set")

    def test_failures_raise_recaps_errors(self):
        t = self.tracker([1, 2, 3, 4])
        st, what, value = self.C.get_values(t.value, ["x", "no-such-state"])
        self.assertEqual((st, what, value),
                         (self.abi.RECAP_ERR_NOT_FOUND, "recap_states_lookup", None))
        bad = (7).to_bytes(8, "little") + (6).to_bytes(8, "little")  # offset not a multiple of 4
        self.assertEqual(self.C.set_values(t.value, [("x", bad)])[:2],
                         (self.abi.RECAP_ERR_MISALIGNED, "recap_states_put"))
        self.assertEqual(self.C.set_values(t.value, [("x", b"short")])[0],
                         self.abi.RECAP_ERR_INVALID_ARG)
        self.assertEqual(len(self.lookup(t, NAMES)), len(NAMES), "refused sets changed nothing")


if __name__ == "__main__":
    unittest.main()
