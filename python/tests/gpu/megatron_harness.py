# SPDX-License-Identifier: Apache-2.0
"""pytest plugin for running Megatron-Core's own tests/unit_tests/tensor_parallel/test_random.py
on one GPU (scripts/gpu-check): its tests that need 2 or 8 tensor-parallel ranks get torch's fake
process group as their world (collectives do nothing; the tests check local values), and with
RECAP_MEGATRON=1 recap.megatron is installed in place of Megatron's module before the tests
import it.

    RECAP_MEGATRON=1 python -m pytest -p megatron_harness tests/unit_tests/tensor_parallel/test_random.py
"""
import os

os.environ.setdefault("WORLD_SIZE", "8")
os.environ.setdefault("LOCAL_RANK", "0")

if os.environ.get("RECAP_MEGATRON") == "1":
    import recap.megatron

    recap.megatron.install()


def pytest_configure(config):
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from tests.unit_tests.test_utilities import Utils

    def initialize_distributed():
        if not dist.is_initialized():
            torch.cuda.set_device(0)
            dist.init_process_group(backend="fake", store=FakeStore(), rank=Utils.rank,
                                    world_size=Utils.world_size)

    Utils.initialize_distributed = staticmethod(initialize_distributed)

    # Gloo groups cannot be made over the fake store: Megatron's own switch turns them off.
    import megatron.core.parallel_state as ps

    init = ps.initialize_model_parallel

    def initialize_model_parallel(*args, **kwargs):
        kwargs.setdefault("create_gloo_process_groups", False)
        return init(*args, **kwargs)

    ps.initialize_model_parallel = initialize_model_parallel
    import megatron.core.tensor_parallel.random as r
    import sys
    sys.stderr.write(f"megatron_harness: tensor_parallel.random is {r.__name__}\n")
    want = "recap.megatron" if os.environ.get("RECAP_MEGATRON") == "1" else \
        "megatron.core.tensor_parallel.random"
    assert r.__name__ == want, f"the module under test is {r.__name__}, not {want}"
