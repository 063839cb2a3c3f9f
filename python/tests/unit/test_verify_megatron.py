# SPDX-License-Identifier: Apache-2.0
"""The check at capture for Megatron's local graphs (recap/_verify_megatron.py), without a
device: runners shaped as Megatron-Core 0.19's _CudaGraphRunner (static input buffers, a forward
"graph" writing static outputs, a backward "graph" writing static input gradients and adding
weight gradients into main_grad) whose graphs are CPU functions. A faithful graph verifies and
leaves main_grad, buffers and inputs' roles as training needs them; a graph that computes
something else (a host value read at capture) is named, layer and tensor; warn mode warns; layers
the check cannot vouch for are skipped. Megatron's own create_cudagraphs on a GPU:
python/tests/gpu/megatron_gpt_graphs.py (scripts/gpu-check)."""
import os
import random
import unittest
import warnings

try:
    import torch
except ImportError:
    torch = None

SEED = int(os.environ.get("RECAP_TEST_SEED", "0") or 0) or random.randrange(1, 1 << 31)
NEED_TORCH = unittest.skipIf(torch is None and os.environ.get("RECAP_REQUIRE_TORCH") != "1",
                             "torch is not installed")


class _Graph:
    def __init__(self, fn):
        self.fn = fn
        self.replays = 0

    def replay(self):
        self.replays += 1
        self.fn()


class FakeRunner:
    """The members of Megatron's _CudaGraphRunner the check reads, with CPU "graphs": the
    forward replay runs the layer on the static input and keeps its autograd graph, as the
    captured forward keeps its saved activations for the backward graph."""

    def __init__(self, rng, scale_at_capture=1.0, train=True, hidden=None):
        h = hidden or rng.randrange(4, 17)
        self.base_module = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.Tanh(),
                                               torch.nn.Linear(h, h))
        self.base_module.register_buffer("steps", torch.zeros(()))
        self.func = self.base_module
        self.grad_enabled = train
        x = torch.zeros(rng.randrange(1, 6), h, requires_grad=train)
        self.fwd_graph_input_args, self.fwd_graph_input_kwargs = (x,), {}
        self.fwd_graph_output_surface = (torch.zeros_like(x),)
        self.params_to_backprop = tuple(self.base_module.parameters()) if train else ()
        self.saved_main = []
        for p in self.params_to_backprop:
            p.main_grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(
                rng.randrange(1 << 30)))
            self.saved_main.append(p.main_grad.clone())
        self.scale = scale_at_capture
        self.fwd_graph = _Graph(self._fwd)
        if train:
            self.bwd_graph = _Graph(self._bwd)
            self.static_grad_outputs = (torch.zeros_like(x),)
            self.static_grad_inputs = (torch.zeros_like(x),)
        self._live = None

    def get_tensors(self, args, kwargs=None, check_types=True):
        out = [a for a in args if torch.is_tensor(a)]
        out += [v for v in (kwargs or {}).values() if torch.is_tensor(v)]
        return tuple(out)

    def _fwd(self):
        x = self.fwd_graph_input_args[0].detach().requires_grad_(self.grad_enabled)
        with torch.set_grad_enabled(self.grad_enabled):
            y = self.func(x) * self.scale
        with torch.no_grad():
            self.fwd_graph_output_surface[0].copy_(y)
        self._live = (x, y)

    def _bwd(self):
        x, y = self._live
        got = torch.autograd.grad(y, (x,) + self.params_to_backprop, self.static_grad_outputs)
        with torch.no_grad():
            self.static_grad_inputs[0].copy_(got[0])
            for p, g in zip(self.params_to_backprop, got[1:]):
                p.main_grad.add_(g)


@NEED_TORCH
class MegatronCheck(unittest.TestCase):
    def setUp(self):
        from recap import _verify, _verify_megatron
        self.v, self.vm = _verify, _verify_megatron
        self.rng = random.Random(SEED)

    def record(self, runners):
        out = []
        for r in runners:
            out.append((r, "fwd", None, None, None))
        for r in reversed(runners):
            if r.grad_enabled:
                out.append((r, "bwd"))
        return out

    def test_faithful_graphs_verify_and_training_state_is_kept(self):
        for _ in range(5):
            runners = [FakeRunner(self.rng, train=self.rng.random() < 0.8)
                       for _ in range(self.rng.randrange(1, 4))]
            self.vm.check_records(self.record(runners), "raise", self.v.SdpaRecorder())
            self.assertEqual(self.vm.stats, {"verified": len(runners), "skipped": 0,
                                             "mismatches": 0}, f"seed {SEED}")
            for r in runners:
                self.assertEqual(r.fwd_graph.replays, 1, "one replay per graph")
                x = r.fwd_graph_input_args[0]
                self.assertTrue(bool((x != 0).any()), "activations filled before the check")
                for p, m in zip(r.params_to_backprop, r.saved_main):
                    self.assertTrue(torch.equal(p.main_grad, m), "main_grad put back")
                if r.grad_enabled:
                    self.assertEqual(r.bwd_graph.replays, 1)
                    self.assertTrue(bool((r.static_grad_inputs[0] != 0).any()),
                                    "the backward graph ran on filled output gradients")

    def test_a_graph_computing_otherwise_is_named(self):
        good = FakeRunner(self.rng)
        bad = FakeRunner(self.rng, scale_at_capture=1.0 + self.rng.choice([2 ** -20, 0.5, 3]))
        with self.assertRaises(self.v.GraphMismatch) as e:
            self.vm.check_records(self.record([good, bad]), "raise", self.v.SdpaRecorder())
        msg = str(e.exception)
        self.assertIn("Megatron create_cudagraphs, layer 1 (Sequential)", msg)
        names = " ".join(e.exception.differences)
        self.assertIn("output 0", names)
        self.assertIn("gradient of input 0", names)
        self.assertIn("weight gradient 0.weight", names)
        self.assertEqual(self.vm.stats, {"verified": 1, "skipped": 0, "mismatches": 1})
        for p, m in zip(bad.params_to_backprop, bad.saved_main):
            self.assertTrue(torch.equal(p.main_grad, m), "main_grad put back on a mismatch too")

    def test_warn_mode_warns_and_goes_on(self):
        runners = [FakeRunner(self.rng, scale_at_capture=2.0), FakeRunner(self.rng)]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.vm.check_records(self.record(runners), "warn", self.v.SdpaRecorder())
        self.assertEqual([x.category for x in w], [self.v.GraphMismatchWarning])
        self.assertEqual(self.vm.stats, {"verified": 1, "skipped": 0, "mismatches": 1})

    def test_layers_it_cannot_vouch_for_are_skipped(self):
        fp8 = FakeRunner(self.rng)
        fp8.fp8_enabled = True
        other = FakeRunner(self.rng)
        del other.fwd_graph_output_surface  # a Megatron of another layout
        none = FakeRunner(self.rng)
        none.fwd_graph = None
        self.vm.check_records(self.record([fp8, other, none]), "raise", self.v.SdpaRecorder())
        self.assertEqual(self.vm.stats, {"verified": 0, "skipped": 3, "mismatches": 0})
        self.assertEqual(fp8.fwd_graph.replays, 0)

    def test_only_forward_records_make_layers_each_once(self):
        r = FakeRunner(self.rng)
        rec = [(r, "fwd", None, None, None), (r, "bwd"), (r, "fwd", None, None, None)]
        self.assertEqual(self.vm._runners(rec), [r])


if __name__ == "__main__":
    unittest.main()
