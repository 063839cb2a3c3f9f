# SPDX-License-Identifier: Apache-2.0
"""recap._C: recap.torch's compiled extension (recap/csrc, built as recap._C_torch), loaded only
under the torch it was built for.

The compiled module links against that torch's own libraries: under another torch the dynamic
linker can fail on an undefined symbol before any code of the module runs, so its own version
check never speaks. This module compares the build's record (recap/_build.py) with the running
torch first and raises one ImportError that names both and the fix; only then does it load the
compiled module, which takes this name's place in sys.modules.
"""
import sys

from . import _torch_build

_refused = _torch_build.refusal()
if _refused:
    raise ImportError(_refused)

from . import _C_torch  # noqa: E402 - only once the torch it links against is known to be here

sys.modules[__name__] = _C_torch
