# SPDX-License-Identifier: Apache-2.0
"""Loaded at start-up by every Python process recap-run starts (its folder is first on
PYTHONPATH). It imports nothing of recap's or torch's: it puts a small finder first on
sys.meta_path that waits for the process's first import of torch or megatron, and once that
import has finished (the outermost of the two, when one imports the other) installs
recap.megatron's import hook (recap.megatron.install_hook: Megatron's tensor_parallel.random
answered by recap's, torch's graphs followed by recap.torch). A helper process that never imports
either (a data-loader worker, a tokenizer script, a shell-out to Python) pays only this file.
RECAP_MEGATRON=0 turns it off. Then it hands over to the sitecustomize that was there before, if
any."""
import os
import sys

WATCHED = ("torch", "megatron")


def _find_recap():
    """recap importable: from the job's own path, else from the folder recap-run found it in
    (RECAP_SITE), appended last so that it shadows nothing of the job's."""
    if not any(getattr(f, "find_spec", None) and f.find_spec("recap", None) for f in sys.meta_path):
        site = os.environ.get("RECAP_SITE")
        if site and site not in sys.path:
            sys.path.append(site)


def _activate():
    try:
        import recap.megatron
        recap.megatron.install_hook()
    except Exception as e:  # noqa: BLE001 - never break the job
        _warn(f"recap-run: could not install recap.megatron: {e}")


def _warn(message):
    """A warning in recap's log (RECAP_LOG=warn, RECAP_LOG_FILE); on stderr when even recap's
    Python package does not import, with any RECAP_LOG set."""
    try:
        from recap import _lib
    except Exception:  # noqa: BLE001 - the job goes on
        if os.environ.get("RECAP_LOG"):
            sys.stderr.write(f"recap: {message}\n")
        return
    _lib.log_once("warn", message)


class _FirstImport:
    """Finds nothing itself: for a watched top-level name it takes the spec the other finders
    give and runs recap's install after the module's own code, once the outermost watched import
    is done (torch imported inside megatron's import, or the other way round)."""

    def __init__(self):
        self.depth = 0
        self.done = False

    def find_spec(self, fullname, path=None, target=None):
        if self.done or fullname not in WATCHED:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real = spec.loader.exec_module

        def exec_module(module, _real=real):
            self.depth += 1
            try:
                _real(module)
            finally:
                self.depth -= 1
            if self.depth == 0 and not self.done:
                self.done = True
                if self in sys.meta_path:
                    sys.meta_path.remove(self)
                _activate()

        spec.loader.exec_module = exec_module
        return spec


def _chain():
    """Runs the next sitecustomize on the path (ours shadows it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        cand = os.path.join(entry, "sitecustomize.py")
        if os.path.exists(cand):
            import importlib.util  # (only then: it costs a few ms of every start)
            spec = importlib.util.spec_from_file_location("_recap_next_sitecustomize", cand)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return


_find_recap()  # (a path lookup, no import)
if os.environ.get("RECAP_MEGATRON", "1") != "0":
    if any(name in sys.modules for name in WATCHED):
        _activate()  # (imported already: a sitecustomize before ours did)
    else:
        sys.meta_path.insert(0, _FirstImport())
_chain()
