# SPDX-License-Identifier: Apache-2.0
"""recap.torch's check that a graph's first replay computes what the eager step computes
(recap/_verify.py), without a device: the bit-for-bit comparison on random tensors of every
kind, the attention-backend recorder on torch's CPU dispatcher (its choice forced to differ
between the "eager" and the "capture" calls with torch.nn.attention.sdpa_kernel), the report
and what a mismatch does, the phases' scopes and module buffers, and make_graphed_callables'
training step (outputs, input and parameter gradients) on CPU modules. The captures themselves
need a GPU: python/tests/gpu/graphs_verify.py (scripts/gpu-check)."""
import contextlib
import os
import random
import threading
import unittest
import warnings

try:
    import torch
    import recap.torch  # noqa: F401 - installs the check's scope and states (recap._verify's port)
except ImportError:
    torch = None

SEED = int(os.environ.get("RECAP_TEST_SEED", "0") or 0) or random.randrange(1, 1 << 31)
NEED_TORCH = unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                             "torch is not installed")


def _random_tensor(rng, dtype):
    shape = [rng.randrange(1, 7) for _ in range(rng.randrange(0, 4))]
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in (torch.int64, torch.int32):
        return torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randn(shape, generator=g).to(dtype)


@NEED_TORCH
class Compare(unittest.TestCase):
    DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "bool",
              "complex64")

    def setUp(self):
        from recap import _verify
        self.v = _verify
        self.rng = random.Random(SEED)

    def test_equal_tensors_differ_nowhere_nans_included(self):
        for _ in range(50):
            dtype = getattr(torch, self.rng.choice(self.DTYPES))
            a = _random_tensor(self.rng, dtype)
            if a.is_floating_point() and a.numel():
                a.view(-1)[self.rng.randrange(a.numel())] = float("nan")
            self.assertEqual(self.v.compare([("t", a)], [("t", a.clone())]), [], f"seed {SEED}")

    def test_changed_elements_are_counted_exactly(self):
        for _ in range(50):
            dtype = getattr(torch, self.rng.choice(self.DTYPES))
            a = _random_tensor(self.rng, dtype)
            if a.numel() == 0:
                continue
            b = a.clone()
            flat = b.view(-1)
            picks = self.rng.sample(range(a.numel()), self.rng.randrange(1, a.numel() + 1))
            for k in picks:
                if dtype == torch.bool:
                    flat[k] = not bool(flat[k])
                elif dtype.is_complex:
                    flat[k] = flat[k] + 1j
                elif dtype.is_floating_point:
                    flat[k] = -flat[k] if flat[k] != 0 else 1.0
                else:
                    flat[k] = flat[k] + 1
            got = self.v.compare([("out", a)], [("out", b)])
            self.assertEqual(len(got), 1, f"seed {SEED}: {got}")
            self.assertIn(f"{len(picks)} of {a.numel()} elements differ", got[0], f"seed {SEED}")
            self.assertTrue(got[0].startswith("out ("), got[0])

    def test_bits_not_values(self):
        a, b = torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0])
        self.assertIn("1 of 2 elements differ", self.v.compare([("z", a)], [("z", b)])[0])
        n1 = torch.tensor([float("nan")])
        n2 = n1.view(torch.int32).add(1).view(torch.float32)  # another NaN's bits
        self.assertEqual(len(self.v.compare([("n", n1)], [("n", n2)])), 1)

    def test_shape_dtype_presence_and_count(self):
        a = torch.zeros(3)
        self.assertIn("[3] float32 eagerly, [4] float32",
                      self.v.compare([("x", a)], [("x", torch.zeros(4))])[0])
        self.assertIn("float32 eagerly, [3] float64",
                      self.v.compare([("x", a)], [("x", a.double())])[0])
        self.assertIn("none eagerly, a tensor", self.v.compare([("g", None)], [("g", a)])[0])
        self.assertEqual(self.v.compare([("g", None)], [("g", None)]), [])
        self.assertIn("gave 2 tensors, the replay 1",
                      self.v.compare([("x", a), ("y", a)], [("x", a)])[0])

    def test_largest_difference(self):
        a = torch.tensor([1.0, 2.0, 3.0])
        b = torch.tensor([1.0, 2.5, 3.0])
        self.assertIn("largest difference 0.5", self.v.compare([("x", a)], [("x", b)])[0])

    def test_mode(self):
        m = self.v.mode
        old = os.environ.pop("RECAP_VERIFY_GRAPHS", None)
        try:
            self.assertEqual(m(None), "raise")
            self.assertEqual((m(True), m(False), m("warn"), m("off")),
                             ("raise", "off", "warn", "off"))
            for env, want in (("warn", "warn"), ("0", "off"), ("raise", "raise"), ("", "raise")):
                os.environ["RECAP_VERIFY_GRAPHS"] = env
                self.assertEqual(m(None), want, env)
            with self.assertRaises(ValueError):
                m("sometimes")  # an argument that is not one: the caller's error
        finally:
            os.environ.pop("RECAP_VERIFY_GRAPHS", None)
            if old is not None:
                os.environ["RECAP_VERIFY_GRAPHS"] = old


@NEED_TORCH
class Sdpa(unittest.TestCase):
    def setUp(self):
        from recap import _verify
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.v, self.F, self.B, self.pin = _verify, F, SDPBackend, sdpa_kernel
        self.phase = {"capture": False}
        self.rng = random.Random(SEED)

    def recorder(self):
        return self.v.SdpaRecorder(capturing=lambda: self.phase["capture"])

    def qkv(self):
        b, h, s, d = (self.rng.randrange(1, 4), self.rng.randrange(1, 5),
                      self.rng.randrange(2, 17), self.rng.choice((8, 16, 32)))
        q = torch.randn(b, h, s, d)
        return q, torch.randn(b, h, s, d), torch.randn(b, h, s, d)

    def one_finding(self, rec, q, k, v):
        """The backend torch runs eagerly for q, k, v and the recorder's findings, asserted to be
        one; None for the findings where that backend is MATH (then nothing may differ)."""
        eager = self.B(int(torch._fused_sdp_choice(q, k, v, None, 0.0, False))).name
        found = rec.findings()
        if eager == "MATH":
            self.assertEqual(found, [], "this torch runs MATH here anyway: nothing differs")
            return eager, None
        self.assertEqual(len(found), 1, found)
        return eager, found

    def test_a_backend_that_differs_under_capture_is_named_with_the_pin(self):
        orig = self.F.scaled_dot_product_attention
        q, k, v = self.qkv()
        rec = self.recorder()
        with rec:
            want = orig(q, k, v)
            self.assertTrue(torch.equal(self.F.scaled_dot_product_attention(q, k, v), want))
            self.phase["capture"] = True
            with self.pin(self.B.MATH):
                self.F.scaled_dot_product_attention(q, k, v)
        self.assertIs(self.F.scaled_dot_product_attention, orig, "the recorder is gone after")
        eager, found = self.one_finding(rec, q, k, v)
        if found is None:
            return
        self.assertIn(f"query {list(q.shape)} float32", found[0])
        self.assertIn(f"torch runs {eager} eagerly and MATH under capture", found[0])
        self.assertIn("sdpa_kernel(torch.nn.attention.SDPBackend.MATH)", found[0])

    def test_a_call_with_other_arguments_under_capture_and_another_backend_is_named(self):
        # as transformers' BERT would if its host-side mask test went another way while capturing:
        # eagerly no mask (the mask was all ones), under capture the mask, and another kernel
        q, k, v = self.qkv()
        mask = torch.zeros(q.shape[0], 1, q.shape[2], q.shape[2])
        rec = self.recorder()
        with rec:
            for _ in range(2):  # the check's two eager runs
                self.F.scaled_dot_product_attention(q, k, v)
            self.phase["capture"] = True
            with self.pin(self.B.MATH):
                self.F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        eager, found = self.one_finding(rec, q, k, v)
        if found is None:
            return
        self.assertIn("attn_mask", found[0].split(":")[0], "the call made under capture")
        self.assertIn("made only under capture, running MATH", found[0])
        self.assertIn(f"running {eager} (the code passes other arguments", found[0])
        self.assertIn("sdpa_kernel(torch.nn.attention.SDPBackend.MATH)", found[0])

    def test_other_arguments_under_capture_with_the_same_backend_are_no_finding(self):
        q, k, v = self.qkv()
        mask = torch.zeros(q.shape[0], 1, q.shape[2], q.shape[2])
        rec = self.recorder()
        with rec:
            with self.pin(self.B.MATH):
                self.F.scaled_dot_product_attention(q, k, v)
                self.phase["capture"] = True
                self.F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                # another query, only under capture: nothing eager to hold it to
                self.F.scaled_dot_product_attention(q[:, :1], k[:, :1], v[:, :1])
        self.assertEqual(rec.findings(), [])

    def test_same_backends_no_finding_and_calls_kept_apart_by_signature(self):
        rec = self.recorder()
        with rec:
            for capture in (False, True, False, True):
                self.phase["capture"] = capture
                for _ in range(3):
                    q, k, v = self.qkv()
                    self.F.scaled_dot_product_attention(q, k, v, is_causal=True)
        self.assertEqual(rec.findings(), [])
        self.assertEqual(len(rec.calls), 12)
        self.assertTrue(all("is_causal=True" in sig for sig, _, _ in rec.calls))

    def test_keyword_and_positional_forms_are_the_same_call(self):
        q, k, v = self.qkv()
        rec = self.recorder()
        with rec:
            self.F.scaled_dot_product_attention(q, k, v, None, 0.0, True)
            self.F.scaled_dot_product_attention(query=q, key=k, value=v, is_causal=True)
            self.F.scaled_dot_product_attention(q, key=k, value=v, attn_mask=None, is_causal=True)
        self.assertEqual(len({c for c in rec.calls}), 1, rec.calls)
        self.assertFalse(rec.calls[0][2].startswith("unknown"), rec.calls)

    def test_errors_are_torch_s_and_the_recorder_leaves(self):
        orig = self.F.scaled_dot_product_attention
        rec = self.recorder()
        with self.assertRaises(Exception):
            with rec:
                self.F.scaled_dot_product_attention(torch.randn(2, 3), torch.randn(4), None)
        self.assertIs(self.F.scaled_dot_product_attention, orig)
        self.assertEqual(len(rec.calls), 1)

    def test_only_the_checking_thread_is_recorded(self):
        # Random numbers of calls in the recording thread and in others (some recording with
        # their own recorders, some not), interleaved at random through a barrier per round.
        orig = self.F.scaled_dot_product_attention
        threads = self.rng.randrange(2, 6)
        rounds = self.rng.randrange(3, 8)
        plan = [[self.rng.randrange(0, 4) for _ in range(rounds)] for _ in range(threads)]
        recording = [t == 0 or self.rng.random() < 0.5 for t in range(threads)]
        recs = [self.recorder() if r else None for r in recording]
        barrier = threading.Barrier(threads)
        errors = []
        q, k, v = self.qkv()

        def work(t):
            try:
                cm = recs[t] if recs[t] is not None else contextlib.nullcontext()
                barrier.wait()
                with cm:
                    for r in range(rounds):
                        barrier.wait()
                        for _ in range(plan[t][r]):
                            self.F.scaled_dot_product_attention(q, k, v)
                        barrier.wait()
                for r in range(rounds):  # after leaving: nothing is recorded any more
                    self.F.scaled_dot_product_attention(q, k, v)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
                barrier.abort()

        ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        for t in range(threads):
            if recs[t] is not None:
                self.assertEqual(len(recs[t].calls), sum(plan[t]), (t, plan, recording))
        self.assertIs(self.F.scaled_dot_product_attention, orig, "torch's own again after")

    def test_the_attribute_is_restored_whatever_the_recorder_leaves_by(self):
        orig = self.F.scaled_dot_product_attention
        q, k, v = self.qkv()
        outer, inner = self.recorder(), self.recorder()
        for exc in (ValueError, KeyboardInterrupt, None):
            try:
                with outer:
                    self.F.scaled_dot_product_attention(q, k, v)
                    with inner:  # nested: the innermost records
                        self.F.scaled_dot_product_attention(q, k, v)
                        with outer:  # the same recorder again
                            self.F.scaled_dot_product_attention(q, k, v)
                        if exc is not None:
                            raise exc("leaving")
                    self.F.scaled_dot_product_attention(q, k, v)
            except (ValueError, KeyboardInterrupt):
                pass
            self.assertIs(self.F.scaled_dot_product_attention, orig, exc)
        self.assertEqual(len(inner.calls), 3)
        self.assertEqual(len(outer.calls), 3 * 2 + 1)

    def test_a_recording_failure_never_fails_the_call(self):
        q, k, v = self.qkv()

        def broken():
            raise RuntimeError("capturing() failed")

        with self.v.SdpaRecorder(capturing=broken) as rec:
            out = self.F.scaled_dot_product_attention(q, k, v)
        self.assertEqual(out.shape, q.shape)
        self.assertEqual(rec.calls, [])


@NEED_TORCH
class Phases(unittest.TestCase):
    """The Verifier's phases on CPU steps (no capture: the 'graph' is a function)."""

    def setUp(self):
        from recap import _verify
        import recap.torch  # noqa: F401 - the scopes are recap.torch's
        self.v = _verify
        self.rng = random.Random(SEED)

    def test_same_results_pass_and_buffers_end_where_the_capture_left_them(self):
        torch.manual_seed(self.rng.randrange(1 << 30))
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)).train()
        x = torch.randn(16, 8)
        start = [b.clone() for b in m.buffers()]
        ver = self.v.Verifier("test", [m])
        ver.eager(lambda: [("y", m(x))])
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(start, m.buffers())),
                        "the eager step's running statistics are put back")

        def capture():  # stands for torch's warm-ups: they move the statistics
            for _ in range(3):
                m(x)
            return [b.clone() for b in m.buffers()]
        after_capture = ver.capture(capture)
        seen = {}

        def replay():
            seen["buffers"] = [b.clone() for b in m.buffers()]
            return [("y", m(x))]
        ver.replay(replay)
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(start, seen["buffers"])),
                        "the replay starts from the buffers the eager step had")
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(after_capture, m.buffers())),
                        "and the buffers end where the capture left them")
        self.assertIsNone(ver.report())
        ver.check("raise")

    def test_a_difference_raises_or_warns_naming_it(self):
        x = torch.randn(64)
        k = self.rng.randrange(64)
        for how in ("raise", "warn"):
            ver = self.v.Verifier("test")
            ver.eager(lambda: [("y", x * 2)])
            ver.capture(lambda: None)

            def replay():
                y = x * 2
                y[k] += 1
                return [("y", y)]
            ver.replay(replay)
            if how == "raise":
                with self.assertRaises(self.v.GraphMismatch) as cm:
                    ver.check(how)
                err = cm.exception
                self.assertEqual(len(err.differences), 1)
                self.assertIn("y ([64] float32): 1 of 64 elements differ", str(err))
                self.assertIn("not one recap can name", str(err))
                self.assertEqual(err.sdpa, [])
            else:
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    ver.check(how)
                self.assertEqual([type(x.message) for x in w], [self.v.GraphMismatchWarning])
                self.assertIn("1 of 64 elements differ", str(w[0].message))

    def test_a_mismatch_is_a_line_of_recap_probe_s_report(self):
        import json
        import tempfile
        ver = self.v.Verifier("test")
        ver.eager_out = [("y", torch.zeros(8))]
        ver.replay_out = [("y", torch.ones(8))]
        err = ver.report()
        old = os.environ.get("RECAP_REPORT")
        with tempfile.TemporaryDirectory() as d:
            try:
                path = os.path.join(d, "report")
                with open(path, "w") as f:
                    f.write('{"schema":2,"pid":1,"launches":0}\n')  # librecap's line
                os.environ["RECAP_REPORT"] = path
                for _ in range(2):
                    self.v.report_line(err)
                with open(path) as f:
                    lines = f.read().splitlines()
                self.assertEqual(len(lines), 3)
                for line in lines[1:]:
                    got = json.loads(line)
                    self.assertEqual((got["source"], got["graph_mismatches"], got["schema"]),
                                     ("recap.torch", 1, 2))
                    self.assertIn("8 of 8 elements differ", got["graph_mismatch"])
                    self.assertLessEqual(len(got["graph_mismatch"]), 600)
                fifo = os.path.join(d, "fifo")  # nobody reads it: nothing written, no wait
                os.mkfifo(fifo)
                os.environ["RECAP_REPORT"] = fifo
                self.v.report_line(err)
                os.environ.pop("RECAP_REPORT")
                self.v.report_line(err)
            finally:
                os.environ.pop("RECAP_REPORT", None)
                if old is not None:
                    os.environ["RECAP_REPORT"] = old

    def test_what_two_eager_runs_give_differently_is_held_to_their_spread(self):
        # values of several magnitudes: x + 1, x + 2, x + 3 rounded in float32 put a replay two
        # eager spreads away above or below twice the spread by the last bit
        for scale in (1.0,) * 4 + (1000.0,) * 4:
            with self.subTest(scale=scale):
                self._held_to_spread(torch.randn(32) * scale)

    def _held_to_spread(self, x):
        runs = {"n": 0}

        def step():  # "atomics": the second tensor differs from run to run, eagerly too
            runs["n"] += 1
            return [("stable", x * 2), ("unstable", x + runs["n"])]
        ver = self.v.Verifier("test")
        ver.eager(step)
        self.assertEqual(ver.unstable, {"unstable"})
        ver.capture(lambda: None)
        ver.replay(step)
        self.assertIsNone(ver.report(), "only the unstable tensor differs")
        ver = self.v.Verifier("test")
        ver.eager(step)
        ver.capture(lambda: None)
        ver.replay(lambda: [("stable", x * 3), ("unstable", x + runs["n"])])  # within spread
        err = ver.report()
        self.assertIsNotNone(err)
        self.assertEqual(len(err.differences), 1)
        self.assertIn("stable ([32] float32)", err.differences[0])
        self.assertIn("held to the eager runs' spread, not bit equality: 1 tensors that two "
                      "eager runs already give differently", str(err))
        # a replay further from the eager step than twice the two runs' spread is caught (a
        # host counter read at capture: eager runs 1 and 2, the capture long after)
        for far, caught in ((2.0, False), (2.5, True), (40.0, True), (float("nan"), True)):
            runs["n"] = 0
            ver = self.v.Verifier("test")
            ver.eager(step)
            ver.capture(lambda: None)
            ver.replay(lambda: [("stable", x * 2), ("unstable", x + 1 + far)])
            err = ver.report()
            self.assertEqual(err is not None, caught, far)
            if caught:
                self.assertEqual(len(err.differences), 1)
                self.assertIn("unstable ([32] float32): differs from the eager step by up to",
                              err.differences[0])
                self.assertIn("while two eager runs differ by up to 1", err.differences[0])

    def test_torch_s_cpu_generator_is_put_back(self):
        ver = self.v.Verifier("test")
        before = torch.get_rng_state()
        ver.eager(lambda: [("r", torch.rand(4))])
        self.assertTrue(torch.equal(before, torch.get_rng_state()))
        ver.capture(lambda: None)
        ver.replay(lambda: [("r", torch.rand(4))])
        self.assertTrue(torch.equal(before, torch.get_rng_state()))
        self.assertIsNone(ver.report(), "both steps drew the same CPU numbers")

    def test_replay_outputs_that_all_require_grad(self):
        """A graphed callable's outputs all require grad (torch's autograd function): the
        replay differentiates the outputs the eager step did, with the same gradients."""
        import recap.torch as rt
        lin = torch.nn.Linear(4, 4)
        eager = (lambda a: (lin(a), lin(a).detach()))
        graphed = (lambda a: (lin(a), lin(a) * 1))
        samples = ((torch.randn(2, 4, requires_grad=True),),)
        grads = {}
        first = rt._graphed_step((eager,), samples, grads)
        second = rt._graphed_step((graphed,), samples, grads)
        self.assertEqual([n for n, _ in first], [n for n, _ in second])
        self.assertEqual(self.v.compare(first, second), [])

    def test_an_unknown_setting_warns_and_raises_by_default(self):
        old = os.environ.get("RECAP_VERIFY_GRAPHS")
        os.environ["RECAP_VERIFY_GRAPHS"] = "loud"
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                self.assertEqual(self.v.mode(None), "raise")
            self.assertIn("RECAP_VERIFY_GRAPHS='loud' not understood", str(w[0].message))
        finally:
            os.environ.pop("RECAP_VERIFY_GRAPHS")
            if old is not None:
                os.environ["RECAP_VERIFY_GRAPHS"] = old

    def test_offsets_that_move_differently_are_reported(self):
        ver = self.v.Verifier("test")
        ver.gens = [("generator A", None), ("generator B", None)]
        ver.moved = {"eager": [428, 8], "replay": [3932468, 8]}
        err = ver.report()
        self.assertIsNotNone(err)
        self.assertEqual(len(err.offsets), 1)
        self.assertIn("generator A: the eager step advanced its offset by 428, the first replay "
                      "by 3932468", str(err))

    def test_installed_function_shows_verify(self):
        import inspect
        import recap.torch as rt
        saved = torch.cuda.make_graphed_callables
        rt.install()
        try:
            f = torch.cuda.make_graphed_callables
            self.assertIsNot(f, saved)
            self.assertIn("verify", inspect.signature(f).parameters)
            self.assertIs(torch.cuda.graphs.make_graphed_callables, f)
            self.assertIn("verify", inspect.signature(rt.make_graphed_callables).parameters)
            self.assertIn("checks that too", rt.make_graphed_callables.__doc__,
                          "recap's own function keeps its own doc")
        finally:
            rt.uninstall()
        self.assertIs(torch.cuda.make_graphed_callables, saved)

    def test_graphed_step_names_outputs_and_gradients(self):
        import recap.torch as rt
        torch.manual_seed(self.rng.randrange(1 << 30))
        lin = torch.nn.Linear(6, 5)
        fn = (lambda a, b: (a * b).sum(-1))  # a function callable: input gradients only
        samples = ((torch.randn(3, 6, requires_grad=True),),
                   (torch.randn(4, 2, requires_grad=True), torch.randn(4, 2)))
        grads = {}
        first = rt._graphed_step((lin, fn), samples, grads)
        again = rt._graphed_step((lin, fn), samples, grads)
        names = [n for n, _ in first]
        self.assertEqual(names, ["callable 0 output 0", "callable 1 output 0",
                                 "callable 1 gradient of input 0",
                                 "callable 0 gradient of input 0",
                                 "callable 0 gradient of parameter weight",
                                 "callable 0 gradient of parameter bias"])
        self.assertEqual(self.v.compare(first, again), [], "the same grads both times")
        # against autograd by hand: d/dW of sum(g * (xW^T + b)) = g^T x
        x = samples[0][0]
        g = grads[0][1][0]  # (the outputs differentiated, their gradients)
        self.assertTrue(torch.allclose(dict(first)["callable 0 gradient of parameter weight"],
                                       g.t() @ x.detach()))
        self.assertIsNone(lin.weight.grad, "the check leaves .grad alone")


if __name__ == "__main__":
    unittest.main()
