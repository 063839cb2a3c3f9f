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
    import megatron.core.tensor_parallel.random as r
    print(f"megatron_harness: tensor_parallel.random is {r.__name__} ({r.__file__})")
