# SPDX-License-Identifier: Apache-2.0
"""recap.megatron's CudaRNGStatesTracker.get_states/set_states, one body each over the way into
C its tracker chose (recap/megatron/_tracker.py): recap._C's whole-map calls, or librecap's
calls one state at a time. Without a device: the tracker is given a host C tracker. Random names,
seeds and values (RECAP_TEST_SEED), with values that are not generator states kept beside them;
the oracle is the value a state must hold (a state added with seed s is (s, offset 0); a state
set is the bytes given), and each way reads what the other wrote. A name the C tracker lacks is
recap's typed error through both, and an empty map empties the tracker."""
import ctypes
import os
import random
import unittest

try:
    import torch
except ImportError:
    torch = None

SEED = int(os.environ.get("RECAP_TEST_SEED", "0") or 0) or random.randrange(1, 1 << 31)


class _HostGenerator:
    """What the tracker asks of recap.torch's generator on these paths: whether recap._C runs
    its operations, and the pending torch exception to raise first (none here)."""

    fast = True

    def raise_pending(self, err):
        pass


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class TrackerStates(unittest.TestCase):
    def setUp(self):
        from recap import _abi, _ext, _lib
        import recap.megatron as rm
        from recap.megatron import _tracker
        self.abi, self.lib, self.rm, self.tr = _abi, _lib, rm, _tracker
        self.C = _ext.module()
        self.assertIsNotNone(self.C, _ext.why)
        self.assertTrue(_ext.bound("states"))
        self.rng = random.Random(SEED)

    def tracker(self, backend):
        """A CudaRNGStatesTracker over a new host C tracker, its states through ``backend``."""
        t = self.rm.CudaRNGStatesTracker()
        p = self.abi.TrackerParams(0, None, self.abi.RECAP_DEVICE_HOST, None)
        h = ctypes.c_void_p()
        self.lib.call("recap_tracker_create", ctypes.byref(p), ctypes.byref(h))
        t._handle, t._owner, t._gen, t._states = h, self.tr._TrackerOwner(h), _HostGenerator(), \
            backend
        return t

    def backends(self):
        return [("whole map", self.tr._WholeMap(self.C, False)), ("by name", self.tr._ByName())]

    def names(self, k):
        return [f"s{i}-{self.rng.randrange(1 << 30)}" for i in range(k)]

    @staticmethod
    def value(seed, offset=0):
        return seed.to_bytes(8, "little") + offset.to_bytes(8, "little")

    def assert_states(self, got, want):
        self.assertEqual(list(got), list(want))  # the tracker's order
        for n, v in want.items():
            if isinstance(v, bytes):
                self.assertIsInstance(got[n], torch.Tensor, n)
                self.assertEqual(got[n].dtype, torch.uint8)
                self.assertEqual(bytes(got[n].tolist()), v, n)
            else:
                self.assertIs(got[n], v, n)

    def test_the_choice(self):
        t = self.tracker(None)
        self.assertIsInstance(self.tr._states_in_c(t), self.tr._WholeMap)
        t._gen.fast = False  # torch's generator not run by recap._C: librecap's calls
        self.assertIsInstance(self.tr._states_in_c(t), self.tr._ByName)
        self.assertNotIsInstance(self.tr._states_in_c(t), self.tr._ObjectsByName)
        t.use_cudagraphable_rng = True
        self.assertIsInstance(self.tr._states_in_c(t), self.tr._ObjectsByName)

    def test_added_states_read_back(self):
        for what, b in self.backends():
            for _ in range(20):
                t = self.tracker(b)
                names = self.names(self.rng.randrange(1, 9))
                seeds = self.rng.sample(range(1, 1 << 62), len(names))
                for n, s in zip(names, seeds):
                    t.add(n, s)
                with self.subTest(backend=what):
                    self.assert_states(t.get_states(), {n: self.value(s)
                                                        for n, s in zip(names, seeds)})

    def test_set_then_get_both_ways(self):
        for _ in range(30):
            names = self.names(self.rng.randrange(0, 9))
            want = {}
            for n in names:
                if self.rng.random() < 0.25:  # not a generator state: kept as given
                    want[n] = self.rng.choice([None, object(), "opaque", (1, 2)])
                else:
                    want[n] = self.value(self.rng.randrange(1 << 64),
                                         4 * self.rng.randrange(1 << 40))
            given = {n: torch.tensor(list(v), dtype=torch.uint8) if isinstance(v, bytes) else v
                     for n, v in want.items()}
            (wa, a), (wb, b) = self.rng.sample(self.backends(), 2)
            t = self.tracker(a)
            t.add("before", self.rng.randrange(1, 1 << 62))  # replaced by the set
            t.set_states(given)
            with self.subTest(written=wa, read=wa):
                self.assert_states(t.get_states(), want)
            t._states = b
            with self.subTest(written=wa, read=wb):
                self.assert_states(t.get_states(), want)
            # and back: written through b, read through a
            t.set_states(dict(reversed(list(given.items()))))
            t._states = a
            with self.subTest(written=wb, read=wa):
                self.assert_states(t.get_states(), dict(reversed(list(want.items()))))

    def test_empty_map_empties(self):
        for what, b in self.backends():
            t = self.tracker(b)
            t.add("a", 7)
            t.set_states({})
            with self.subTest(backend=what):
                self.assertEqual(t.get_states(), {})
                t._names.append("a")  # the C map must really be empty
                with self.assertRaises(self.lib.RecapError):
                    t.get_states()

    def test_a_missing_name_is_recap_error_both_ways(self):
        errors = {}
        for what, b in self.backends():
            t = self.tracker(b)
            t.add("present", 3)
            t._names.append("absent")
            with self.assertRaises(self.lib.RecapError) as cm:
                t.get_states()
            errors[what] = type(cm.exception)
            self.assertIn("recap_states_lookup", str(cm.exception))
        self.assertEqual(len(set(errors.values())), 1, errors)


if __name__ == "__main__":
    unittest.main()
