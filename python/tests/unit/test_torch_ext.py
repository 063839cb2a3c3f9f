# SPDX-License-Identifier: Apache-2.0
"""recap._C, recap.torch's compiled extension, where no GPU is needed: it was built for the
running torch and loads; it is refused, with one message naming both versions, under another
torch (by recap/_ext.py before the import, and by the module itself); RECAP_TORCH_EXT=0 and an
install without it run the Python operations and say so; without torch, ``import recap.torch``
raises one ImportError naming what to install. The operations themselves need a CUDA device:
python/tests/gpu (gpu-check) drives them against torch's own API.

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
        if os.environ.get("RECAP_EXT_TESTS") != "1":  # a shipped build: no test entries in it
            self.assertFalse([n for n in dir(_ext.module()) if n.startswith("_test")])
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
            self.assertIn(f"built for torch {torch.__version__}, not the running torch {other}",
                          module)
            self.assertIn("reinstall recap", module)
            self.assertEqual(r.stderr.count("recap WARN"), 1, r.stderr)
            self.assertIn("Python operations", r.stderr)

    def test_the_compiled_module_checks_too(self):
        # Imported by its own name under another torch (one it still links with), the compiled
        # module's own check speaks.
        r = run_py("import torch; torch.__version__ = '2.99.0'\n"
                   "try:\n"
                   "    import recap._C_torch\n"
                   "except ImportError as e:\n"
                   "    print(e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), f"recap._C was built for torch {torch.__version__}, "
                         "not the running torch 2.99.0")

    def test_refused_before_the_linker_runs(self):
        """A recap._C built for another torch that cannot even link here (an undefined symbol,
        as a 2.11 build under 2.14 has) gives the version message, never the linker's."""
        import glob
        import shutil
        import tempfile
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self.skipTest("no C compiler to make an unlinkable module")
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(PKG_PARENT, "recap"), os.path.join(tmp, "recap"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            built = glob.glob(os.path.join(tmp, "recap", "_C_torch*.so"))
            self.assertEqual(len(built), 1, built)
            src = os.path.join(tmp, "unlinkable.c")
            with open(src, "w") as f:
                f.write("extern void recap_symbol_of_another_torch(void);\n"
                        "void *PyInit__C_torch(void) { recap_symbol_of_another_torch(); "
                        "return 0; }\n")
            subprocess.run([cc, "-shared", "-fPIC", "-o", built[0], src], check=True)
            with open(os.path.join(tmp, "recap", "_build.py"), "w") as f:
                f.write("TORCH_VERSION = '2.10.0'\n")
            code = ("try:\n"
                    "    import recap._C\n"
                    "except ImportError as e:\n"
                    "    print(e)\n"
                    "import recap.torch as rt\n"
                    "print(rt.backend()['ops'])\n")
            r = run_py(code, env={"PYTHONPATH": tmp})
            self.assertEqual(r.returncode, 0, r.stderr)
            first, ops = r.stdout.strip().splitlines()
            self.assertIn(f"built for torch 2.10.0, not the running torch {torch.__version__}",
                          first)
            self.assertNotIn("undefined symbol", r.stdout + r.stderr)
            self.assertEqual(ops, "python")
            # The same tree with the record matching: the linker's error is what stops it, so
            # the module above was indeed one that cannot link.
            with open(os.path.join(tmp, "recap", "_build.py"), "w") as f:
                f.write(f"TORCH_VERSION = {torch.__version__!r}\n")
            r = run_py(code, env={"PYTHONPATH": tmp})
            self.assertIn("undefined symbol", r.stdout + r.stderr)

    def test_another_torch_is_said_by_default_in_one_line(self):
        # No RECAP_LOG: one warning line naming both torch releases and the command that fixes
        # it for how this copy was installed; RECAP_LOG=off silences it.
        code = ("import torch; torch.__version__ = '2.99.0'\n"
                "import recap.torch as rt\n"
                "from recap import _ext\n"
                "assert _ext.module() is None and _ext.module() is None\n"
                "print(_ext.fix_command())\n")
        env = {k: v for k, v in os.environ.items() if k != "RECAP_LOG"}
        env["PYTHONPATH"] = PKG_PARENT
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        ours = [line for line in r.stderr.splitlines() if " recap " in line]
        self.assertEqual(len(ours), 1, r.stderr)
        line, fix = ours[0], r.stdout.strip()
        self.assertIn(" recap WARN ", line)
        self.assertIn(f"built for torch {torch.__version__}, not the running torch 2.99.0", line)
        self.assertIn(fix, line)
        self.assertIn("-m pip install --no-build-isolation", fix)
        import site
        if os.path.abspath(PKG_PARENT) not in map(os.path.abspath, site.getsitepackages()):
            from recap import _torch_build
            if _torch_build._distribution() is not None:  # installed with --target, as CI does
                self.assertIn(f"--target {PKG_PARENT}", fix)
        env["RECAP_LOG"] = "off"
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(" recap ", r.stderr)

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


def _need_test_entries(testcase, module):
    """recap._C's _test_* entries are compiled in only for the package's own tests
    (RECAP_EXT_TESTS=1 at install; never in a shipped wheel): skip without them, unless
    RECAP_EXT_TESTS=1 here says they must be there."""
    if not hasattr(module, "_test_state"):
        if os.environ.get("RECAP_EXT_TESTS") == "1":
            testcase.fail("RECAP_EXT_TESTS=1 but recap._C has no test entries")
        testcase.skipTest("recap._C was built without its test entries (RECAP_EXT_TESTS=1)")


def _major_minor():
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class StateLayout(unittest.TestCase):
    """The generator-state layout recap._C was compiled for (csrc/torch_access.h) is this
    torch's, and what the extension reads through it is what torch's own API says: seeds,
    offsets and state identity round-trip on CUDA generators made without a device."""

    def setUp(self):
        from recap import _ext
        self.C = _ext.module()
        self.assertIsNotNone(self.C, _ext.why)
        self.rng = __import__("random").Random(int(os.environ.get("RECAP_TEST_SEED", "0") or 0)
                                               or None)

    def test_layout_of_this_torch(self):
        v = _major_minor()
        want = ("shared-slot" if v < (2, 12) else "per-capture" if v < (2, 14)
                else "per-capture-lazy")
        self.assertEqual(self.C.STATE_LAYOUT, want)
        import recap.torch as rt
        self.assertEqual(rt.backend()["layout"], want)
        self.assertEqual(rt.needs_registration(), want != "per-capture-lazy")

    def test_fields_read_are_torchs(self):
        _need_test_entries(self, self.C)
        for _ in range(40):
            seed = self.rng.randrange(1 << 64)
            offset = self.rng.randrange(1 << 62) * 4
            gen = self.C.state_generator(self.C._test_state(seed, offset))
            self.assertEqual(gen.initial_seed(), seed)  # torch's API reads the state's seed
            addr, s, off, records = self.C._test_state_fields(gen)
            self.assertEqual((addr, s, off, records), (self.C.state_id(gen), seed, offset, 0))
            # torch swaps the state in (graphsafe_set_state): the extension reads the new one.
            other_seed = self.rng.randrange(1 << 64)
            other = self.C.state_generator(self.C._test_state(other_seed, 4))
            gen.graphsafe_set_state(other)
            addr2, s2, off2, _ = self.C._test_state_fields(gen)
            self.assertEqual((addr2, s2, off2), (self.C.state_id(other), other_seed, 4))
            self.assertEqual(gen.initial_seed(), other_seed)
            self.assertEqual(self.C.state_id(gen.graphsafe_get_state()), addr2)


@unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                 "torch is not installed")
class GraphHooks(unittest.TestCase):
    """recap/_graph_hooks.py: torch's own lifecycle hooks where torch has them (nothing of
    CUDAGraph patched for them, other consumers' hooks still fire), the shim's same points in
    torch 2.14's order elsewhere; the before-points on any torch; removal puts everything back.
    Driven through a stand-in graph class (no device needed)."""

    def setUp(self):
        from recap import _graph_hooks
        self.h = _graph_hooks
        self.real = torch.cuda.graphs.CUDAGraph
        self.calls = []
        calls = self.calls

        class Graph:
            _has_graph_exec = False

            def capture_begin(self, *a, **k):
                calls.append("torch capture_begin")
                if hooked:
                    _fire("capture_start", self)

            def capture_end(self):
                calls.append("torch capture_end")
                if hooked:
                    _fire("capture_end", self)
                    self.instantiate()
                else:
                    self._has_graph_exec = True

            def instantiate(self):
                calls.append("torch instantiate")
                self._has_graph_exec = True
                if hooked:
                    _fire("instantiate", self)

        hooked = self.h.torch_has_hooks()
        g = torch.cuda.graphs

        def _fire(point, graph):
            g._run_global_hooks(getattr(g, {"capture_start": "_global_capture_start_hooks",
                                            "capture_end": "_global_capture_end_hooks",
                                            "instantiate": "_global_instantiate_hooks"}[point]),
                                graph)

        self.Graph = Graph
        torch.cuda.graphs.CUDAGraph = Graph

    def tearDown(self):
        torch.cuda.graphs.CUDAGraph = self.real

    def record(self, what):
        return lambda graph: self.calls.append(what)

    def test_points_in_order_and_removal(self):
        hs = [self.h.on(p, self.record(p)) for p in self.h.POINTS]
        hs += [self.h.before(b, self.record("before " + b)) for b in self.h.BEFORE]
        hs.append(self.h.on("capture_start", lambda graph: 1 / 0))  # swallowed, as torch's are
        g = self.Graph()
        g.capture_begin()
        g.capture_end()
        self.assertEqual(self.calls, [
            "before capture_begin", "torch capture_begin", "capture_start",
            "before capture_end", "torch capture_end", "capture_end",
            "torch instantiate", "instantiate"] if self.h.torch_has_hooks() else [
            "before capture_begin", "torch capture_begin", "capture_start",
            "before capture_end", "torch capture_end", "capture_end", "instantiate"])
        for h in hs:
            h.remove()
        self.assertEqual(self.h.patched(), [])
        for name in ("capture_begin", "capture_end", "instantiate"):
            self.assertNotIn("_recap_hook", vars(getattr(self.Graph, name)), name)
        del self.calls[:]
        g.capture_begin()
        self.assertEqual(self.calls, ["torch capture_begin"])

    def test_patches_only_where_no_hook_does_it(self):
        h = self.h.on("capture_start", self.record("x"))
        if self.h.torch_has_hooks():
            self.assertEqual(self.h.patched(), [])
            other = torch.cuda.graphs.register_graph_capture_start_hook(self.record("profiler"))
            self.Graph().capture_begin()
            self.assertEqual(self.calls, ["torch capture_begin", "x", "profiler"])
            other.remove()
        else:
            self.assertEqual(self.h.patched(), ["capture_begin", "capture_end", "instantiate"])
        h.remove()
        b = self.h.before("capture_end", self.record("y"))
        self.assertEqual(self.h.patched(), ["capture_end"])
        b.remove()
        self.assertEqual(self.h.patched(), [])

    def test_instantiate_point_of_a_kept_graph(self):
        # torch before 2.14 instantiates a kept graph only when asked: the point fires then.
        hs = [self.h.on("instantiate", self.record("instantiate"))]
        try:
            g = self.Graph()
            g.instantiate()
            self.assertEqual(self.calls, ["torch instantiate", "instantiate"])
        finally:
            for h in hs:
                h.remove()

    def test_recap_torch_installs_through_them(self):
        import recap.torch as rt
        torch.cuda.graphs.CUDAGraph = self.real
        was = bool(rt._orig)  # importing recap.megatron (another test) installs it
        rt.uninstall()
        self.addCleanup(lambda: was and rt.install())
        self.assertEqual(self.h.patched(), [])
        rt.install()
        try:
            b = rt.backend()
            self.assertEqual(b["hooks"], "torch" if self.h.torch_has_hooks() else "shim")
            want = set()
            if not self.h.torch_has_hooks():
                want |= {"capture_begin", "capture_end", "instantiate"}
            if rt.needs_registration():
                want.add("capture_begin")
            if b["replay"]:
                want |= {"capture_end", "replay"}
            self.assertEqual(set(b["patched"]), want)
            if self.h.torch_has_hooks():
                self.assertIn(rt._on_capture_start,
                              list(torch.cuda.graphs._global_capture_start_hooks.values()))
        finally:
            rt.uninstall()
        self.assertEqual(self.h.patched(), [])
        self.assertEqual([n for n in ("capture_begin", "capture_end", "replay", "instantiate")
                          if "_recap_hook" in vars(vars(self.real).get(n, lambda: 0))], [])
        if self.h.torch_has_hooks():
            self.assertNotIn(rt._on_capture_start,
                             list(torch.cuda.graphs._global_capture_start_hooks.values()))


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
    def setUp(self):
        # -S: no site-packages, so no torch; the package comes from PYTHONPATH: a copy of it
        # alone (where it is installed, its folder holds torch too).
        import shutil
        import tempfile
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        shutil.copytree(os.path.join(PKG_PARENT, "recap"), os.path.join(self.tmp, "recap"),
                        ignore=shutil.ignore_patterns("__pycache__"))

    def test_import_names_what_to_install(self):
        for mod in ("recap.torch", "recap.megatron"):
            r = run_py(f"import {mod}", env={"PYTHONPATH": self.tmp}, flags=("-S",))
            self.assertNotEqual(r.returncode, 0)
            last = r.stderr.strip().splitlines()[-1]
            self.assertTrue(last.startswith("ImportError: recap.torch needs PyTorch"), last)
            self.assertIn("pip install torch", last)
            self.assertNotIn("During handling", r.stderr, "one error, not a chain")

    def test_the_rest_of_the_package_needs_no_torch(self):
        r = run_py("import recap, recap._lib, recap._abi, recap.run; print('ok')",
                   env={"PYTHONPATH": self.tmp}, flags=("-S",))
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr)


if __name__ == "__main__":
    unittest.main()
