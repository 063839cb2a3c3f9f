# SPDX-License-Identifier: Apache-2.0
"""recap.megatron's torch state helpers, under Megatron's names (recap.megatron re-exports them):
a device's generator state as a value (uint8[16]) or a state object (torch.Generator), and the
16 bytes of either. They call nothing of recap.megatron."""
from typing import Union

import torch

from .. import _abi


def _device_index(device) -> int:
    if isinstance(device, str):
        device = torch.device(device)
    elif isinstance(device, int):
        device = torch.device("cuda", device) if device >= 0 else torch.device("cuda")
    idx = device.index
    return torch.cuda.current_device() if idx is None else idx


def _get_cuda_rng_state(device: Union[int, str, torch.device] = "cuda", clone: bool = False,
                        graph_safe: bool = False):
    """The device's generator state: a uint8[16] tensor, or (graph_safe) a Generator sharing
    the default generator's current state object (a new state with clone)."""
    if not graph_safe:
        return torch.cuda.random.get_rng_state(device=device)
    torch.cuda.init()
    g = torch.cuda.default_generators[_device_index(device)]
    return g.clone_state() if clone else g.graphsafe_get_state()


def _set_cuda_rng_state(new_state, device: int = -1, graph_safe: bool = False) -> None:
    """Sets the device's generator state (a value, or with graph_safe a state object)."""
    torch.cuda.init()
    g = torch.cuda.default_generators[_device_index(device)]
    if graph_safe:
        g.graphsafe_set_state(new_state)
    else:
        g.set_state(new_state)


def convert_cuda_rng_state(state, to_graphable: bool = False):
    """A state's value form (uint8[16] tensor) and graph-safe form (torch.Generator)."""
    if to_graphable:
        if isinstance(state, torch.Tensor):
            g = torch.cuda.default_generators[torch.cuda.current_device()]
            saved = g.get_state()
            g.set_state(state)
            out = g.clone_state()
            g.set_state(saved)
            return out
        if isinstance(state, torch.Generator):
            return state
    else:
        if isinstance(state, torch.Tensor):
            return state
        if isinstance(state, torch.Generator):
            return state.get_state()
    raise ValueError(f"Invalid state type: {type(state)}")


def _state_value(state) -> bytes:
    """16 bytes of a state given as a tensor or a Generator."""
    t = convert_cuda_rng_state(state, to_graphable=False)
    t = t.detach().to("cpu").contiguous().view(torch.uint8)
    if t.numel() != _abi.RECAP_STATE_BYTES:
        raise ValueError(f"a CUDA generator state is {_abi.RECAP_STATE_BYTES} bytes, not "
                         f"{t.numel()}")
    return bytes(t.numpy().tobytes())


def _value_tensor(b: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(b), dtype=torch.uint8)
