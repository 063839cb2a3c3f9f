# SPDX-License-Identifier: Apache-2.0
"""recap: graph-safe RNG states, automatic CUDA-graph registration and activation recompute for
training jobs, from the C library librecap.

- ``recap.torch``: torch's CUDA generators as recap framework generators; registration of tracker
  states with every torch CUDA graph; ``make_graphed_callables``-safe warm-up scopes.
- ``recap.megatron``: Megatron-Core's ``tensor_parallel.random`` on recap (``install()`` makes an
  existing Megatron program use it).

Importing ``recap`` needs neither torch nor a GPU; ``recap.torch`` and ``recap.megatron`` need
torch.
"""
from ._version import __version__

# recap._lib (ctypes, the C declarations) is imported on first use of these names, not with the
# package: recap-run imports recap.run at every launch and needs none of it.
_FROM_LIB = ("RecapError", "RecapNotFoundError", "RecapStateError", "RecapUnsupportedError",
             "library_path", "preload_path")


def __getattr__(name):
    if name in _FROM_LIB:
        from . import _lib
        return getattr(_lib, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["RecapError", "RecapNotFoundError", "RecapStateError", "RecapUnsupportedError",
           "__version__", "abi_version", "library_version", "library_path",
           "preload_path"]


def abi_version() -> tuple:
    """(major, minor) of the C ABI the loaded librecap implements."""
    from ._lib import lib
    v = lib().recap_abi_version()
    return (v >> 16, v & 0xFFFF)


def library_version() -> str:
    """The loaded librecap's version string (equal to ``__version__`` for a matched install)."""
    from ._lib import lib
    return lib().recap_version_string().decode()
