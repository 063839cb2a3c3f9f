# SPDX-License-Identifier: Apache-2.0
"""How recap.megatron.install() makes Megatron-Core use recap.megatron: an import hook that
answers Megatron's ``tensor_parallel.random`` with it (and wraps Megatron's local CUDA-graph
recorder and, without Transformer Engine, its TE tracker as those modules load), or, when
Megatron is imported already, the module and every name other Megatron modules imported from it
replaced. recap.megatron hands itself in (``me``): this module imports nothing of it."""
import contextlib
import sys

from .. import _lib
from .. import torch as rtorch

TARGET = "megatron.core.tensor_parallel.random"
TE = "megatron.core.extensions.transformer_engine"
GRAPHS = "megatron.core.transformer.cuda_graphs"


def _te_tracker_class(me):
    """TE's tracker is graph-safe with a no-argument constructor."""
    class TECudaRNGStatesTracker(me.CudaRNGStatesTracker):
        def __init__(self, is_inference_rng_tracker: bool = False):
            super().__init__(use_cudagraphable_rng=True,
                             is_inference_rng_tracker=is_inference_rng_tracker)
    return TECudaRNGStatesTracker


class _AliasFinder:
    """Answers the import of megatron.core.tensor_parallel.random with recap.megatron, through
    the normal import path (so the package gets its ``random`` attribute as usual)."""

    me = None  # recap.megatron, set by the first install or install_hook

    def find_spec(self, fullname, path=None, target=None):
        import importlib.machinery
        import importlib.util
        if fullname == TARGET:
            return importlib.util.spec_from_loader(fullname, self)
        if fullname == GRAPHS:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.loader is not None:
                real_graphs = spec.loader.exec_module

                def exec_graphs(module, _real=real_graphs):
                    _real(module)
                    wrap_create_cudagraphs(module)
                spec.loader.exec_module = exec_graphs
            return spec
        if fullname == TE and not self.me.HAVE_TE:
            # Megatron's module, then its TE tracker (a MagicMock class without TE) replaced.
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.loader is not None:
                real = spec.loader.exec_module

                def exec_module(module, _real=real, _me=self.me):
                    _real(module)
                    module.TECudaRNGStatesTracker = _te_tracker_class(_me)
                spec.loader.exec_module = exec_module
            return spec
        return None

    def create_module(self, spec):
        return self.me

    def exec_module(self, module):
        pass


_finder = _AliasFinder()


def _hook(me) -> None:
    _finder.me = me
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def install(me) -> None:
    """recap.megatron.install() for the module ``me``."""
    rtorch.install()
    _hook(me)
    old = sys.modules.get(TARGET)
    if old is not None and old is not me:
        sys.modules[TARGET] = me
        replace = {id(getattr(old, k)): getattr(me, k) for k in dir(me)
                   if hasattr(old, k) and not k.startswith("__")
                   and callable(getattr(old, k, None))}
        for mod_name, mod in list(sys.modules.items()):
            if not mod_name.startswith("megatron") or mod is me:
                continue
            for k, v in list(vars(mod).items()):
                if id(v) in replace and v is not replace[id(v)]:
                    setattr(mod, k, replace[id(v)])
        pkg = sys.modules.get("megatron.core.tensor_parallel")
        if pkg is not None:
            pkg.random = me
            for k in me._REEXPORTED:
                setattr(pkg, k, getattr(me, k))
    if not me.HAVE_TE:
        _replace_te_tracker(me)
    wrap_create_cudagraphs()


def install_hook(me) -> None:
    """recap.megatron.install_hook() for the module ``me``."""
    _hook(me)
    if TARGET in sys.modules or TE in sys.modules:
        me.install()
    else:
        rtorch.install()


def wrap_create_cudagraphs(module=None) -> None:
    """Megatron's local CUDA-graph path warms up and captures every recorded layer in
    create_cudagraphs(): inside recap.torch.exact_capture the generators come out of it where the
    eager first step left them, so graphed steps draw what eager steps would. Then each layer's
    graphs replay once against the layer run eagerly from the same states (recap/
    _verify_megatron.py; RECAP_VERIFY_GRAPHS: raise, the default, warn, or 0)."""
    if module is None:
        try:
            import megatron.core.transformer.cuda_graphs as module
        except Exception:  # noqa: BLE001 - Megatron absent or broken
            return
    rec = getattr(module, "_CudagraphGlobalRecord", None)
    orig = getattr(rec, "create_cudagraphs", None) if rec is not None else None
    if orig is None or getattr(orig, "_recap_exact", False):
        return

    def create_cudagraphs(cls, _orig=orig.__func__):
        from .. import _verify, _verify_megatron
        how = _verify.mode(None)
        record = list(getattr(cls, "cudagraph_record", ()) or ()) if how != "off" else []
        sdpa = _verify.SdpaRecorder() if record else contextlib.nullcontext()
        with sdpa, rtorch.exact_capture():
            out = _orig(cls)
        if record:
            try:
                with rtorch.exact_capture():  # (each phase restores its own; this, the whole)
                    _verify_megatron.check_records(record, how, sdpa)
            except _verify.GraphMismatch:
                raise
            except Exception as e:  # noqa: BLE001 - the check cannot do its part: the graphs
                # Megatron made stand, as they would without recap; said once
                _lib.log_once("warn", f"recap: create_cudagraphs: the check at capture could "
                              f"not run ({type(e).__name__}: {e}); the graphs are not checked")
        return out
    create_cudagraphs._recap_exact = True
    rec.create_cudagraphs = classmethod(create_cudagraphs)


def _replace_te_tracker(me) -> None:
    try:
        import megatron.core.extensions.transformer_engine as te
    except Exception:  # noqa: BLE001 - Megatron absent or broken: nothing to fix
        return
    if not isinstance(getattr(te, "TECudaRNGStatesTracker", None), type) or \
            getattr(te, "HAVE_TE", True) is False:
        te.TECudaRNGStatesTracker = _te_tracker_class(me)
