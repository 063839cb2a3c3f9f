# SPDX-License-Identifier: Apache-2.0
"""torch's CUDA generators as recap framework generators, and their registration with torch's
CUDA graphs.

- ``generator(device)``: the recap generator backed by ``torch.cuda.default_generators[device]``.
  recap's trackers (``recap.megatron``) drive it through the framework table of include/recap.h:
  the value form is ``get_state``/``set_state`` (16 bytes, ``torch.cuda.get_rng_state``'s
  layout), the graph-safe form is torch's state objects (``clone_state``, ``graphsafe_get_state``,
  ``graphsafe_set_state``). Everything torch draws inside a fork (dropout, randn, fused
  attention) then draws from the named state. The table's operations are recap._C's
  (recap/csrc/generator_ops.cpp: torch's own C++ calls, no Python in them) where the extension
  was built for the running torch, and this module's Python ones otherwise (``backend()``).
- Registration: torch before 2.14 draws inside a capture only from generator states registered
  with the graph before its capture began. ``install()`` registers every live graph-safe state of
  every recap tracker with each graph just before torch's capture_begin (``torch.cuda.graph``,
  ``make_graphed_callables`` and direct calls all go through it). No
  ``register_generator_state`` in user code. torch 2.14 and later register a state lazily on its
  first draw in a capture, so there recap registers nothing. Importing ``recap.megatron``
  installs it.
- Graph lifecycle: recap follows captures through torch's own CUDA-graph hooks where torch has
  them (2.14 on) and through recap/_graph_hooks.py's shim of the same hooks on older torch, so the
  same functions run at the same points everywhere; it patches only what no hook can do (that
  module and ``install()`` say what and why).
- Replays: torch replays a graph by writing every registered state's seed and offset to the
  device (two kernels each, drawn from or not), so registering every tracker state would make
  each replay pay for all of them. Where recap's replay was checked against torch's (torch 2.11:
  recap/csrc/graph_replay.cpp), a graph captured while recap is installed advances the device
  offsets of the states it draws from itself (one captured node at its end), and recap's replay
  (put in ``CUDAGraph.replay``) writes a state only when eager work moved it since the last
  launch, advances the host offsets as torch would and launches the graph: no device work in
  steady state (recap/_replay.py says when it steps aside; ``RECAP_TORCH_REPLAY=0`` turns it
  off). On other torch releases torch's replay runs, and recap says so once.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
import os
import threading
import weakref
from typing import Dict, Iterable, List, Optional

try:
    import torch
except ImportError as e:  # one clear line instead of a traceback from deep inside
    raise ImportError("recap.torch needs PyTorch, which is not installed here: install torch "
                      "(pip install torch), then recap-rng against it (pip install "
                      "--no-build-isolation ./python)") from None

from . import _abi, _ext
from . import _lib
from ._lib import RecapError, check, lib
from . import _verify
from ._verify import GraphMismatch, GraphMismatchWarning

__all__ = ["backend", "TorchGenerator", "generator", "install", "uninstall", "register_tracker",
           "registered_states", "needs_registration", "exact_capture", "warmup",
           "make_graphed_callables", "verified_graph", "GraphMismatch", "GraphMismatchWarning",
           "RecapTracker", "dropout", "launch_dropout",
           "reference_keep", "kernel_backend"]

# recap's own dropout (recap/_dropout.py), imported on first use so that Triton loads only then.
_DROPOUT = {"RecapTracker", "dropout", "launch_dropout", "reference_keep", "kernel_backend",
            "philox4x32_10", "curand_words", "dropout_threshold", "include_dir"}


def __getattr__(name):
    if name in _DROPOUT:
        from . import _dropout
        return getattr(_dropout, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_OK = _abi.RECAP_OK
_ERR = _abi.RECAP_ERR_STATE


def _device_index(device=None) -> int:
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    return d.index if d.index is not None else torch.cuda.current_device()


def _state_bytes(t: torch.Tensor) -> bytes:
    return bytes(t.contiguous().view(torch.uint8).cpu().numpy().tobytes())


def _state_tensor(buf) -> torch.Tensor:
    return torch.frombuffer(bytearray(ctypes.string_at(buf, _abi.RECAP_STATE_BYTES)),
                            dtype=torch.uint8)


class TorchGenerator:
    """A torch CUDA default generator as a recap framework generator (one per device).

    State objects are ``torch.Generator`` objects sharing torch's state (what
    ``graphsafe_get_state`` returns and ``register_generator_state`` registers); recap refers to
    them by handle. ``state_current`` returns the object recap installed last: recap assumes it
    is the one installing state objects into this generator while its trackers run (Megatron's
    module replaced by ``recap.megatron`` is)."""

    def __init__(self, index: int):
        torch.cuda.init()
        self.index = index
        self.torch_generator = torch.cuda.default_generators[index]
        self._objects: Dict[int, list] = {}  # handle -> [torch.Generator, references]
        self._next = 1
        self._installed: Optional[int] = None
        self._lock = threading.RLock()
        self._error: Optional[BaseException] = None
        self._ext = _ext.module()
        if self._ext is not None:
            # The table and its context live in recap._C: no Python runs in its operations.
            table, context = self._ext.framework(index)
            ops = ctypes.cast(ctypes.c_void_p(table), ctypes.POINTER(_abi.FrameworkOps))
            ctx = ctypes.c_void_p(context)
        else:
            self._ops = self._make_ops()
            ops, ctx = ctypes.byref(self._ops), None
        h = ctypes.c_void_p()
        check(lib().recap_generator_create_framework(ops, ctx, index, ctypes.byref(h)),
              "recap_generator_create_framework")
        self.handle = h

    @property
    def fast(self) -> bool:
        """Whether the operations run in recap's torch extension (recap._C) rather than Python
        (recap.torch.backend() says why not)."""
        return self._ext is not None

    # -------------------------------------------------------------- objects by handle

    def _new_handle(self, gen: torch.Generator, refs: int) -> int:
        """A handle for recap (Python operations): a number, unique while the object lives."""
        with self._lock:
            h = self._next
            self._next += 1
            self._objects[h] = [gen, refs]
            return h

    def object(self, handle) -> torch.Generator:
        """The torch.Generator behind a state handle."""
        if self._ext is not None:
            return self._ext.state_generator(int(handle))
        with self._lock:
            return self._objects[int(handle)][0]

    # -------------------------------------------------------------- the table

    def _guard(self, fn):
        """Wraps an operation: an exception becomes RECAP_ERR_STATE for recap (which undoes what
        it changed) and is re-raised by the Python call that led to it."""
        def op(*args):
            try:
                r = fn(*args)
                return _OK if r is None else r
            except BaseException as e:  # noqa: BLE001 - must not unwind through C
                # Kept without its traceback: that traceback's frames lead, through the C call,
                # to the caller's whole stack, which a kept exception would keep alive (until
                # the next error, perhaps inside a capture: raise_pending says why that
                # matters). The message is torch's; the re-raise gets a traceback of its own.
                self._error = e.with_traceback(None)
                return _ERR
        return op

    def _make_ops(self) -> _abi.FrameworkOps:
        g = self.torch_generator

        def get_state(_fw, out):
            t = g.get_state()
            ctypes.memmove(out, t.data_ptr(), _abi.RECAP_STATE_BYTES)

        def set_state(_fw, buf):
            g.set_state(_state_tensor(buf))

        def state_create(_fw, seed, obj_p):
            s = g.clone_state()
            s.manual_seed(seed)
            obj_p[0] = self._new_handle(s, 1)

        def state_clone(_fw, obj, clone_p):
            clone_p[0] = self._new_handle(self.object(obj).clone_state(), 1)

        def state_install(_fw, obj):
            g.graphsafe_set_state(self.object(obj))
            with self._lock:
                prev, self._installed = self._installed, int(obj)
                e = self._objects.get(prev) if prev is not None else None
                if e is not None and e[1] <= 0 and prev != self._installed:
                    del self._objects[prev]

        def state_current(_fw, obj_p):
            with self._lock:
                h = self._installed
                if h is None or h not in self._objects:
                    # torch's own state object, lent: recap retains it when it keeps it
                    h = self._new_handle(g.graphsafe_get_state(), 0)
                    self._installed = h
                obj_p[0] = h

        def state_get(_fw, obj, out):
            t = self.object(obj).get_state()
            ctypes.memmove(out, t.data_ptr(), _abi.RECAP_STATE_BYTES)

        def state_set(_fw, obj, buf):
            self.object(obj).set_state(_state_tensor(buf))

        def state_release(_fw, obj):
            with self._lock:
                e = self._objects.get(int(obj))
                if e is not None:
                    e[1] -= 1
                    if e[1] <= 0 and int(obj) != self._installed:
                        del self._objects[int(obj)]

        def state_retain(_fw, obj):
            with self._lock:
                self._objects[int(obj)][1] += 1

        def needs_registration(_fw, needs_p):
            needs_p[0] = 1 if needs_registration() else 0

        fns = {"get_state": get_state, "set_state": set_state, "state_create": state_create,
               "state_clone": state_clone, "state_install": state_install,
               "state_current": state_current, "state_get": state_get, "state_set": state_set,
               "state_retain": state_retain, "needs_registration": needs_registration}
        ops = _abi.FrameworkOps()
        ops.version = _abi.RECAP_FRAMEWORK_OPS_VERSION
        self._name = f"torch.cuda:{self.index}".encode()
        ops.name = self._name
        self._callbacks = []  # the table holds C pointers to these: keep them alive
        for field, ftype in _abi.FrameworkOps._fields_[2:]:
            if field == "state_release":  # returns nothing; must not raise into C
                def release(fw, obj, _f=state_release):
                    try:
                        _f(fw, obj)
                    except BaseException:  # noqa: BLE001
                        pass
                cb = ftype(release)
            else:
                cb = ftype(self._guard(fns[field]))
            self._callbacks.append(cb)
            setattr(ops, field, cb)
        return ops

    def raise_pending(self, err: RecapError) -> None:
        """Re-raises the exception an operation hit (recap reported it as a status): torch's
        own error, as torch's Python call would have raised it, caused by ``err``; else raises
        ``err``. Always raises.

        No frame here keeps an exception it raised: the exception's traceback holds the frame,
        so a frame holding the exception makes a cycle only the cyclic collector frees, keeping
        every frame up the caller's stack alive with it (a graph being captured there, its
        tensors). The collector then destroys them whenever it runs, inside a later capture
        too, where freeing a CUDA graph's memory invalidates that capture (seen on an H100: a
        fork refused in one capture, a later capture failed with "operation failed due to a
        previous error during capture")."""
        try:
            if self._ext is not None:
                msg = self._ext.take_error()
                if msg:
                    raise RuntimeError(msg) from err
                raise err
            e, self._error = self._error, None
            if e is not None:
                raise e from err
            raise err
        finally:
            err = e = None


_generators: Dict[int, TorchGenerator] = {}
_gen_lock = threading.Lock()


def generator(device=None) -> TorchGenerator:
    """The recap framework generator for torch's default CUDA generator of ``device``."""
    idx = _device_index(device)
    with _gen_lock:
        g = _generators.get(idx)
        if g is None:
            g = _generators[idx] = TorchGenerator(idx)
        return g


def backend() -> Dict[str, object]:
    """Which path recap.torch runs and why: ``extension`` (recap._C drives torch's generators)
    or ``python`` (recap's Python operations, slower), with the torch it was built for;
    ``replay``: whether recap replays torch graphs itself; ``registration``: "" or why automatic
    registration stopped (or "lazy": this torch registers a state on its first draw in a
    capture, so recap registers nothing); ``hooks``: "torch" where recap follows graphs through
    torch's own lifecycle hooks, "shim" where through recap's shim of them; ``patched``: the
    CUDAGraph methods recap wraps now; ``layout``: the generator-state layout recap._C was
    built for (torch_access.h), None without it."""
    from . import _graph_hooks, _replay
    ext = _ext.module()
    if registration_problem:
        registration = registration_problem
    elif not needs_registration():
        registration = "lazy"
    elif not hasattr(torch.cuda.CUDAGraph, "register_generator_state"):
        registration = ("this torch has no CUDAGraph.register_generator_state: tracker states "
                        "are not registered with captures")
    else:
        registration = ""
    patched = _graph_hooks.patched()
    if _orig and torch.cuda.graphs.CUDAGraph.__dict__.get("replay") is not _orig.get("replay"):
        patched = sorted(patched + ["replay"])
    return {"ops": "extension" if ext is not None else "python", "why": _ext.why,
            "torch": torch.__version__, "built_for": _ext.built_for(),
            "replay": bool(_replay._bound), "replay_why": _replay.why,
            "registration": registration,
            "hooks": "torch" if _graph_hooks.torch_has_hooks() else "shim",
            "patched": patched,
            "layout": None if ext is None else ext.STATE_LAYOUT}


def needs_registration() -> bool:
    """Whether this torch rejects a draw from a generator state not registered with the
    capture ("Attempt to increase offset for a CUDA generator not in capture mode"): torch
    before 2.14 does; 2.14 registers such states lazily on their first draw (recap._C's
    per-capture-lazy layout). A behaviour, not an API torch exposes: told by the version."""
    try:
        v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:  # a local build's odd version: assume the need, as registering is safe
        return True
    return v < (2, 14)


# ------------------------------------------------------------------ registration with graphs

_trackers: "weakref.WeakSet" = weakref.WeakSet()


def register_tracker(tracker) -> None:
    """Makes ``tracker`` (anything with a ``graph_safe_generators()`` method) part of automatic
    registration: its graph-safe states are registered with every torch graph captured later."""
    _trackers.add(tracker)


def registered_states() -> List[torch.Generator]:
    """Every live graph-safe state of every registered tracker."""
    out: List[torch.Generator] = []
    for t in list(_trackers):
        out.extend(t.graph_safe_generators())
    return out


registration_problem = ""  # why automatic registration stopped, when it did


def _state_device(state) -> Optional[int]:
    d = getattr(state, "device", None)
    return None if d is None or d.type != "cuda" else (d.index or 0)


def register_with(graph, states: Iterable[torch.Generator], device: Optional[int] = None) -> int:
    """Registers ``states`` with ``graph`` before its capture: only those of ``device`` (the
    capture's, the current device when None). A registration torch refuses, or a torch without
    the call, is said once (RECAP_LOG, recap-probe) and the capture goes on as torch would run
    it without recap; the count registered is returned."""
    global registration_problem
    if registration_problem:
        return 0
    reg = getattr(graph, "register_generator_state", None)
    if reg is None:
        registration_problem = ("this torch has no CUDAGraph.register_generator_state: tracker "
                                "states are not registered with captures")
        _lib.log_once("warn", "recap.torch: " + registration_problem)
        return 0
    dev = torch.cuda.current_device() if device is None else device
    n = 0
    for s in states:
        if _state_device(s) != dev:
            continue
        try:
            reg(s)
        except Exception as e:  # noqa: BLE001 - never the reason a capture fails
            registration_problem = (f"torch refused to register a tracker state with a graph "
                                    f"({type(e).__name__}: {e}): automatic registration is off")
            _lib.log_once("warn", "recap.torch: " + registration_problem)
            return n
        n += 1
    return n


# ------------------------------------------------------------------ graphs on = graphs off


_all_devices = False


def _default_generators() -> None:
    """Each device's default generator as a recap generator, once, so every scope restores it."""
    global _all_devices
    if not _all_devices:
        for i in range(torch.cuda.device_count()):
            generator(i)
        _all_devices = True


class exact_capture(contextlib.ContextDecorator):
    """Warm-ups and captures inside leave every generator recap knows where it was: torch's
    default CUDA generators (of every device) and every recap tracker's states (recap's
    recap_exact_capture_enter/leave). So the first replay of a graph captured inside draws what
    the first eager step would have, and a graphed run reproduces the eager one bit for bit.
    Restores on exceptions too; nests; process-wide (no other thread should draw meanwhile).
    ``RECAP_EXACT_CAPTURE=0`` makes it do nothing. A class rather than a generator function:
    entering and leaving are two C calls (what they cost, with torch's generators driven by
    recap._C and by Python: python/tests/gpu/graphs_exact.py, bench/RESULTS.md)."""

    __slots__ = ("_scope", "_entered")

    def __init__(self) -> None:
        self._scope = ctypes.c_void_p()
        self._entered = False

    def _recreate_cm(self) -> "exact_capture":
        # As a decorator, a scope per call (ContextDecorator would reuse this one): recursive
        # and concurrent calls each get their own.
        return type(self)()

    def __enter__(self) -> "exact_capture":
        # The hot path is kept to two foreign calls: a scope is entered around every warm-up.
        if self._entered:
            raise RuntimeError("recap.torch.exact_capture: this scope is entered already")
        if not _all_devices:
            _default_generators()
        fns = _scope_fns or _bind_scope_fns()
        st = fns[0](ctypes.byref(self._scope))
        if st:
            check(st, "recap_exact_capture_enter")
        self._entered = True
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._entered = False
        st = (_scope_fns or _bind_scope_fns())[1](self._scope)
        if st and exc_type is None:  # an exception inside wins over a failed restore
            check(st, "recap_exact_capture_leave")
        return False


_scope_fns = None


def _bind_scope_fns():
    global _scope_fns
    _scope_fns = (lib().recap_exact_capture_enter, lib().recap_exact_capture_leave)
    return _scope_fns


# The line a user writes around a hand-written warm-up and torch.cuda.graph.
warmup = exact_capture

# The check at capture (recap._verify) runs its phases in this scope and watches these states.
_verify.install_port(exact_capture, registered_states)

_orig_make_graphed_callables = None


def make_graphed_callables(callables, sample_args, *args, verify=None, **kwargs):
    """torch.cuda.make_graphed_callables (same arguments) inside ``exact_capture``: its warm-up
    iterations and captures move no generator, so graphed training equals eager training.

    ``verify`` (default: ``RECAP_VERIFY_GRAPHS``, else ``"raise"``) checks that too: before the
    capture the callables run one step eagerly (forward in order, backward in reverse order with
    fixed output gradients), and after it the graphed callables replay that step once from the
    same generator states; outputs and the gradients of inputs and parameters must be equal bit
    for bit. A mismatch raises ``recap.torch.GraphMismatch`` (``"warn"``: warns
    ``GraphMismatchWarning``; ``False``: no check) naming what differs, how the generators'
    offsets moved, and, where torch picks another attention kernel under capture, the backend to
    pin; modules then get their eager forward back. The eager step runs twice: what two eager
    runs already give differently (non-deterministic kernels) is not compared. Generators
    (torch's CPU one too) and the modules' buffers end where the capture alone would leave them;
    the check holds a step's outputs and gradients a few times over while it runs."""
    fn = _orig_make_graphed_callables or torch.cuda.make_graphed_callables
    how = _verify.mode(verify)
    if how == "off":
        with exact_capture():
            return fn(callables, sample_args, *args, **kwargs)
    multi = isinstance(callables, tuple)
    calls = callables if multi else (callables,)
    samples = sample_args if multi else (sample_args,)
    v = _verify.Verifier("make_graphed_callables",
                         [c for c in calls if isinstance(c, torch.nn.Module)])
    grads: Dict[int, tuple] = {}
    with exact_capture():
        v.eager(lambda: _graphed_step(calls, samples, grads))
        graphed = v.capture(lambda: fn(callables, sample_args, *args, **kwargs))
        try:
            v.replay(lambda: _graphed_step(graphed if multi else (graphed,), samples, grads))
            v.check(how)
        except BaseException:
            # Raised: the modules are given back their eager forward (torch's function had put
            # the graphed one on each instance), so a caller who falls back to eager runs eager.
            v.release()
            for c in calls:
                if isinstance(c, torch.nn.Module):
                    c.__dict__.pop("forward", None)
            raise
    return graphed


def _clone_arg(a):
    if isinstance(a, torch.Tensor):
        return a.detach().clone().requires_grad_(a.requires_grad)
    return a


def _graphed_step(calls, samples, grads: Dict[int, tuple]):
    """One training step of make_graphed_callables' callables as it replays them: forwards in
    order, backwards in reverse; the named outputs and gradients. The first (eager) step chooses
    the outputs to differentiate (those that require grad) and makes their gradients (a CPU
    generator of its own: no CUDA generator moves); later steps reuse both, since a graphed
    callable's outputs all require grad as outputs of torch's autograd function."""
    from torch.utils._pytree import tree_flatten
    named, pending = [], []
    for i, (c, args) in enumerate(zip(calls, samples)):
        inputs = tuple(_clone_arg(a) for a in args)
        outs = tree_flatten(c(*inputs))[0]
        named += [(f"callable {i} output {j}", o) for j, o in enumerate(outs)]
        pending.append((i, c, inputs, outs))
    for i, c, inputs, outs in reversed(pending):
        if i not in grads:
            which = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and
                     o.requires_grad]
            g = torch.Generator().manual_seed(0x5EED + i)
            grads[i] = (which, [torch.randn(outs[k].shape, generator=g).to(outs[k].device,
                                                                            outs[k].dtype)
                                for k in which])
        which, gouts = grads[i]
        diff = [outs[k] for k in which if k < len(outs)]
        wrt = [(f"input {k}", a) for k, a in enumerate(inputs)
               if isinstance(a, torch.Tensor) and a.requires_grad]
        if isinstance(c, torch.nn.Module):
            wrt += [(f"parameter {n}", p) for n, p in c.named_parameters() if p.requires_grad]
        if not diff or not wrt or len(diff) != len(gouts) or \
                not all(isinstance(o, torch.Tensor) and o.requires_grad for o in diff):
            continue
        got = torch.autograd.grad(diff, [t for _, t in wrt], gouts, allow_unused=True)
        named += [(f"callable {i} gradient of {n}", t) for (n, _), t in zip(wrt, got)]
    return named


def verified_graph(fn, *args, verify=None, pool=None, warmup_iters: int = 1):
    """Captures ``fn(*args)`` into a new ``torch.cuda.CUDAGraph`` (after ``warmup_iters`` eager
    calls on a side stream, as torch advises) and checks its first replay against ``fn(*args)``
    run eagerly from the same generator states, bit for bit (``verify`` as for
    ``make_graphed_callables``). Forward only: ``fn`` runs under ``torch.no_grad()``. Returns
    ``(graph, outputs)``: the outputs are the graph's static tensors, and ``args`` its static
    inputs (copy new data into them, then ``graph.replay()``). Generators (torch's CPU one too)
    and module buffers end where capturing alone would leave them."""
    from torch.utils._pytree import tree_flatten
    how = _verify.mode(verify)
    v = _verify.Verifier("verified_graph", [fn] if isinstance(fn, torch.nn.Module) else [])
    state = {}

    def capture():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup_iters):
                fn(*args)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            state["out"] = fn(*args)
        return g

    def named(out):
        return [(f"output {j}", o) for j, o in enumerate(tree_flatten(out)[0])]

    with exact_capture(), torch.no_grad():  # (this scope alone restores, unchecked)
        if how == "off":
            return capture(), state["out"]
        v.eager(lambda: named(fn(*args)))
        graph = v.capture(capture)
        v.replay(lambda: (graph.replay(), named(state["out"]))[1])
    v.check(how)
    return graph, state["out"]


_orig: Dict[str, object] = {}  # torch.cuda.graphs.CUDAGraph's methods before install()
_handles: list = []  # what install() registered with recap/_graph_hooks.py
_install_lock = threading.Lock()
stats = {"graphs": 0, "states_registered": 0}


def _before_capture_begin(graph) -> None:
    """Before torch's capture_begin, outside the capture: every tracker state registered with
    the graph, where torch registers none by itself (before 2.14)."""
    stats["states_registered"] += register_with(graph, registered_states())


def _on_capture_start(graph) -> None:
    """The capture is live: counted, and recap's plan for its replays (recap/_replay.py) starts
    again (torch's capture_begin rewrote the registered states' device tensors)."""
    stats["graphs"] += 1
    from . import _replay
    plan = _replay.begin(graph, _orig)
    if plan is not None:
        _replay.begun(graph, plan)


def _before_capture_end(graph) -> None:
    """Still capturing: recap's advance node, where recap replays the graph."""
    from . import _replay
    plan = _replay.plan_of(graph)
    if plan is not None:
        _replay.ending(graph, plan)


def _on_captured(graph) -> None:
    """At the end of the capture and after each instantiation: the exec (or the kept graph, which
    a later instantiation makes an exec of) that holds the advance node."""
    from . import _replay
    plan = _replay.plan_of(graph)
    if plan is not None:
        _replay.ended(graph, plan)


def install() -> None:
    """Registers tracker states with every torch CUDA graph from now on where torch needs it,
    replays those graphs itself where it can (recap/_replay.py: a replay then costs only the
    states the graph draws from), and makes torch's make_graphed_callables this module's
    (warm-up and capture inside ``exact_capture``). Idempotent.

    It follows graphs through torch's own lifecycle hooks where torch has them (2.14 on) and
    through recap/_graph_hooks.py's shim of the same hooks elsewhere: the same functions run at
    the same points on every torch. It patches only what no hook can do: registration before a
    capture begins (torch before 2.14), the advance node before a capture ends and the replay
    itself (where recap replays graphs: a hook runs beside torch's replay, it cannot take its
    place), and make_graphed_callables (its warm-ups run before any capture hook fires)."""
    global _orig_make_graphed_callables
    with _install_lock:
        if _orig:
            return
        from . import _graph_hooks, _replay
        cls = torch.cuda.graphs.CUDAGraph
        orig = {name: getattr(cls, name) for name in ("capture_begin", "capture_end", "replay")}
        _orig.update(orig)  # before patching: a failure below leaves install() idempotent
        replays = _replay.ready(orig)  # decided before any capture: replays are recap's or torch's
        handles = [_graph_hooks.on("capture_start", _on_capture_start)]
        if needs_registration():
            handles.append(_graph_hooks.before("capture_begin", _before_capture_begin))
        if replays:
            handles += [_graph_hooks.before("capture_end", _before_capture_end),
                        _graph_hooks.on("capture_end", _on_captured),
                        _graph_hooks.on("instantiate", _on_captured)]
        _handles.extend(handles)
        _orig_make_graphed_callables = torch.cuda.make_graphed_callables
        # Replays: recap's C++ method (no Python frame), where recap replays graphs at all.
        method = _replay.replay_method(orig)
        if method is not None:
            setattr(cls, "replay", method)
        # A function of its own in torch's slot: torch's name and doc there, this module's own
        # function left as it is, and the signature shown with verify= (wraps alone would show
        # torch's, through __wrapped__).
        def wrapped(*args, **kwargs):
            return make_graphed_callables(*args, **kwargs)
        functools.update_wrapper(wrapped, _orig_make_graphed_callables)
        wrapped.__signature__ = inspect.signature(make_graphed_callables)
        torch.cuda.make_graphed_callables = wrapped
        torch.cuda.graphs.make_graphed_callables = wrapped


def uninstall() -> None:
    global _orig_make_graphed_callables
    with _install_lock:
        cls = torch.cuda.graphs.CUDAGraph
        from . import _replay
        for h in _handles:
            h.remove()
        _handles.clear()
        method = _replay.replay_method(_orig) if _orig else None
        # Only recap's own: a wrapper another library put over it stays (and calls it).
        if "replay" in _orig and method is not None and cls.__dict__.get("replay") is method:
            setattr(cls, "replay", _orig["replay"])
        _orig.clear()
        if _orig_make_graphed_callables is not None:
            torch.cuda.make_graphed_callables = _orig_make_graphed_callables
            torch.cuda.graphs.make_graphed_callables = _orig_make_graphed_callables
            _orig_make_graphed_callables = None
