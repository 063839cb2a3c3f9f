# SPDX-License-Identifier: Apache-2.0
"""The check at capture on a model recap's tests did not write: Hugging Face's BERT built from a
config (transformers' sdpa attention, fp32, attention and hidden dropout 0.1), as a user makes it
a CUDA graph with recap.torch.make_graphed_callables (scripts/gpu-check, when transformers is
carried in .hf/).

Graphed three ways: the encoder with BERT's extended padding mask, the encoder without a mask,
and the whole model from input ids and a 2-D mask. For each one that torch can capture at all:
  - the check passes: then 10 graphed training steps equal 10 eager ones bit for bit, and
    torch's generator ends at the same offset (a verified graph that trains differently would be
    the check letting a difference through);
  - the check fails naming an attention backend to pin: pinned as it says, the graph verifies
    and trains bit-identically;
  - the check fails naming no cause: reported (info), and eager and graphed training are shown to
    differ, so the failure was not a false alarm.
A capture torch itself refuses (transformers' host-side mask test) is reported, not failed.
Exit status 0 when every check holds.
"""
import contextlib
import copy
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

torch.use_deterministic_algorithms(True, warn_only=True)
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402

import recap.torch as rt  # noqa: E402

FAILS = []
B, S, PAD = 8, 128, 28


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def bert():
    torch.manual_seed(1)
    cfg = BertConfig(vocab_size=1024, hidden_size=256, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=1024, max_position_embeddings=256,
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                     attn_implementation="sdpa")
    # no pooler: make_graphed_callables needs every parameter used by the output it is given
    return BertModel(cfg, add_pooling_layer=False).cuda().train()


class Encoder(torch.nn.Module):
    def __init__(self, model, masked):
        super().__init__()
        self.enc, self.masked = model.encoder, masked

    def forward(self, h, mask):
        return self.enc(h, attention_mask=mask if self.masked else None, return_dict=False)[0]


class Whole(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.bert = model

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask, return_dict=False)[0]


def case(kind):
    """A fresh module of the kind and its sample arguments (the same every call)."""
    m = bert()
    g = torch.Generator(device="cuda").manual_seed(2)
    mask2d = torch.ones(B, S, device="cuda", dtype=torch.long)
    mask2d[B // 2:, S - PAD:] = 0  # half the batch padded, as a real batch is
    if kind == "whole model (input ids, 2-D mask)":
        ids = torch.randint(0, 1024, (B, S), device="cuda", generator=g)
        return Whole(m), (ids, mask2d)
    h = torch.randn(B, S, 256, device="cuda", generator=g, requires_grad=True)
    ext = (1.0 - mask2d[:, None, None, :].float()) * torch.finfo(torch.float32).min
    return Encoder(m, kind.startswith("encoder, BERT's")), (h, ext)


def offset():
    return torch.cuda.default_generators[torch.cuda.current_device()].get_offset()


def train(model, args, steps, graph, pin=None):
    """Losses of `steps` SGD steps, the parameters and the generator's offset after them, graphed
    or eager. (The loss alone says little: the encoder ends in a LayerNorm, whose output's mean
    square is near 1 whatever it computed; the parameters after the steps say everything.)"""
    torch.manual_seed(1234)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with sdpa_kernel(pin) if pin is not None else contextlib.nullcontext():
        fn = rt.make_graphed_callables(model, args, verify=False) if graph else model
        losses = []
        for _ in range(steps):
            loss = fn(*args).float().square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.detach().clone())
    torch.cuda.synchronize()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    return torch.stack(losses), offset(), params


def equal_training(kind, pin=None):
    m, args = case(kind)
    eager = train(copy.deepcopy(m), args, 10, graph=False, pin=pin)
    graph = train(copy.deepcopy(m), args, 10, graph=True, pin=pin)
    same = (torch.equal(eager[0], graph[0]) and eager[1] == graph[1] and
            torch.equal(eager[2], graph[2]))
    differ = (eager[2] != graph[2]).sum().item()
    detail = (f"losses {eager[0][-1].item():.6f} / {graph[0][-1].item():.6f}, generator offset "
              f"{eager[1]} / {graph[1]}, {differ} of {eager[2].numel()} parameters differ "
              f"after the steps")
    return same, detail


def verify(kind):
    """None when a fresh module of the kind graphs with the check passing, else the mismatch."""
    m, args = case(kind)
    torch.manual_seed(1234)
    try:
        rt.make_graphed_callables(m, args)
        return None
    except rt.GraphMismatch as e:
        return e


def main():
    rt.install()
    print(f"info  torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    for kind in ("encoder, BERT's extended padding mask", "encoder, no mask",
                 "whole model (input ids, 2-D mask)"):
        try:
            verdict = verify(kind)
        except Exception as e:  # noqa: BLE001 - torch refusing the capture is a finding
            print(f"info  {kind}: torch cannot capture it ({type(e).__name__}: "
                  f"{str(e).splitlines()[0][:200]})", flush=True)
            continue
        if verdict is None:
            same, detail = equal_training(kind)
            check(same, f"{kind}: verified, and 10 graphed training steps = 10 eager steps "
                  f"({detail})")
            continue
        print(f"info  {kind}: the check fails:\n{verdict}", flush=True)
        if verdict.sdpa:
            pin = getattr(SDPBackend, verdict.sdpa[0].split("SDPBackend.")[1].split(")")[0])
            with sdpa_kernel(pin):
                again = verify(kind)
            if again is not None:
                print(f"info  pinned:\n{again}", flush=True)
            check(again is None, f"{kind}: pinned to {pin.name} as advised: verified")
            same, detail = equal_training(kind, pin)
            check(same, f"{kind}: pinned to {pin.name}: 10 graphed training steps = 10 eager "
                  f"steps ({detail})")
        else:
            same, detail = equal_training(kind)
            check(not same, f"{kind}: no cause named, and graphed training does differ from "
                  f"eager ({detail})")


if __name__ == "__main__":
    main()
    print(f"{'FAIL' if FAILS else 'ok'}: {len(FAILS)} failed", flush=True)
    sys.exit(1 if FAILS else 0)
