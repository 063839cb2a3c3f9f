# SPDX-License-Identifier: Apache-2.0
"""recap-rng's build backend: setuptools' own, which asks for torch as well when it builds a
wheel with recap._C (the extension compiles against torch's headers and libraries). In an
isolated build (``python -m build``, ``pip install`` without ``--no-build-isolation``) that is the
newest torch recap was tested on (2.15), which the wheel's metadata then requires; ``pip install
--no-build-isolation`` builds against the torch of the environment instead. The sdist needs no
torch."""
import os

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - the rest of the backend as it is

TORCH = "torch>=2.11,<2.16"  # the releases recap was built and tested on (README)


def _with_torch(requires):
    if os.environ.get("RECAP_PYTHON_OPS") == "1":
        return requires
    return list(requires) + [TORCH]


def get_requires_for_build_wheel(config_settings=None):
    return _with_torch(_setuptools.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(config_settings=None):
    return _with_torch(_setuptools.get_requires_for_build_editable(config_settings))
