# SPDX-License-Identifier: Apache-2.0
"""Graphs on = graphs off, checked at capture: the first replay of a freshly captured graph
against the same step run eagerly, from the same generator states, bit for bit.

recap makes a replay draw the random numbers the eager step would; it cannot make torch pick the
same kernels under capture as eagerly. When it does not (scaled_dot_product_attention choosing
another backend under capture is the case met in practice), the graphed model silently computes
something else than the eager one it was made from. This module finds that out once, when the
graph is made, and says what differs:

- ``compare(eager, replayed)``: every tensor pair compared bit for bit (NaNs included); what
  differs, with how many elements and by how much.
- ``SdpaRecorder``: while it is active, every ``F.scaled_dot_product_attention`` call records the
  backend torch's dispatcher picks for its inputs (``torch._fused_sdp_choice``: the function
  the dispatcher itself asks), eagerly and under capture; ``findings()`` names the calls whose
  backend differs between the two, and calls made only under capture (other arguments for the
  same query, as from code that builds its mask differently while capturing) that run a backend
  no eager call on that query ran, each with the backend to pin
  (``torch.nn.attention.sdpa_kernel``).
- ``Verifier``: the phases around a capture (the eager reference, the capture, the first replay),
  each inside its own ``exact_capture`` scope, so each starts from the generator states the
  capture started from and leaves them there; module buffers (BatchNorm's running statistics)
  put back after each extra pass; the generators' offsets read before and after each step.
- ``GraphMismatch`` (raised) and ``GraphMismatchWarning`` (warned) carry the report.

``recap.torch.make_graphed_callables`` and ``recap.torch.verified_graph`` use it;
``RECAP_VERIFY_GRAPHS`` (raise, warn, 0) sets what a mismatch does where the caller did not say.
Cost: one eager step and one replay per graph, at creation; nothing per step.
"""
from __future__ import annotations

import contextlib
import datetime
import functools
import json
import os
import stat
import threading
import warnings
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from . import _lib

__all__ = ["GraphMismatch", "GraphMismatchWarning", "compare", "differing", "SdpaRecorder",
           "Verifier", "mode"]

# What a check needs of recap.torch (its exact-capture scope and the tracker states it registers
# with graphs), installed by recap.torch when it is imported: recap.torch imports this module,
# never the other way round. Without it (this module used alone) phases run in no scope.
_port_scope: Callable[[], "contextlib.AbstractContextManager"] = contextlib.nullcontext
_port_states: Callable[[], List[torch.Generator]] = list


def install_port(scope: Callable[[], "contextlib.AbstractContextManager"],
                 states: Callable[[], List[torch.Generator]]) -> None:
    global _port_scope, _port_states
    _port_scope, _port_states = scope, states


_MODES = ("raise", "warn", "off")  # src/base/settings.c lists them too (recap-probe flags typos)


class GraphMismatch(RuntimeError):
    """The first replay of a graph did not compute what the eager step computed."""

    def __init__(self, report: str, differences: List[str], offsets: List[str],
                 sdpa: List[str]) -> None:
        super().__init__(report)
        self.differences = differences
        self.offsets = offsets
        self.sdpa = sdpa


class GraphMismatchWarning(UserWarning):
    """What GraphMismatch says, as a warning (``verify="warn"``)."""


def mode(verify) -> str:
    """The caller's choice (True/False/"raise"/"warn"/"off"), else RECAP_VERIFY_GRAPHS, else
    raise."""
    if verify is None:
        verify = (os.environ.get("RECAP_VERIFY_GRAPHS", "raise") or "raise").lower()
        if verify not in _MODES and verify != "0":
            warnings.warn(f"RECAP_VERIFY_GRAPHS={verify!r} not understood (raise, warn, 0): "
                          "raise", stacklevel=3)
            verify = "raise"
    if verify is True:
        return "raise"
    if verify is False or verify in ("0", "off"):
        return "off"
    if verify not in _MODES:
        raise ValueError(f"verify={verify!r}: one of True, False, {', '.join(map(repr, _MODES))}")
    return verify


# ---------------------------------------------------------------- comparing tensors

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as integers of its element size (NaN = NaN when the bits are)."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    size = t.element_size()
    if t.is_floating_point() and size in _INT_OF_SIZE:
        return t.contiguous().view(_INT_OF_SIZE[size])
    return t


def _largest(d: torch.Tensor) -> float:
    """The largest finite element (0 for none); an infinite or NaN difference counts as inf."""
    if d.numel() == 0:
        return 0.0
    if not bool(torch.isfinite(d).all()):
        return float("inf")
    return float(d.max())


def _abs_diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a - b| elementwise in float64 (complex128 for complex), on a's device."""
    wide = torch.complex128 if a.is_complex() else torch.float64
    return (a.detach().to(wide) - b.detach().to(a.device, wide)).abs()


def _describe(t: torch.Tensor) -> str:
    return f"{list(t.shape)} {str(t.dtype).replace('torch.', '')}"


def compare(eager: Sequence[Tuple[str, Optional[torch.Tensor]]],
            replayed: Sequence[Tuple[str, Optional[torch.Tensor]]]) -> List[str]:
    """What differs between two lists of named tensors, bit for bit: one line per pair that
    does (shape, dtype, presence, or values: how many elements and the largest difference)."""
    return [line for _, line in differing(eager, replayed)]


def differing(eager: Sequence[Tuple[str, Optional[torch.Tensor]]],
              replayed: Sequence[Tuple[str, Optional[torch.Tensor]]]) -> List[Tuple[str, str]]:
    """compare's lines with the name of the tensor each is about ("" for the count)."""
    out: List[Tuple[str, str]] = []
    if len(eager) != len(replayed):
        out.append(("", f"the eager step gave {len(eager)} tensors, the replay "
                        f"{len(replayed)}"))
    for (name, a), (_, b) in zip(eager, replayed):
        if a is None or b is None:
            if (a is None) != (b is None):
                out.append((name, f"{name}: {'none' if a is None else 'a tensor'} eagerly, "
                                  f"{'none' if b is None else 'a tensor'} from the replay"))
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            out.append((name, f"{name}: {_describe(a)} eagerly, {_describe(b)} from the replay"))
            continue
        a_bits, b_bits = _bits(a), _bits(b.to(a.device))
        differ = a_bits != b_bits
        if a_bits.dim() > a.dim():  # complex: a difference in either part
            differ = differ.any(dim=-1)
        n = int(differ.sum())
        if n == 0:
            continue
        detail = ""
        if a.is_floating_point() or a.is_complex():
            d = _abs_diff(a, b)
            d = d[torch.isfinite(d)]
            if d.numel():
                detail = f", largest difference {float(d.max()):.3g}"
        out.append((name, f"{name} ({_describe(a)}): {n} of {a.numel()} elements differ"
                          f"{detail}"))
    return out


# ---------------------------------------------------------------- which attention kernel

def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


# One wrapper of F.scaled_dot_product_attention for the whole process, installed while any
# recorder is active in any thread: each call is recorded by the recorder active in the calling
# thread only (the innermost), so another thread's attention runs through a thread-local lookup
# and nothing else. The lock orders installs and removals between threads.
_sdpa_lock = threading.Lock()
_sdpa_users = 0
_sdpa_wrapper: Optional[Callable] = None
_sdpa_inner: Optional[Callable] = None
_sdpa_active = threading.local()  # .stack: this thread's active recorders


def _sdpa_stack() -> list:
    stack = getattr(_sdpa_active, "stack", None)
    if stack is None:
        stack = _sdpa_active.stack = []
    return stack


def _sdpa_install() -> None:
    global _sdpa_users, _sdpa_wrapper, _sdpa_inner
    import torch.nn.functional as F
    with _sdpa_lock:
        if _sdpa_users == 0:
            inner = F.scaled_dot_product_attention

            @functools.wraps(inner)
            def scaled_dot_product_attention(*args, **kwargs):
                stack = getattr(_sdpa_active, "stack", None)
                if stack:
                    stack[-1]._record(args, kwargs)
                return inner(*args, **kwargs)

            _sdpa_wrapper, _sdpa_inner = scaled_dot_product_attention, inner
            F.scaled_dot_product_attention = scaled_dot_product_attention
        _sdpa_users += 1


def _sdpa_remove() -> None:
    global _sdpa_users, _sdpa_wrapper, _sdpa_inner
    import torch.nn.functional as F
    with _sdpa_lock:
        _sdpa_users -= 1
        if _sdpa_users == 0:
            # Someone who replaced the attribute after recap keeps theirs (recap's wrapper, inside
            # it, only passes calls through from now on).
            if F.scaled_dot_product_attention is _sdpa_wrapper:
                F.scaled_dot_product_attention = _sdpa_inner
            _sdpa_wrapper = _sdpa_inner = None


class SdpaRecorder(contextlib.ContextDecorator):
    """Records, for every ``torch.nn.functional.scaled_dot_product_attention`` call the entering
    thread makes while active, the backend torch's dispatcher picks for those inputs and whether
    the call ran under capture (other threads' calls are not recorded). ``capturing`` says which
    (tests pass their own). Re-entrant; the attribute is torch's own again once the last active
    recorder of the process leaves, whatever it leaves by."""

    def __init__(self, capturing: Callable[[], bool] = _capturing) -> None:
        self.capturing = capturing
        self.calls: List[Tuple[str, bool, str]] = []  # (signature, under capture, backend)
        self._query: Dict[str, str] = {}  # signature -> its query's shape and dtype

    def _record(self, args, kwargs) -> None:
        try:
            self._record_call(args, kwargs)
        except Exception:  # noqa: BLE001 - a diagnosis: never the reason a call fails
            pass

    def _record_call(self, args, kwargs) -> None:
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
                 "enable_gqa")  # F.scaled_dot_product_attention's parameters, in order
        given = dict(zip(names, args))
        given.update((n, kwargs[n]) for n in names if n in kwargs)
        try:
            q, k, v = given["query"], given["key"], given["value"]
            mask = given.get("attn_mask")
            dropout = given.get("dropout_p", 0.0)
            causal = given.get("is_causal", False)
            scale = given.get("scale")
            gqa = given.get("enable_gqa", False)
            choice = torch._fused_sdp_choice(q, k, v, mask, dropout, causal, scale=scale,
                                             enable_gqa=gqa)
            backend = torch.nn.attention.SDPBackend(int(choice)).name
        except Exception as e:  # noqa: BLE001 - a diagnosis: never the reason a call fails
            backend = f"unknown ({type(e).__name__})"
            q = given.get("query")
            mask = dropout = causal = None
        sig = "scaled_dot_product_attention("
        if isinstance(q, torch.Tensor):
            sig += f"query {_describe(q)}"
            sig += f", dropout_p={dropout}" if dropout else ""
            sig += ", is_causal=True" if causal else ""
            sig += f", attn_mask {_describe(mask)}" if isinstance(mask, torch.Tensor) else ""
        self.calls.append((sig + ")", bool(self.capturing()), backend))
        self._query[sig + ")"] = _describe(q) if isinstance(q, torch.Tensor) else ""

    def __enter__(self) -> "SdpaRecorder":
        _sdpa_install()
        _sdpa_stack().append(self)
        return self

    def __exit__(self, *exc) -> bool:
        try:
            stack = _sdpa_stack()
            for i in range(len(stack) - 1, -1, -1):  # this recorder's innermost entry
                if stack[i] is self:
                    del stack[i]
                    break
        finally:
            _sdpa_remove()
        return False

    def findings(self) -> List[str]:
        """One line per call signature whose backend differs between eager and capture, with
        the backend to pin: the one chosen under capture (it captures, and eager runs it too)."""
        seen: Dict[str, Dict[bool, List[str]]] = {}
        for sig, captured, backend in self.calls:
            seen.setdefault(sig, {}).setdefault(captured, [])
            if backend not in seen[sig][captured]:
                seen[sig][captured].append(backend)
        out = []
        for sig, by in seen.items():
            eager, graphed = by.get(False, []), by.get(True, [])
            if not eager or not graphed or eager == graphed:
                continue
            out.append(f"{sig}: torch runs {'/'.join(eager)} eagerly and {'/'.join(graphed)} "
                       f"under capture; {self._pin(graphed[0])}")
        # A call made only under capture, with other arguments than any eager call on the same
        # query (code that builds the mask or the flags on the host, differently while capturing),
        # and a backend no eager call on that query ran.
        for sig, by in seen.items():
            if False in by or not self._query.get(sig):
                continue
            others = [(e, b) for e, eb in seen.items() if True not in eb and e != sig and
                      self._query.get(e) == self._query[sig] for b in eb[False]]
            ran = {b for _, b in others}
            if others and not ran & set(by[True]):
                out.append(f"{sig}: made only under capture, running {'/'.join(by[True])}; "
                           f"eagerly this query went to {others[0][0]} instead, running "
                           f"{'/'.join(sorted(ran))} (the code passes other arguments while "
                           f"capturing); {self._pin(by[True][0])}")
        return out

    @staticmethod
    def _pin(backend: str) -> str:
        return ("pin one backend for both, e.g. wrap the model's forward (eager steps and the "
                "capture alike) in `with torch.nn.attention.sdpa_kernel(torch.nn.attention."
                f"SDPBackend.{backend}):`")


# ---------------------------------------------------------------- generators and buffers

def _generators() -> List[Tuple[str, torch.Generator]]:
    """The generators whose offsets a graph's replay moves: torch's default CUDA generators and
    the graph-safe states recap registers with every graph."""
    gens = [(f"torch's default CUDA generator (cuda:{i})", g)
            for i, g in enumerate(torch.cuda.default_generators)]
    for k, s in enumerate(_port_states()):
        gens.append((f"recap tracker state {k} ({s.device})", s))
    return gens


def _offsets(gens) -> List[Optional[int]]:
    out = []
    for _, g in gens:
        try:
            out.append(int(g.get_offset()))
        except Exception:  # noqa: BLE001 - a generator that cannot say
            out.append(None)
    return out


def _buffers(modules: Iterable[torch.nn.Module]) -> List[torch.Tensor]:
    seen, out = set(), []
    for m in modules:
        for b in m.buffers():
            if id(b) not in seen:
                seen.add(id(b))
                out.append(b)
    return out


# ---------------------------------------------------------------- the phases

class Verifier:
    """The phases of one verification, in order: ``eager(step)``, then ``capture(fn)``, then
    ``replay(step)``, then ``check()``. ``step`` returns the named tensors to compare. Each phase
    runs inside its own exact-capture scope, so each starts where the capture started; module
    buffers are put back after the eager step (to what they were) and after the replay (to what
    the capture left)."""

    def __init__(self, what: str, modules: Iterable[torch.nn.Module] = ()) -> None:
        self.what = what
        self.gens = _generators()
        self.buffers = _buffers(modules)
        self.sdpa = SdpaRecorder()
        self.eager_out: List[Tuple[str, Optional[torch.Tensor]]] = []
        self.replay_out: List[Tuple[str, Optional[torch.Tensor]]] = []
        self.moved: Dict[str, List[Optional[int]]] = {}
        self.unstable: set = set()  # names that differ between two eager runs
        self.again: Dict[str, torch.Tensor] = {}  # their second eager run

    def _save_buffers(self) -> List[torch.Tensor]:
        return [b.detach().clone() for b in self.buffers]

    def _load_buffers(self, saved) -> None:
        with torch.no_grad():
            for b, s in zip(self.buffers, saved):
                b.copy_(s)

    def _step(self, key: str, step) -> List[Tuple[str, Optional[torch.Tensor]]]:
        cpu = torch.get_rng_state()  # exact_capture covers the CUDA generators, not torch's CPU one
        try:
            with _port_scope():
                before = _offsets(self.gens)
                out = [(n, t.detach().clone() if isinstance(t, torch.Tensor) else t)
                       for n, t in step()]
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                after = _offsets(self.gens)
        finally:
            torch.set_rng_state(cpu)
        self.moved[key] = [None if a is None or b is None else b - a
                           for a, b in zip(before, after)]
        return out

    def eager(self, step) -> None:
        """The eager step, twice from the same states: what differs between the two runs comes
        from kernels that are not deterministic eagerly (atomics in backward passes, cuBLAS's
        workspace, reductions), so those tensors are held to the spread of the two eager runs
        instead of bit equality: a graph is not failed for what eager training itself does not
        repeat, but a replay further from the eager step than twice that spread (a host value
        read at capture, a kernel dispatched otherwise) still is."""
        saved = self._save_buffers()
        with self.sdpa:
            self.eager_out = self._step("eager", step)
            self._load_buffers(saved)
            again = self._step("eager again", step)
        self._load_buffers(saved)
        self.unstable = {n for n, _ in differing(self.eager_out, again) if n}
        self.again = {n: t for n, t in again if n in self.unstable}
        del again
        self._initial = saved

    def capture(self, fn):
        with self.sdpa, _port_scope():
            return fn()

    def replay(self, step) -> None:
        after_capture = self._save_buffers()
        self._load_buffers(self._initial)
        self.replay_out = self._step("replay", step)
        self._load_buffers(after_capture)

    def _beyond_spread(self) -> List[str]:
        """The unstable tensors whose replay lies further from the first eager run than twice
        the distance between the two eager runs (largest elementwise differences), beyond the
        rounding of their values."""
        out = []
        for (name, a), (_, b) in zip(self.eager_out, self.replay_out):
            again = self.again.get(name)
            if name not in self.unstable or again is None or a is None or b is None or \
                    a.shape != b.shape or not (a.is_floating_point() or a.is_complex()):
                continue
            spread, dev = _largest(_abs_diff(a, again)), _largest(_abs_diff(a, b))
            # plus the rounding of values of a's magnitude in a's dtype: differences of rounded
            # values are only known to that, so a replay exactly twice the spread away is not
            # failed or passed by the last bit of its rounding
            slack = 4 * torch.finfo(a.dtype).eps * _largest(a.detach().abs().to(torch.float64))
            if dev > 2 * spread + slack:
                out.append(f"{name} ({_describe(a)}): differs from the eager step by up to "
                           f"{dev:.3g}, while two eager runs differ by up to {spread:.3g}")
        return out

    def report(self) -> Optional[GraphMismatch]:
        if self.unstable and len(self.eager_out) == len(self.replay_out):
            keep = [k for k, (n, _) in enumerate(self.eager_out) if n not in self.unstable]
            differences = compare([self.eager_out[k] for k in keep],
                                  [self.replay_out[k] for k in keep]) + self._beyond_spread()
        else:
            differences = compare(self.eager_out, self.replay_out)
        offsets = []
        for (name, _), e, r in zip(self.gens, self.moved.get("eager", []),
                                   self.moved.get("replay", [])):
            if e is not None and r is not None and e != r:
                offsets.append(f"{name}: the eager step advanced its offset by {e}, the first "
                               f"replay by {r} (a kernel that draws a different amount under "
                               f"capture is the usual cause)")
        if not differences and not offsets:
            return None
        sdpa = self.sdpa.findings()
        lines = [f"recap: {self.what}: the first replay of the captured graph does not compute "
                 f"what the same step computes eagerly from the same generator states"]
        lines += [f"  differs: {d}" for d in differences[:12]]
        if len(differences) > 12:
            lines.append(f"  ... and {len(differences) - 12} more")
        lines += [f"  generator: {o}" for o in offsets]
        if self.unstable:
            lines.append(f"  (held to the eager runs' spread, not bit equality: "
                         f"{len(self.unstable)} tensors that two eager runs already give "
                         f"differently, e.g. {sorted(self.unstable)[0]})")
        lines += [f"  cause: {s}" for s in sdpa]
        if not sdpa:
            lines.append("  cause: not one recap can name (torch chose the same attention "
                         "backends eagerly and under capture); a kernel that reads a host value "
                         "at capture, or one dispatched differently under capture, computes "
                         "differently on replay")
            if not offsets and os.environ.get("CUBLAS_WORKSPACE_CONFIG") is None:
                lines.append("  (last-bit differences with the generators moved alike can be "
                             "cuBLAS choosing another reduction under capture: "
                             "CUBLAS_WORKSPACE_CONFIG=:4096:8 fixes its workspace, so eager and "
                             "graphed matmuls agree)")
        lines.append("  (recap.torch.make_graphed_callables(verify='warn') or "
                     "RECAP_VERIFY_GRAPHS=warn warns instead; verify=False or "
                     "RECAP_VERIFY_GRAPHS=0 skips the check)")
        return GraphMismatch("\n".join(lines), differences, offsets, sdpa)

    def release(self) -> None:
        """Drops the tensors the check kept (outputs, gradients, buffers)."""
        self.eager_out, self.replay_out, self._initial, self.again = [], [], [], {}

    def check(self, how: str) -> None:
        err = self.report()
        self.release()
        settle(err, how, stacklevel=4)


def settle(err: Optional[GraphMismatch], how: str, stacklevel: int) -> None:
    """The end of a check: the finding (or None) reported, then raised (``raise``, agreed with
    the other ranks of a distributed job first) or warned (``warn``)."""
    if err is not None:
        report_line(err)
    if how == "raise":
        err = agree(err)
        if err is None:
            return
        try:
            raise err
        finally:
            err = None  # no cycle through this frame (TorchGenerator.raise_pending says why)
    if err is not None:
        warnings.warn(str(err), GraphMismatchWarning, stacklevel=stacklevel)


# ---------------------------------------------------------------- one verdict for every rank

# How long a rank waits for the others to reach the same check before it goes on with its own
# verdict: a rank that runs fewer checks than the others (or died) must not hang the rest.
AGREE_TIMEOUT_S = 300.0
_checks = 0  # this process's agreed checks: the n-th of each rank meets the n-th of the others


def _job():
    """(rank, world size, store) of torch.distributed's default group when one of more than one
    rank is up; else None."""
    try:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() <= 1:
            return None
        return dist.get_rank(), dist.get_world_size(), dist.distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - no job to agree with: the local verdict stands
        return None


def agree(err: Optional[GraphMismatch]) -> Optional[GraphMismatch]:
    """In a job of more than one rank: what this rank raises after every rank has its verdict
    for this check, so that all raise or none does (one rank raising while the others go on
    leaves them waiting in their next collective). Through the process group's key-value store,
    not a collective: no device tensor, a few requests per rank whatever the world size, and a
    timeout (AGREE_TIMEOUT_S) after which a rank keeps its own verdict and says why."""
    global _checks
    job = _job()
    if job is None:
        return err
    rank, world, store = job
    _checks += 1
    key = f"recap/verify/{_checks}/"
    try:
        if err is not None:
            store.add(key + "bad", 1)
            first = f"rank {rank}: " + str(err).splitlines()[0].replace("recap: ", "", 1)
            store.compare_set(key + "first", "", first[:400])
        if store.add(key + "count", 1) == world:
            store.set(key + "done", "1")
        store.wait([key + "done"], datetime.timedelta(seconds=AGREE_TIMEOUT_S))
        bad = store.add(key + "bad", 0)
        first = store.get(key + "first").decode(errors="replace") if bad else ""
    except Exception as e:  # noqa: BLE001 - a timeout or a store gone: this rank's verdict
        _lib.log_once("warn", f"recap: the check at capture could not agree with the other "
                      f"ranks ({type(e).__name__}: {e}); rank {rank} goes on with its own "
                      f"verdict ({'a mismatch' if err is not None else 'none'})")
        return err
    if err is not None or not bad:
        return err
    return GraphMismatch(
        f"recap: {bad} of {world} ranks found that the first replay of a captured graph does "
        f"not compute what the same step computes eagerly ({first}); this rank's graphs "
        f"passed, and it raises too so that no rank waits for the others (that rank's error "
        f"says what differed)", [], [], [])


def report_line(err: GraphMismatch) -> None:
    """Under ``recap-probe --run`` (``RECAP_REPORT`` names its file), the finding as a line of
    the report beside librecap's own: ``source`` marks it as one (recap-probe counts it as no
    process), ``graph_mismatches`` is summed over the command's processes, ``graph_mismatch``
    says what differed and why, in a few hundred characters. Only a regular file is written, and
    nothing blocks (the library's rule for its sinks)."""
    path = os.environ.get("RECAP_REPORT")
    if not path or "%" in path:
        # librecap expands %p/%h and truncates per-process files at exit: a line written to the
        # unexpanded name would be lost. recap-probe's file has neither.
        return
    what = str(err).splitlines()[0].replace("recap: ", "", 1)
    parts = [what] + err.differences[:2] + err.offsets[:1] + err.sdpa[:1]
    text = "; ".join(parts)
    if len(text) > 600:
        text = text[:597] + "..."
    line = json.dumps({"schema": 2, "source": "recap.torch", "pid": os.getpid(),
                       "graph_mismatches": 1, "graph_mismatch": text}, ensure_ascii=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o644)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.write(fd, (line + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(fd)
