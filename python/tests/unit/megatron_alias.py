# SPDX-License-Identifier: Apache-2.0
"""For test_megatron_alias.py, in a process of its own: recap.megatron.install() against the real
Megatron-Core, installed after Megatron's module was imported ("after") or before ("before").
Megatron's module name answers with recap.megatron, the package's re-exports and every name
another Megatron module imported from the old module are recap's, Megatron's local CUDA-graph
recorder is wrapped (exact capture, the check at capture) and, without Transformer Engine, its
TE tracker is recap's graph-safe tracker. Prints "ok MODE"."""
import sys
import warnings

warnings.simplefilter("ignore")
mode = sys.argv[1]
import recap.megatron as m  # noqa: E402

if mode == "after":
    import megatron.core.tensor_parallel as tp
    import megatron.core.tensor_parallel.random as own
    assert own is not m
    import megatron.core.transformer.cuda_graphs as cg
    import megatron.core.extensions.transformer_engine as te
    m.install()
else:
    m.install()
    import megatron.core.tensor_parallel as tp
    import megatron.core.transformer.cuda_graphs as cg
    import megatron.core.extensions.transformer_engine as te
assert sys.modules["megatron.core.tensor_parallel.random"] is m
assert tp.random is m
for name in m._REEXPORTED:
    assert getattr(tp, name) is getattr(m, name), name
left = [(n, k) for n, mod in list(sys.modules.items()) if n.startswith("megatron") and mod is not m
        for k, v in list(vars(mod).items())
        if callable(v) and getattr(v, "__module__", None) == "megatron.core.tensor_parallel.random"]
assert not left, left[:5]
assert cg._CudagraphGlobalRecord.create_cudagraphs.__func__._recap_exact
assert issubclass(te.TECudaRNGStatesTracker, m.CudaRNGStatesTracker), te.TECudaRNGStatesTracker
print("ok", mode)
