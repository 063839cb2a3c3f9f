# SPDX-License-Identifier: Apache-2.0
"""recap._C's state handles under threads, without a device: the table's operations (the same
functions torch's default generators get) on test contexts whose CUDA generator was made without
one (recap/csrc/test_entries.cpp says which torch calls need none). Eight C++ threads in random
interleavings (install, current, retain/release, recap's current-retain-install exchange, the
misaligned refusal, the value operations refused without a device, torch's own
graphsafe_set_state/get_state) with state_current's identity checked between rounds; Python
threads calling the table through ctypes and torch's Generator bindings at the same time; then
every reference count back where it was and every object freed with its last reference.

scripts/ci-torch-threads runs this file against builds of recap._C with ThreadSanitizer and with
AddressSanitizer (LeakSanitizer on). RECAP_TEST_SEED seeds the interleavings;
RECAP_THREADS_VALUE_OPS=0 leaves out the value operations (ci-torch-threads does under TSan:
their failing CUDA call runs a static initializer of torch's that throws, which TSan's
guard interception of uninstrumented code can leave waited on forever)."""
import ctypes
import os
import random
import threading
import unittest

try:
    import torch
except ImportError:
    torch = None

SEED = int(os.environ.get("RECAP_TEST_SEED", "0") or 0) or random.randrange(1, 1 << 31)
VALUE_OPS = os.environ.get("RECAP_THREADS_VALUE_OPS") != "0"
HANDLES = 6


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class HandlesUnderThreads(unittest.TestCase):
    def setUp(self):
        from recap import _ext, _abi
        self.C = _ext.module()
        self.assertIsNotNone(self.C, _ext.why)
        if not hasattr(self.C, "_test_context"):  # compiled in for the package's tests only
            if os.environ.get("RECAP_EXT_TESTS") == "1":
                self.fail("RECAP_EXT_TESTS=1 but recap._C has no test entries")
            self.skipTest("recap._C was built without its test entries (RECAP_EXT_TESTS=1)")
        self.abi = _abi
        self.targets, self.watches, self.tables = [], [], {}
        for k in range(3):
            table, context = self.C._test_context()
            handles = [self.C._test_state(1000 * k + i + 1) for i in range(HANDLES)]
            self.targets.append((context, handles))
            self.tables[context] = ctypes.cast(ctypes.c_void_p(table),
                                               ctypes.POINTER(_abi.FrameworkOps)).contents
            self.watches += [self.C._test_watch(h) for h in handles]

    def settle_and_release(self):
        """Installs a fresh object on every context, so no test handle is installed; then each
        handle holds only the test's reference (and its state only the handle's), and the
        table's state_release frees it."""
        for context, handles in self.targets:
            ops = self.tables[context]
            s = self.C._test_state(999_999)
            self.assertEqual(ops.state_install(context, s), self.abi.RECAP_OK)
            self.assertEqual(self.C._test_refs(s), (2, 2), "installed: the context's reference")
            ops.state_release(context, s)
            for h in handles:
                self.assertEqual(self.C._test_refs(h), (1, 1), f"seed {SEED}")
        for context, handles in self.targets:
            for h in handles:
                self.tables[context].state_release(context, h)
        self.assertEqual([w.expired() for w in self.watches], [True] * len(self.watches),
                         f"seed {SEED}: a state object outlived its last reference")

    def test_eight_threads_identity_and_counts(self):
        failures, counts = self.C._test_threads(self.targets, 8, 12, 400, SEED, True, True,
                                                VALUE_OPS)
        self.assertEqual(failures, [], f"seed {SEED}")
        for op in ("install", "current", "retain", "release", "exchange", "misaligned",
                   "torch_set", "torch_get"):
            self.assertGreater(counts[op], 0, op)
        self.assertEqual(counts["checked"], 12 * len(self.targets))
        self.assertGreater(counts["fresh"], 0, "torch's own installs never seen by current")
        if VALUE_OPS and not torch.cuda.is_available():
            # No device: each value operation was refused with torch's message, in its thread.
            self.assertEqual(counts["value_refused"], counts["value"])
        self.settle_and_release()

    def test_recap_ops_only_lend_what_was_installed(self):
        failures, counts = self.C._test_threads(self.targets, 6, 10, 400, SEED + 1, False, True,
                                                VALUE_OPS)
        self.assertEqual(failures, [], f"seed {SEED}")
        self.assertEqual(counts["fresh"], 0)
        self.settle_and_release()

    def test_with_python_threads_through_ctypes_and_torch(self):
        """C++ threads (GIL released) while Python threads call the table through ctypes (which
        releases the GIL around each call) and torch's Generator bindings."""
        stop = threading.Event()
        errors = []

        def python_thread(k):
            rng = random.Random(SEED * 31 + k)
            context, handles = self.targets[k % len(self.targets)]
            ops = self.tables[context]
            gen = self.C._test_generator(context)
            kept = []
            try:
                while not stop.is_set():
                    h = rng.choice(handles)
                    r = rng.randrange(5)
                    if r == 0:
                        self.assertEqual(ops.state_install(context, h), self.abi.RECAP_OK)
                    elif r == 1:
                        p = ctypes.c_void_p()
                        self.assertEqual(ops.state_current(context, ctypes.byref(p)),
                                         self.abi.RECAP_OK)
                        self.assertIsNotNone(p.value)
                    elif r == 2:
                        self.assertEqual(ops.state_retain(context, h), self.abi.RECAP_OK)
                        kept.append(h)
                    elif r == 3 and kept:
                        ops.state_release(context, kept.pop(rng.randrange(len(kept))))
                    elif r == 4:
                        gen.graphsafe_set_state(self.C.state_generator(h))
                        gen.graphsafe_get_state()
            except Exception as e:  # noqa: BLE001 - reported by the test thread
                errors.append(e)
            finally:
                for h in kept:
                    ops.state_release(context, h)

        pool = [threading.Thread(target=python_thread, args=(k,)) for k in range(4)]
        for t in pool:
            t.start()
        try:
            failures, counts = self.C._test_threads(self.targets, 4, 1, 4000, SEED + 2, True,
                                                    False, VALUE_OPS)
        finally:
            stop.set()
            for t in pool:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(failures, [], f"seed {SEED}")
        self.settle_and_release()


if __name__ == "__main__":
    unittest.main()
