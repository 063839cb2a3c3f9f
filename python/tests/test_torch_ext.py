# SPDX-License-Identifier: Apache-2.0
"""recap._C, recap.torch's compiled extension, where no GPU is needed: it was built for the
running torch and loads; it is refused, with one message naming both versions, under another
torch (by recap/_ext.py before the import, and by the module itself); RECAP_TORCH_EXT=0 and an
install without it run the Python operations and say so; without torch, ``import recap.torch``
raises one ImportError naming what to install. The operations themselves need a CUDA device:
tests/python (gpu-check) drives them against torch's own API.

RECAP_REQUIRE_TORCH=1 (CI) makes a missing torch a failure rather than a skip."""
import os
import subprocess
import sys
import unittest

import recap

try:
    import torch
except ImportError:
    torch = None

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))


def run_py(code, env=None, flags=()):
    e = dict(os.environ, PYTHONPATH=PKG_PARENT, RECAP_LOG="warn")
    e.update(env or {})
    return subprocess.run([sys.executable, *flags, "-c", code], env=e, capture_output=True,
                          text=True, timeout=300)


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class TorchExtension(unittest.TestCase):
    def test_built_for_the_running_torch_and_loads(self):
        from recap import _ext
        self.assertEqual(_ext.built_for(), torch.__version__,
                         "recap/_build.py records the torch it was built against")
        m = _ext.module()
        self.assertIsNotNone(m, _ext.why)
        self.assertEqual(m.TORCH_VERSION, torch.__version__)
        self.assertEqual(_ext.why, "")
        import recap.torch as rt
        b = rt.backend()
        self.assertEqual((b["ops"], b["built_for"], b["torch"]),
                         ("extension", torch.__version__, torch.__version__))
        # On the versions whose replay was checked against torch's: 2.11 here.
        major_minor = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        self.assertEqual(m.REPLAY_VERIFIED, major_minor == (2, 11))

    def test_refused_under_another_torch(self):
        for other in ("2.99.0", torch.__version__ + "x", "1.0"):
            r = run_py("import torch; torch.__version__ = %r\n"
                       "from recap import _ext\n"
                       "assert _ext.module() is None\n"
                       "print(_ext.why)\n"
                       "try:\n"
                       "    import recap._C\n"
                       "except ImportError as e:\n"
                       "    print('module:', e)\n"
                       "else:\n"
                       "    print('module: loaded')\n" % other)
            self.assertEqual(r.returncode, 0, r.stderr)
            why, module = r.stdout.strip().splitlines()
            self.assertIn(f"built for torch {torch.__version__}", why)
            self.assertIn(f"not the running torch {other}", why)
            self.assertEqual(module, f"module: recap._C was built for torch {torch.__version__}"
                             f", not the running torch {other}")
            self.assertEqual(r.stderr.count("recap WARN"), 1, r.stderr)
            self.assertIn("Python operations", r.stderr)

    def test_turned_off_says_so_once(self):
        r = run_py("import recap.torch as rt\n"
                   "from recap import _ext\n"
                   "assert _ext.module() is None and _ext.module() is None\n"
                   "print(rt.backend()['ops'], rt.backend()['why'])",
                   env={"RECAP_TORCH_EXT": "0"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "python RECAP_TORCH_EXT=0")
        self.assertEqual(r.stderr.count("recap WARN"), 1, r.stderr)

    def test_silent_without_recap_log(self):
        r = run_py("from recap import _ext; assert _ext.module() is None",
                   env={"RECAP_TORCH_EXT": "0", "RECAP_LOG": ""})
        self.assertEqual((r.returncode, r.stdout), (0, ""))
        self.assertNotIn("recap", r.stderr)  # (torch may warn of its own at import)


class _Dev:
    def __init__(self, index):
        self.type, self.index = "cuda", index


class _State:
    def __init__(self, index):
        self.device = _Dev(index)


class _Graph:
    def __init__(self, refuse_at=None):
        self.got, self.refuse_at = [], refuse_at

    def register_generator_state(self, s):
        if self.refuse_at is not None and len(self.got) == self.refuse_at:
            raise RuntimeError("torch changed its mind")
        self.got.append(s)


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class ErrorsLeaveNoCycles(unittest.TestCase):
    """An operation's exception re-raised by the Python operations (TorchGenerator.raise_pending)
    leaves nothing for the cyclic collector: the caller's frames and what they hold are freed
    by reference counting once the exception is handled, not later at whatever moment the
    collector runs (inside another CUDA graph capture, where freeing a graph breaks it)."""

    def test_the_callers_objects_go_with_the_exception(self):
        import gc
        import random
        import weakref

        import recap.torch as rt
        from recap._lib import RecapError, RecapStateError
        rng = random.Random(int(os.environ.get("RECAP_TEST_SEED", "7")))

        class Held:  # what a caller's frame holds (a CUDAGraph being captured, its outputs)
            pass

        g = rt.TorchGenerator.__new__(rt.TorchGenerator)  # no device needed for the path
        g._ext = None
        kinds = (RuntimeError, ValueError, KeyError, lambda m: RecapStateError(-11, m))
        was = gc.isenabled()
        gc.disable()
        try:
            for _ in range(20):
                g._error = rng.choice(kinds)(f"torch's error {rng.random()}") \
                    if rng.random() < 0.8 else None

                def caller():
                    held = Held()
                    try:
                        g.raise_pending(RecapError(-11, "the status", "recap_tracker_fork"))
                    except Exception as e:  # noqa: BLE001 - which one is checked below
                        return weakref.ref(held), e  # (the name goes as the block is left)
                    return weakref.ref(held), None

                expected = g._error
                ref, got = caller()
                self.assertIsNone(g._error)
                if expected is not None:  # torch's own exception, caused by recap's status
                    self.assertIs(got, expected)
                    got = got.__cause__
                self.assertIsInstance(got, RecapError)
                self.assertEqual((got.status, got.call), (-11, "recap_tracker_fork"))
                del got, expected
                self.assertIsNone(ref(), "the caller's frame outlived the exception")
        finally:
            if was:
                gc.enable()

    def test_an_error_kept_for_later_keeps_no_frames(self):
        """An operation's exception is kept until the call that led to it re-raises it, or
        longer where recap goes on without it (a failed undo): what it keeps must not include
        the caller's stack."""
        import gc
        import random
        import weakref

        import recap.torch as rt
        rng = random.Random(int(os.environ.get("RECAP_TEST_SEED", "7")))

        class Held:
            pass

        g = rt.TorchGenerator.__new__(rt.TorchGenerator)
        g._ext, g._error = None, None
        was = gc.isenabled()
        gc.disable()
        try:
            for _ in range(20):
                msg = f"torch's error {rng.random()}"

                def failing(*_args):
                    raise RuntimeError(msg)

                op = g._guard(failing)

                def caller():  # as the C call into the table runs inside the caller's frame
                    held = Held()
                    self.assertEqual(op(None, None), rt._ERR)
                    return weakref.ref(held)

                ref = caller()
                self.assertIsInstance(g._error, RuntimeError)
                self.assertEqual(str(g._error), msg)  # torch's message kept
                self.assertIsNone(ref(), "a kept error holds the caller's frame")
                g._error = None
        finally:
            if was:
                gc.enable()


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class AutomaticRegistration(unittest.TestCase):
    """recap.torch.register_with, which install()'s capture_begin calls: a state goes only to
    graphs of its own device; a refusal or a missing call turns registration off, said once,
    and never reaches the capture."""

    def setUp(self):
        import recap.torch as rt
        self.rt = rt
        rt.registration_problem = ""

    tearDown = setUp

    def test_only_states_of_the_capture_device(self):
        import random
        rng = random.Random(int(os.environ.get("RECAP_TEST_SEED", "7")))
        for _ in range(50):
            states = [_State(rng.randrange(4)) for _ in range(rng.randrange(12))]
            dev = rng.randrange(4)
            g = _Graph()
            n = self.rt.register_with(g, states, device=dev)
            want = [s for s in states if s.device.index == dev]
            self.assertEqual(g.got, want)
            self.assertEqual(n, len(want))
            self.assertEqual(self.rt.registration_problem, "")

    def test_a_refusal_turns_registration_off_once(self):
        states = [_State(0) for _ in range(5)]
        g = _Graph(refuse_at=2)
        self.assertEqual(self.rt.register_with(g, states, device=0), 2)
        self.assertIn("torch changed its mind", self.rt.registration_problem)
        g2 = _Graph()
        self.assertEqual(self.rt.register_with(g2, states, device=0), 0)
        self.assertEqual(g2.got, [], "nothing more is registered once torch refused")
        self.assertEqual(self.rt.backend()["registration"], self.rt.registration_problem)

    def test_a_torch_without_the_call(self):
        self.assertEqual(self.rt.register_with(object(), [_State(0)], device=0), 0)
        self.assertIn("no CUDAGraph.register_generator_state", self.rt.registration_problem)

    def test_said_once_on_stderr_with_recap_log(self):
        r = run_py("import recap.torch as rt\n"
                   "class G:\n"
                   "    def register_generator_state(self, s): raise TypeError('no')\n"
                   "class D: type, index = 'cuda', 0\n"
                   "class S: device = D()\n"
                   "for _ in range(3): rt.register_with(G(), [S()], device=0)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("automatic registration is off"), 1, r.stderr)


class WithoutTorch(unittest.TestCase):
    def test_import_names_what_to_install(self):
        # -S: no site-packages, so no torch; the package comes from PYTHONPATH.
        for mod in ("recap.torch", "recap.megatron"):
            r = run_py(f"import {mod}", flags=("-S",))
            self.assertNotEqual(r.returncode, 0)
            last = r.stderr.strip().splitlines()[-1]
            self.assertTrue(last.startswith("ImportError: recap.torch needs PyTorch"), last)
            self.assertIn("pip install torch", last)
            self.assertNotIn("During handling", r.stderr, "one error, not a chain")

    def test_the_rest_of_the_package_needs_no_torch(self):
        r = run_py("import recap, recap._lib, recap._abi, recap.run; print('ok')", flags=("-S",))
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr)


if __name__ == "__main__":
    unittest.main()
