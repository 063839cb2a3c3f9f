# SPDX-License-Identifier: Apache-2.0
"""Loaded at start-up by every Python process recap-run starts (its folder is first on
PYTHONPATH): installs recap.megatron (an import hook: Megatron is not imported here) unless
RECAP_MEGATRON=0, then hands over to the sitecustomize that was there before, if any."""
import importlib.util
import os
import sys


def _find_recap():
    """recap importable: from the job's own path, else from the folder recap-run found it in
    (RECAP_SITE), appended last so that it shadows nothing of the job's."""
    if importlib.util.find_spec("recap") is None:
        site = os.environ.get("RECAP_SITE")
        if site and site not in sys.path:
            sys.path.append(site)


def _activate():
    _find_recap()
    if os.environ.get("RECAP_MEGATRON", "1") != "0":
        try:
            import recap.megatron
            recap.megatron.install_hook()
        except Exception as e:  # noqa: BLE001 - never break the job's start
            _warn(f"recap-run: could not install recap.megatron: {e}")


def _warn(message):
    """A warning in recap's log (RECAP_LOG=warn, RECAP_LOG_FILE); on stderr when even recap's
    Python package does not import, with any RECAP_LOG set, as before."""
    try:
        from recap import _lib
    except Exception:  # noqa: BLE001 - the job's start goes on
        if os.environ.get("RECAP_LOG"):
            sys.stderr.write(f"recap: {message}\n")
        return
    _lib.log_once("warn", message)


def _chain():
    """Runs the next sitecustomize on the path (ours shadows it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        cand = os.path.join(entry, "sitecustomize.py")
        if os.path.exists(cand):
            spec = importlib.util.spec_from_file_location("_recap_next_sitecustomize", cand)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return


_activate()
_chain()
