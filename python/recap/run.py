# SPDX-License-Identifier: Apache-2.0
"""recap-run: runs a command with recap active in every process it starts, unmodified.

    recap-run [--no-preload] [--no-megatron] COMMAND [ARGS...]
    recap-run torchrun --nproc-per-node 8 train.py ...

It sets LD_PRELOAD to recap's interposer object, librecap-preload.so (captures seen by the
hooks, recap's own generators registered
automatically), and puts the folder of recap's sitecustomize (that file alone) first on
PYTHONPATH, so every Python process (torchrun's workers too, which inherit the environment) uses
recap.megatron in place of Megatron-Core's tensor_parallel.random, with automatic registration
of tracker states with every torch CUDA graph. The folder recap is installed in is not put on
PYTHONPATH (it would shadow that folder's other packages in every child): RECAP_SITE names it,
and the sitecustomize appends it to sys.path only where ``import recap`` fails without it.
``--help`` and ``--version`` print on stdout; nothing else does.
"""
from __future__ import annotations

import os
import sys

USAGE = ("usage: recap-run [--no-preload] [--no-megatron] COMMAND [ARGS...]\n"
         "Runs COMMAND with recap's LD_PRELOAD front end and recap.megatron in place of Megatron-Core's\n"
         "tensor_parallel.random in every Python process it starts.\n")


def environment(env: dict, preload: bool = True, megatron: bool = True) -> dict:
    """The environment recap-run gives the command."""
    from . import _paths
    out = dict(env)
    here = os.path.dirname(os.path.abspath(__file__))
    auto = os.path.join(here, "_autoload")
    pkg_root = os.path.dirname(here)
    paths = [auto] + [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    out["RECAP_SITE"] = pkg_root
    if not megatron:
        out["RECAP_MEGATRON"] = "0"
    if preload:
        # Found by file, not loaded: recap-run's own start stays light.
        lib = _paths.library_file()
        if lib is None:  # only on the loader's search path: load it to learn where it is
            from . import library_path
            lib = library_path()
        interposer = _paths.preload_beside(lib)
        old = [p for p in out.get("LD_PRELOAD", "").split(":") if p and p != interposer]
        out["LD_PRELOAD"] = ":".join([interposer] + old)
        out.setdefault("RECAP_LIB", lib)
    return out


def main(argv: "list[str] | None" = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    preload = megatron = True
    while args and args[0].startswith("-"):
        a = args.pop(0)
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        if a == "--version":
            from . import __version__
            sys.stdout.write(f"recap-run {__version__}\n")
            return 0
        if a == "--no-preload":
            preload = False
        elif a == "--no-megatron":
            megatron = False
        elif a == "--":
            break
        else:
            sys.stderr.write(f"recap-run: unknown option {a}\n{USAGE}")
            return 2
    if not args:
        sys.stderr.write(USAGE)
        return 2
    env = environment(os.environ, preload, megatron)
    try:
        os.execvpe(args[0], args, env)
    except OSError as e:
        sys.stderr.write(f"recap-run: {args[0]}: {e.strerror}\n")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
