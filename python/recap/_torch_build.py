# SPDX-License-Identifier: Apache-2.0
"""Which torch recap._C was built for (recap/_build.py, written at install) and whether it is the
running one: asked by recap/_C.py before the compiled module is loaded and by recap._ext, so it
imports neither."""
from __future__ import annotations

import os
from typing import Optional


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
                f"torch {torch.__version__}: reinstall recap against this torch: "
                f"{fix_command()}")
    return ""


def _distribution():
    """recap-rng's installed metadata for this very copy of the package, or None (a source
    tree on PYTHONPATH)."""
    try:
        from importlib import metadata
    except ImportError:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        for dist in metadata.distributions(name="recap-rng"):
            try:
                where = os.path.abspath(str(dist.locate_file("recap")))
            except Exception:  # noqa: BLE001 - metadata of another kind: not ours
                continue
            if where == here:
                return dist
    except Exception:  # noqa: BLE001 - broken metadata elsewhere on the path
        return None
    return None


def fix_command() -> str:
    """The command that rebuilds recap._C against the running torch, for how this copy was
    installed: from a folder or an sdist, that again; from a package index or a wheel, the
    index's sdist (--no-binary); into a --target folder, that folder."""
    import json
    import shlex
    import sys

    pip = [os.path.basename(sys.executable) if sys.executable else "python3", "-m", "pip",
           "install", "--no-build-isolation", "--force-reinstall", "--no-deps"]
    dist = _distribution()
    if dist is None:
        return " ".join(pip[:5]) + " ./python  (from recap's checkout, after ./scripts/bootstrap)"
    source = None
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except (ValueError, OSError):
        direct = None
    if direct and str(direct.get("url", "")).startswith("file://"):
        path = direct["url"][len("file://"):]
        if "dir_info" in direct or path.endswith((".tar.gz", ".zip")):
            source = path
    from . import __version__
    args = [source] if source else ["--no-binary", "recap-rng", f"recap-rng=={__version__}"]
    site_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        import site
        sites = set(site.getsitepackages()) | {site.getusersitepackages()}
    except Exception:  # noqa: BLE001 - a Python without site (-S): assume a standard place
        sites = {site_dir}
    if site_dir not in {os.path.abspath(p) for p in sites}:
        args = ["--target", site_dir, "--upgrade"] + args
    return " ".join(shlex.quote(a) for a in pip + args)
