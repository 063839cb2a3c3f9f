# SPDX-License-Identifier: Apache-2.0
"""The check at capture for Megatron-Core's local CUDA graphs (``cuda_graph_impl="local"``):
after ``create_cudagraphs()`` has captured every recorded layer, each layer's forward graph and,
in training, its backward graph replay once against the same layer run eagerly from the same
generator states, bit for bit (recap/_verify.py's Verifier: outputs, input gradients, and the
weight gradients the backward graph adds into ``param.main_grad``).

What a layer gets:

- inputs: the graph's own static input buffers (what Megatron's warm-up ran on), the activations
  among them (floating tensors that require grad) filled with values from a CPU generator of
  recap's own first, so layers downstream of a zero buffer are not checked on constants; masks,
  rotary tables and the like are left as they are. Every buffer is rewritten by the next real
  replay (Megatron copies each step's inputs in), so the fill changes nothing of training;
- the output gradients: values from that CPU generator, copied into the backward graph's static
  output-gradient buffers for the replay;
- what training sees afterwards, put back: the generators (each phase inside exact_capture), the
  layer's buffers, every ``main_grad`` the backward graph adds into (zeroed for the replay, so the
  weight gradient is read exactly, then restored), MoE auxiliary-loss metrics as Megatron's own
  warm-up keeps them.

Layers the check cannot vouch for are skipped and said so once (``RECAP_LOG=info``): FP8/FP4
(their scaling state moves with every eager step), GTP weight rematerialisation, and a Megatron
whose runners lack the members this reads (a newer layout: the check steps aside rather than
guess). Cost: two eager steps and one replay per layer, at creation; nothing per step.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Dict, List, Optional, Sequence

import torch

from . import _lib, _verify

__all__ = ["check_records", "stats"]

# What the last create_cudagraphs() checked (the tests read it; recap-probe --run counts the
# mismatches through _verify.report_line).
stats: Dict[str, int] = {"verified": 0, "skipped": 0, "mismatches": 0}

_MEMBERS = ("fwd_graph", "fwd_graph_input_args", "fwd_graph_input_kwargs",
            "fwd_graph_output_surface", "func", "get_tensors", "base_module")


def _runners(record: Sequence[tuple]) -> List[object]:
    """The runners that recorded a forward graph, in record order, each once."""
    seen, out = set(), []
    for g in record:
        if len(g) >= 2 and g[1] == "fwd" and id(g[0]) not in seen:
            seen.add(id(g[0]))
            out.append(g[0])
    return out


def _skip_reason(r) -> Optional[str]:
    missing = [m for m in _MEMBERS if not hasattr(r, m)]
    if missing:
        return f"this Megatron's runner has no {', '.join(missing)}"
    if getattr(r, "fwd_graph", None) is None:
        return "no forward graph was made"
    if getattr(r, "fp8_enabled", False) or getattr(r, "fp4_enabled", False):
        return "FP8/FP4 layers (their scaling state moves with every eager step)"
    if getattr(r, "gtp_remat", False):
        return "GTP weight rematerialisation"
    return None


def _clone(t):
    if torch.is_tensor(t):
        return t.detach().clone().requires_grad_(t.requires_grad)
    return t


def _tree_map(fn, tree):
    """Megatron's own tree_map (it recurses into dataclasses, as its runners' arguments do);
    torch's where Megatron's module is not there to ask."""
    try:
        from megatron.core.transformer.cuda_graphs import tree_map
    except Exception:  # noqa: BLE001 - Megatron absent or another layout
        from torch.utils._pytree import tree_map
    return tree_map(fn, tree)


class _Layer:
    """One runner's check: its eager step and its replay, each giving the named tensors."""

    def __init__(self, r) -> None:
        self.r = r
        self.train = bool(getattr(r, "grad_enabled", False)) and \
            getattr(r, "bwd_graph", None) is not None and \
            hasattr(r, "static_grad_outputs") and hasattr(r, "static_grad_inputs")
        self.params = [p for p in getattr(r, "params_to_backprop", ()) if
                       getattr(p, "main_grad", None) is not None and
                       not getattr(p, "grad_added_to_main_grad", False)] if self.train else []
        self.grads: List[Optional[torch.Tensor]] = []

    def fill_inputs(self, gen: torch.Generator) -> None:
        """Activations: floating inputs that require grad, and the first positional argument
        (a layer's hidden states, by Megatron's convention; in inference nothing requires
        grad)."""
        r = self.r
        args = r.fwd_graph_input_args
        first = args[0] if isinstance(args, (tuple, list)) and args and \
            torch.is_tensor(args[0]) else None
        with torch.no_grad():
            for t in r.get_tensors(args, r.fwd_graph_input_kwargs, check_types=False):
                if t.is_floating_point() and (t.requires_grad or t is first) and \
                        not isinstance(t, torch.nn.Parameter):
                    t.copy_(torch.randn(t.shape, generator=gen).to(t.device, t.dtype))
        if self.train:
            self.grads = [None if o is None else
                          torch.randn(o.shape, generator=gen).to(o.device, o.dtype)
                          for o in self.r.static_grad_outputs]

    def _named_grads(self, which, input_grads, param_grads):
        named = [(f"gradient of input {k}", g) for k, g in zip(which, input_grads)]
        for p, g in zip(self.params, param_grads):
            named.append((f"weight gradient {self._pname(p)}", g))
        return named

    def _pname(self, p) -> str:
        for n, q in self.r.base_module.named_parameters():
            if q is p:
                return n
        return "?"

    def eager(self):
        r = self.r
        args = _tree_map(_clone, r.fwd_graph_input_args)
        kwargs = _tree_map(_clone, r.fwd_graph_input_kwargs)
        quant = r.get_quantization_context() if hasattr(r, "get_quantization_context") else \
            contextlib.nullcontext()
        with quant, (contextlib.nullcontext() if self.train else torch.no_grad()):
            out = r.func(*args, **kwargs)
        outs = list(r.get_tensors(out if isinstance(out, tuple) else (out,), check_types=False))
        named = [(f"output {j}", o) for j, o in enumerate(outs)]
        if not self.train:
            return named
        ins = list(r.get_tensors(args, kwargs, check_types=False))
        wanted = [k for k, g in enumerate(r.static_grad_inputs) if g is not None]
        diff = [(outs[k], g) for k, g in enumerate(self.grads) if g is not None and k < len(outs)]
        wrt = [ins[k] for k in wanted if k < len(ins)] + self.params
        got = torch.autograd.grad([o for o, _ in diff], wrt, [g for _, g in diff],
                                  allow_unused=True) if diff and wrt else [None] * len(wrt)
        n = len(wanted)
        # The backward graph adds each weight gradient into a zeroed main_grad: the same here.
        wgrads = [torch.zeros_like(p.main_grad) if g is None else
                  torch.zeros_like(p.main_grad).add_(g) for p, g in zip(self.params, got[n:])]
        return named + self._named_grads(wanted, got[:n], wgrads)

    def replay(self):
        r = self.r
        r.fwd_graph.replay()
        # (copied before the backward replay: its buffers are the forward's to reuse)
        named = [(f"output {j}", o.detach().clone())
                 for j, o in enumerate(r.fwd_graph_output_surface)]
        if not self.train:
            return named
        with torch.no_grad():
            for buf, g in zip(r.static_grad_outputs, self.grads):
                if buf is not None and g is not None:
                    buf.copy_(g)
            for p in self.params:
                p.main_grad.zero_()
        r.bwd_graph.replay()
        wanted = [k for k, g in enumerate(r.static_grad_inputs) if g is not None]
        return named + self._named_grads(wanted, [r.static_grad_inputs[k] for k in wanted],
                                         [p.main_grad for p in self.params])


@contextlib.contextmanager
def _kept(layer: _Layer):
    """main_grad of the layer's parameters and MoE auxiliary-loss metrics, put back after."""
    saved = [(p, p.main_grad.detach().clone()) for p in layer.params]
    moe = []
    try:
        from megatron.core.transformer.moe.moe_logging import get_moe_metrics_tracker
        for entry in get_moe_metrics_tracker().metrics.values():
            moe.append((entry.values, entry.values.detach().clone()))
    except Exception:  # noqa: BLE001 - no MoE tracker in this Megatron: nothing to keep
        pass
    try:
        yield
    finally:
        with torch.no_grad():
            for p, m in saved:
                p.main_grad.copy_(m)
            for t, m in moe:
                t.copy_(m)


def check_records(record: Sequence[tuple], how: str, sdpa: _verify.SdpaRecorder) -> None:
    """Checks every forward graph (and its backward) that ``create_cudagraphs()`` made from
    ``record`` (its ``cudagraph_record`` before the call); ``how`` as _verify.mode gives it;
    ``sdpa`` saw the warm-ups and captures. A mismatch raises GraphMismatch (``raise``) or warns
    (``warn``) naming the layer."""
    stats.update(verified=0, skipped=0, mismatches=0)
    gen = torch.Generator().manual_seed(0x5EED)  # no CUDA generator moves
    err = None
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    for i, r in enumerate(_runners(record)):
        why = _skip_reason(r)
        if why is not None:
            stats["skipped"] += 1
            _lib.log_once("info", f"recap: create_cudagraphs: the check at capture skips a "
                          f"layer: {why}")
            continue
        layer = _Layer(r)
        what = (f"Megatron create_cudagraphs, layer {i} "
                f"({type(r.base_module).__name__} {getattr(r.base_module, 'layer_number', '')})"
                .replace(" )", ")"))
        v = _verify.Verifier(what, [r.base_module])
        v.sdpa = sdpa
        layer.fill_inputs(gen)
        try:
            with _kept(layer):
                v.eager(layer.eager)
                v.replay(layer.replay)
            err = v.report()
        finally:
            v.release()
        if err is None:
            stats["verified"] += 1
            continue
        stats["mismatches"] += 1
        if how == "raise":
            break  # the first mismatch is what this rank raises, once the ranks agree
        _verify.settle(err, how, stacklevel=5)
        err = None
    _verify.settle(err, how, stacklevel=5)
