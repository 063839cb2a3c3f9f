# SPDX-License-Identifier: Apache-2.0
"""recap._C, recap.torch's compiled extension, when it is there and was built for the running
torch; otherwise None, and ``why`` says why (recap.torch then runs its Python operations).

The extension (recap/csrc) is built by ``pip install ./python`` against the torch of the build
environment, which recap/_build.py records. Loading it under another torch is refused here,
before the import (a C++ extension of another torch may not even link), by recap/_C.py for a
direct ``import recap._C``, and again by the compiled module itself. ``RECAP_TORCH_EXT=0`` turns it off.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

why = ""
_lock = threading.Lock()
_tried = False
_module = None


def built_for() -> Optional[str]:
    """The torch version the extension was built against, or None when none was built."""
    try:
        from . import _build
    except ImportError:
        return None
    return getattr(_build, "TORCH_VERSION", None)


def refusal() -> str:
    """Why recap._C cannot be loaded under the running torch ("" when it can): no extension was
    built, or it was built for another torch. Asked before the compiled module is imported
    (recap/_C.py), since under another torch it may not even link."""
    import torch

    want = built_for()
    if want is None:
        return ("recap was installed without its torch extension (RECAP_PYTHON_OPS=1 at "
                "install): the Python operations run")
    if want != torch.__version__:
        return (f"recap's torch extension was built for torch {want}, not the running "
                f"torch {torch.__version__}: reinstall recap (pip install "
                "--no-build-isolation ./python) against this torch")
    return ""


def module():
    """recap._C, or None (``why`` says why). The first call decides; the answer stays."""
    global _tried, _module, why
    if _tried:
        return _module
    with _lock:
        if _tried:
            return _module
        if os.environ.get("RECAP_TORCH_EXT") == "0":
            why = "RECAP_TORCH_EXT=0"
        else:
            why = refusal()
        if not why:
            try:
                from . import _C
                _module = _C
            except ImportError as e:
                why = f"recap._C did not load: {e}"
        _tried = True
        if why:
            from . import _lib
            _lib.log_once("warn", f"recap.torch: {why}; torch's generators run through "
                          "recap's Python operations (slower)")
        return _module
