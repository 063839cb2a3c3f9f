# SPDX-License-Identifier: Apache-2.0
"""recap.megatron's checkpoints: Megatron's ``checkpoint``/``CheckpointFunction`` (recompute
in the backward) and ``CheckpointWithoutOutput`` with its manager (outputs released, rebuilt in
place), each restoring the RNG from a recap snapshot so the recompute draws what the forward
drew. The process's tracker and the checkpointing flag are recap.megatron's (``_m``), looked up
at each call as Megatron's module globals are."""
from __future__ import annotations

from typing import Callable, List, Optional

import torch
from torch.utils.checkpoint import detach_variable

from ._parallel import _gather_1d, _split_1d

_m = None  # recap.megatron, which hands itself in when imported (as to _install: no circle)

try:  # Transformer Engine is optional, as in Megatron
    import transformer_engine  # noqa: F401
    from transformer_engine.pytorch.distributed import activation_recompute_forward
    from transformer_engine.pytorch.fp8 import FP8GlobalStateManager, fp8_autocast

    HAVE_TE = True
except (ImportError, ModuleNotFoundError):
    HAVE_TE = False


def _graph_warmup_or_capture() -> bool:
    try:
        from megatron.core.transformer import cuda_graphs
        if cuda_graphs.is_graph_warmup() or cuda_graphs.is_graph_capturing():
            return True
    except (ImportError, AttributeError):
        pass
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class CheckpointFunction(torch.autograd.Function):
    """Megatron's checkpoint: the forward runs without keeping activations, the backward
    restores the RNG (a recap snapshot taken before the forward), recomputes and back-propagates;
    the states current before the recompute come back afterwards."""

    @staticmethod
    def forward(ctx, run_function, distribute_saved_activations, *args):
        _m._set_checkpointing()
        ctx.run_function = run_function
        ctx.distribute_saved_activations = distribute_saved_activations
        ctx.rng = _m._snapshot_all()
        with torch.no_grad():
            outputs = run_function(*args)
        if distribute_saved_activations:
            ctx.input_0_shape = args[0].data.shape
            args[0].data = _split_1d(args[0].data)
        ctx.save_for_backward(*args)
        _m._unset_checkpointing()
        return outputs

    @staticmethod
    def backward(ctx, *args):
        if not torch.autograd._is_checkpoint_valid():
            raise RuntimeError("Checkpointing is not compatible with .grad(), "
                               "please use .backward() if possible")
        _m._set_checkpointing()
        inputs = ctx.saved_tensors
        if ctx.distribute_saved_activations:
            inputs[0].data = _gather_1d(inputs[0].data).view(ctx.input_0_shape)
        with _m._fork_rng():
            ctx.rng.restore()
            detached = detach_variable(inputs)
            with torch.enable_grad():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, args)
                 if torch.is_tensor(o) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True,"
                               " this checkpoint() is not necessary")
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in detached)
        _m._unset_checkpointing()
        return (None, None) + grads


def checkpoint(function: Callable, distribute_saved_activations: bool, *args):
    """Checkpoints ``function(*args)``; a plain call during graph warm-up and capture."""
    if _graph_warmup_or_capture():
        return function(*args)
    return CheckpointFunction.apply(function, distribute_saved_activations, *args)


class CheckpointWithoutOutputFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, checkpoint_without_output_obj, *args):
        ctx.fp8 = checkpoint_without_output_obj.fp8
        ctx.fp8_recipe = FP8GlobalStateManager.get_fp8_recipe() if ctx.fp8 else None
        with torch.no_grad():
            outputs = run_function(*args)
        ctx.save_for_backward(*detach_variable(args))
        checkpoint_without_output_obj.ctx = ctx
        return outputs

    @staticmethod
    def backward(ctx, *args):
        inputs = ctx.inputs
        outputs = ctx.outputs
        torch.autograd.backward(outputs, args)
        ctx.outputs = None
        ctx.inputs = None
        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in inputs)
        return (None, None) + grads


class CheckpointWithoutOutput:
    """Megatron's CheckpointWithoutOutput: run a function keeping only its inputs, release its
    outputs' storage (``discard_output_and_register_recompute``), and rebuild them in place when
    the hook tensor's gradient is computed, with the RNG restored (a recap snapshot) so the
    rebuild is bit-identical; every view of a released output sees the rebuilt data."""

    def __init__(self, fp8: Optional[bool] = False):
        self.fp8 = bool(fp8)
        self.run_function = None
        self.rng = None
        self.ctx = None
        self.outputs = None

    def checkpoint(self, run_function, *args):
        self.run_function = run_function
        if _graph_warmup_or_capture():
            return run_function(*args)
        self.rng = _m._snapshot_all()
        outputs = CheckpointWithoutOutputFunction.apply(run_function, self, *args)
        self.outputs = outputs
        if isinstance(self.outputs, torch.Tensor):
            self.outputs = (self.outputs,)
        return outputs

    def _recompute(self, _):
        if self.ctx is None or _graph_warmup_or_capture():
            return
        if not torch.cuda.is_available() or not torch.cuda.is_current_stream_capturing():
            if not torch.autograd._is_checkpoint_valid():
                raise RuntimeError("Checkpointing is not compatible with .grad(), "
                                   "please use .backward() if possible")
        with _m._fork_rng():
            self.rng.restore()
            saved = self.ctx.saved_tensors
            inputs = []
            for t in saved:
                d = t.detach()
                d.requires_grad_(t.requires_grad)
                inputs.append(d)
            with torch.enable_grad():
                if self.fp8:
                    with fp8_autocast(enabled=True, fp8_recipe=self.ctx.fp8_recipe), \
                            activation_recompute_forward(activation_recompute=True,
                                                         recompute_phase=True):
                        outputs = self.run_function(*inputs)
                else:
                    outputs = self.run_function(*inputs)
        self.run_function = None
        self.rng = None
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        for old, new in zip(self.outputs, outputs):
            _refill_storage(old, new)
        self.ctx.outputs = outputs
        self.ctx.inputs = inputs
        self.outputs = None
        self.ctx = None

    def discard_output_and_register_recompute(self, hook_tensor):
        if _graph_warmup_or_capture():
            return
        for output in self.outputs:
            output.untyped_storage().resize_(0)
        if hook_tensor.requires_grad:
            hook_tensor.register_hook(self._recompute)


def _refill_storage(old: torch.Tensor, new: torch.Tensor) -> None:
    """Gives the released output back its storage, holding the rebuilt data: every view of it
    (saved for backward by later ops) sees the data, as with Megatron's share_storage."""
    storage = old.untyped_storage()
    src = new.detach().untyped_storage()
    storage.resize_(src.nbytes())
    storage.copy_(src)


class CheckpointWithoutOutputManager:
    """Regions whose outputs feed one another (one checkpoint's output is the next one's input):
    ``checkpoint`` runs each, ``discard_all_outputs_and_register_recompute(hook_tensor)``
    releases every output and arms one hook that rebuilds them in forward order."""

    def __init__(self, fp8: Optional[bool] = False):
        self.fp8 = fp8
        self.checkpoints: List[CheckpointWithoutOutput] = []

    def checkpoint(self, run_function, *args):
        c = CheckpointWithoutOutput(self.fp8)
        self.checkpoints.append(c)
        return c.checkpoint(run_function, *args)

    def _recompute_all(self, grad):
        for c in self.checkpoints:
            c._recompute(grad)
        self.checkpoints = []

    def discard_all_outputs_and_register_recompute(self, hook_tensor):
        if _graph_warmup_or_capture():
            return
        for c in self.checkpoints:
            for output in c.outputs:
                output.untyped_storage().resize_(0)
        if hook_tensor.requires_grad:
            hook_tensor.register_hook(self._recompute_all)
