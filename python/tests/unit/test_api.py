# SPDX-License-Identifier: Apache-2.0
"""The package's surface without a GPU or torch: recap.megatron has every public name of
Megatron-Core 0.19's tensor_parallel.random with the same parameters (read from the source, not
imported), C failures become typed exceptions with recap's message, and recap-run's options."""
import ast
import importlib.util
import os
import subprocess
import sys
import unittest

import recap
from recap import _lib

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(os.path.abspath(recap.__file__))  # the copy under test (installed or not)

# Megatron-Core 0.19.2, megatron/core/tensor_parallel/random.py: function -> parameters.
MEGATRON_FUNCTIONS = {
    "_get_cuda_rng_state": ["device", "clone", "graph_safe"],
    "_set_cuda_rng_state": ["new_state", "device", "graph_safe"],
    "convert_cuda_rng_state": ["state", "to_graphable"],
    "get_expert_parallel_rng_tracker_name": [],
    "get_data_parallel_rng_tracker_name": [],
    "get_gtp_remat_rng_tracker_name": ["is_expert"],
    "initialize_rng_tracker": ["use_te_rng_tracker", "inference_rng_tracker",
                               "use_cudagraphable_rng", "force_reset"],
    "get_cuda_rng_tracker": ["use_te_rng_tracker", "inference_rng_tracker",
                             "use_cudagraphable_rng"],
    "get_all_rng_states": [],
    "model_parallel_cuda_manual_seed": ["seed", "te_rng_tracker", "inference_rng_tracker",
                                        "use_cudagraphable_rng", "tp_rank", "ep_rank",
                                        "etp_rank", "force_reset_rng"],
    "is_graph_safe_cuda_rng_tracker": ["cuda_rng_tracker"],
    "_get_all_rng_states": [],
    "_set_all_rng_states": ["cpu_rng_state", "cuda_rng_state", "cuda_rng_state_tracker"],
    "_fork_rng": [],
    "_set_checkpointing": [],
    "_unset_checkpointing": [],
    "is_checkpointing": [],
    "checkpoint": ["function", "distribute_saved_activations", "*args"],
}
MEGATRON_CLASSES = {
    "CudaRNGStatesTracker": {
        "__init__": ["self", "use_cudagraphable_rng", "is_inference_rng_tracker"],
        "is_initialized": ["self"], "reset": ["self"], "get_states": ["self"],
        "set_states": ["self", "states"], "add": ["self", "name", "seed"],
        "fork": ["self", "name"]},
    "CheckpointFunction": {
        "forward": ["ctx", "run_function", "distribute_saved_activations", "*args"],
        "backward": ["ctx", "*args"]},
    "CheckpointWithoutOutputFunction": {
        "forward": ["ctx", "run_function", "checkpoint_without_output_obj", "*args"],
        "backward": ["ctx", "*args"]},
    "CheckpointWithoutOutput": {
        "__init__": ["self", "fp8"], "checkpoint": ["self", "run_function", "*args"],
        "discard_output_and_register_recompute": ["self", "hook_tensor"]},
}
MEGATRON_GLOBALS = ["_MODEL_PARALLEL_RNG_TRACKER_NAME", "_EXPERT_PARALLEL_RNG_TRACKER_NAME",
                    "_DATA_PARALLEL_RNG_TRACKER_NAME", "_GTP_REMAT_RNG_TRACKER_NAME",
                    "_EXPERT_GTP_REMAT_RNG_TRACKER_NAME", "_CUDA_RNG_STATE_TRACKER",
                    "_CUDA_RNG_STATE_TRACKER_INITIALIZED", "IS_CHECKPOINTING", "HAVE_TE"]


def _params(fn):
    a = fn.args
    out = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        out.append("*" + a.vararg.arg)
    out += [x.arg for x in a.kwonlyargs]
    return out


def _module_tree(name):
    with open(os.path.join(PKG, name)) as f:
        return ast.parse(f.read())


class MegatronSurface(unittest.TestCase):
    def setUp(self):
        # recap.megatron is a package: Megatron's names are defined in its __init__ or in one of
        # its modules and imported there (from ._x import ...), which is read as well.
        tree = _module_tree(os.path.join("megatron", "__init__.py"))
        self.functions, self.classes, self.assigned = {}, {}, set()
        self._take(tree, None)
        for imp in tree.body:
            if isinstance(imp, ast.ImportFrom) and imp.level == 1 and imp.module:
                self._take(_module_tree(os.path.join("megatron", imp.module + ".py")),
                           {a.name for a in imp.names})

    def _take(self, tree, names):
        """The functions, classes (with their methods) and assigned names ``tree`` defines at
        its top level (only ``names`` where given)."""
        def wanted(name):
            return names is None or name in names
        for n in tree.body:
            if isinstance(n, ast.FunctionDef) and wanted(n.name):
                self.functions[n.name] = _params(n)
            elif isinstance(n, ast.ClassDef) and wanted(n.name):
                self.classes[n.name] = {m.name: _params(m) for m in n.body
                                        if isinstance(m, ast.FunctionDef)}
        for n in ast.walk(tree):
            if isinstance(n, (ast.Assign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Name) and wanted(t.id):
                        self.assigned.add(t.id)

    def test_every_megatron_function_with_its_parameters(self):
        for name, params in MEGATRON_FUNCTIONS.items():
            self.assertIn(name, self.functions, name)
            self.assertEqual(self.functions[name], params, name)

    def test_every_megatron_class_and_method_with_its_parameters(self):
        for cls, methods in MEGATRON_CLASSES.items():
            self.assertIn(cls, self.classes, cls)
            for m, params in methods.items():
                self.assertEqual(self.classes[cls].get(m), params, f"{cls}.{m}")

    def test_module_globals_other_modules_read(self):
        for g in MEGATRON_GLOBALS:
            self.assertIn(g, self.assigned, g)

    def test_additions_named_by_the_issue(self):
        for name in ("cudagraph_needs_generator_registration",
                     "prime_cuda_rng_states_for_graph_capture", "install"):
            self.assertIn(name, self.functions)
        self.assertIn("CheckpointWithoutOutputManager", self.classes)


class Errors(unittest.TestCase):
    def test_statuses_become_typed_exceptions_with_recap_message(self):
        with self.assertRaises(recap.RecapError) as cm:
            _lib.call("recap_tracker_add", None, b"x", 1)
        self.assertEqual(cm.exception.status, -1)
        self.assertEqual(cm.exception.name, "RECAP_ERR_INVALID_ARG")
        self.assertIn("tracker is NULL", str(cm.exception))
        self.assertIn("recap_tracker_add", str(cm.exception))

    def test_state_and_not_found_errors_have_their_classes(self):
        import ctypes
        from recap import _abi
        p = _abi.TrackerParams(0, None, _abi.RECAP_DEVICE_HOST, None)
        t = ctypes.c_void_p()
        _lib.call("recap_tracker_create", ctypes.byref(p), ctypes.byref(t))
        try:
            tok = ctypes.c_uint64()
            with self.assertRaises(recap.RecapNotFoundError):
                _lib.call("recap_tracker_fork", t, b"nope", ctypes.byref(tok))
            with self.assertRaises(recap.RecapStateError) as cm:
                _lib.call("recap_tracker_unfork", t, 12345)
            self.assertIn("unfork without an open fork", str(cm.exception))
        finally:
            _lib.call("recap_tracker_destroy", t)

    def test_exact_capture_scope_restores_trackers(self):
        """The C scope behind recap.torch.exact_capture, on a host tracker (no GPU): what is
        drawn inside leaves no trace; RECAP_EXACT_CAPTURE=0 restores nothing."""
        import ctypes
        from recap import _abi
        p = _abi.TrackerParams(0, None, _abi.RECAP_DEVICE_HOST, None)
        t, g, scope = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        _lib.call("recap_tracker_create", ctypes.byref(p), ctypes.byref(t))
        _lib.call("recap_tracker_add", t, b"a", 17)
        _lib.call("recap_tracker_generator", t, ctypes.byref(g))
        before = (ctypes.c_uint8 * 16)()
        after = (ctypes.c_uint8 * 16)()
        state = (ctypes.c_uint8 * 16)(*([7] + [0] * 7 + [8] + [0] * 7))
        try:
            _lib.call("recap_generator_get_state", g, before)
            _lib.call("recap_exact_capture_enter", ctypes.byref(scope))
            _lib.call("recap_generator_set_state", g, state)
            _lib.call("recap_exact_capture_leave", scope)
            _lib.call("recap_generator_get_state", g, after)
            self.assertEqual(bytes(before), bytes(after))
            os.environ["RECAP_EXACT_CAPTURE"] = "0"
            try:
                _lib.call("recap_exact_capture_enter", ctypes.byref(scope))
                _lib.call("recap_generator_set_state", g, state)
                _lib.call("recap_exact_capture_leave", scope)
            finally:
                del os.environ["RECAP_EXACT_CAPTURE"]
            _lib.call("recap_generator_get_state", g, after)
            self.assertEqual(bytes(after), bytes(state))
        finally:
            _lib.call("recap_tracker_destroy", t)

    def test_abi_version(self):
        self.assertEqual(recap.abi_version(), (1, 6))


class RecapRun(unittest.TestCase):
    def run_tool(self, *args):
        # The child imports the recap this test imported (installed or the source tree).
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in
                                                      env.get("PYTHONPATH", "").split(os.pathsep)
                                                      if p])
        return subprocess.run([sys.executable, "-m", "recap.run", *args], capture_output=True,
                              text=True, cwd=HERE, env=env)

    def test_help_unknown_option_and_missing_command(self):
        r = self.run_tool("--help")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("usage: recap-run"), r.stdout)
        self.assertEqual(r.stderr, "")
        r = self.run_tool("--version")
        self.assertEqual((r.returncode, r.stdout, r.stderr),
                         (0, f"recap-run {recap.__version__}\n", ""))
        self.assertEqual(self.run_tool("--bogus").returncode, 2)
        self.assertEqual(self.run_tool().returncode, 2)

    def test_the_command_runs_preloaded_with_the_autoload_path(self):
        code = ("import os,sys; print(os.environ['LD_PRELOAD'].split(':')[0]); "
                "print(sys.path[1] if sys.path[0]=='' else sys.path[0])")
        r = self.run_tool(sys.executable, "-c", code)
        self.assertEqual(r.returncode, 0, r.stderr)
        first, path0 = r.stdout.split()
        self.assertTrue(os.path.samefile(first, recap.preload_path()))
        self.assertEqual(os.path.basename(first), "librecap-preload.so")
        self.assertTrue(path0.endswith(os.path.join("recap", "_autoload")), path0)
        r = self.run_tool("--no-preload", sys.executable, "-c",
                          "import os; print(os.environ.get('LD_PRELOAD', ''))")
        self.assertEqual(r.stdout.strip(), "")

    def test_the_site_folder_is_not_put_on_the_childs_path(self):
        # Only the autoload folder (sitecustomize alone) goes on PYTHONPATH; recap's own site
        # folder is appended to sys.path by the sitecustomize only where recap is not
        # importable otherwise, and never ahead of the job's own entries.
        root = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))
        code = ("import os, sys, recap; print(os.environ['PYTHONPATH']); "
                "print(os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__))))")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); "
                            "from recap import run; sys.exit(run.main(['--no-preload', %r, "
                            "'-c', %r]))" % (root, sys.executable, code)],
                           capture_output=True, text=True, cwd=HERE, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        pythonpath, found = r.stdout.split()
        entries = pythonpath.split(os.pathsep)
        self.assertEqual(len(entries), 1, entries)
        self.assertTrue(os.path.samefile(entries[0], os.path.join(root, "recap", "_autoload")))
        self.assertTrue(os.path.samefile(found, root))


class RecapRunStartsLight(unittest.TestCase):
    """Under recap-run a Python process imports nothing of torch's or recap's at start-up: recap
    installs itself once the process's first import of torch or megatron has finished."""

    def run_child(self, code, extra_path=()):
        root = os.path.dirname(os.path.dirname(os.path.abspath(recap.__file__)))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.pop("RECAP_MEGATRON", None)
        env["PYTHONPATH"] = os.pathsep.join([root, *extra_path])
        return subprocess.run([sys.executable, "-m", "recap.run", "--no-preload",
                               sys.executable, "-c", code],
                              capture_output=True, text=True, cwd=HERE, env=env, timeout=300)

    def test_nothing_heavy_at_start(self):
        r = self.run_child("import sys; print(sorted(m for m in ('torch', 'recap', "
                           "'recap.megatron', 'recap.torch', 'numpy') if m in sys.modules))")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "[]"), r.stderr)

    @unittest.skipIf(importlib.util.find_spec("torch") is None and
                     os.environ.get("RECAP_REQUIRE_TORCH") != "1", "torch is not installed")
    def test_installed_when_torch_is_imported(self):
        r = self.run_child("import sys; print('recap.megatron' in sys.modules); import torch; "
                           "import recap.torch as rt; print('recap.megatron' in sys.modules, "
                           "bool(rt._orig))")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False", "True", "True"])

    @unittest.skipIf(importlib.util.find_spec("torch") is None and
                     os.environ.get("RECAP_REQUIRE_TORCH") != "1", "torch is not installed")
    def test_after_the_outermost_import(self):
        # A stand-in megatron that imports torch: recap installs after megatron's import has
        # finished, not in the middle of it (when torch's nested import ends).
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "megatron"))
            with open(os.path.join(tmp, "megatron", "__init__.py"), "w") as f:
                f.write("import sys, torch\n"
                        "DURING = 'recap.megatron' in sys.modules\n")
            r = self.run_child("import sys, megatron; print(megatron.DURING, "
                               "'recap.megatron' in sys.modules)", extra_path=(tmp,))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False", "True"])

    def test_off_with_recap_megatron_0(self):
        r = subprocess.run([sys.executable, "-m", "recap.run", "--no-megatron", "--no-preload",
                            sys.executable, "-c", "import sys; print(len([f for f in "
                            "sys.meta_path if type(f).__name__ == '_FirstImport']))"],
                           capture_output=True, text=True, cwd=HERE, timeout=300,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
                               os.path.abspath(recap.__file__)))))
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "0"), r.stderr)


if __name__ == "__main__":
    unittest.main()
