"""How the capture meets code outside the dispatcher: the core's hooks, and Python calls.

``sync_hook``: the core calls it before reading data or generator state (``item``,
``print``, ``backward`` ...); it flushes the pending segment when that read needs it.
``eager_region_hook``: code that builds autograd history by hand (``autograd.Function.apply``)
runs after a flush with the capture passing ops through. ``record_python_call``: a Python
function over tensors (``detach``) recorded as a node of its own.
"""

from __future__ import annotations

import sys

from ember._src import dispatch, torch_function
from ember._src.tensor import Tensor

from . import _unbacked_export
from . import config as _config
from ._break_reasons import DATA_DEPENDENT_BRANCH
from ._exc import Unsupported
from ._lazy import LazyTensor
from ._recorder import current, overlaps
from ._user_frames import user_frame

# Reasons that only read a value (no alias escapes through which the caller could write).
_PURE_READS = frozenset({"Tensor.item()", "Tensor.tolist()", "printing a tensor", "formatting a tensor"})


def sync_hook(tensor, reason: str):
    rec = current()
    if rec is None or rec.suspended:
        return
    rec.synced = True  # Python reads data: a replay of this call would not
    fullgraph = rec.owner.fullgraph
    if reason == "Tensor.item()" and _unbacked_export.EXPORT_ENV[0] is not None \
            and getattr(rec.owner, "traces_inputs", False):
        symbol = _unbacked_export.record_item(rec, tensor)
        if symbol is not None:
            return symbol
    if reason == "Tensor.tolist()" and _unbacked_export.EXPORT_ENV[0] is not None \
            and getattr(rec.owner, "traces_inputs", False):
        symbols = _unbacked_export.record_tolist(rec, tensor)
        if symbols is not None:
            return symbols
    if tensor is not None and reason in _PURE_READS and getattr(rec, "traced_inputs", None) \
            and rec.input_index.get(id(tensor)) in rec.traced_inputs:
        # make_fx traces its inputs, not their values: reading one would bake the example's data
        # into the graph (x[:n.item()] sliced to the example's n for every input).
        rec.owner.note_break(reason, user_frame(), rec)
    if reason == "printing a tensor" and fullgraph and not getattr(rec.owner, "traces_inputs", False):
        # Dynamo cannot trace print(tensor) at all: under fullgraph=True even an input's print
        # is an error, with PyTorch's text (not the float tolist() inside the formatting)
        rec.owner.note_break(reason, user_frame(), rec)
    if reason == "Tensor.tolist()" and fullgraph and (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise Unsupported(f"Tensor.tolist() with non-integer tensor\n\nfrom user code:\n   {user_frame()}")
    if not rec.nodes:
        return
    if reason == "Tensor.backward()" or reason == "ember.save":
        # backward accumulates into .grad eagerly; save walks containers: run everything
        if reason == "Tensor.backward()" and _create_graph_requested():
            rec.eager_autograd = True  # the gradient is differentiated again: no AOT backward here
    elif tensor is None:
        if not rec.has_random:
            return  # generator state: only pending random ops care
    elif reason == "Tensor.item()" and type(tensor) is LazyTensor:
        caller = _bool_caller()
        if caller is not None and not getattr(rec.owner, "traces_inputs", False) and _calls_bool(caller):
            # ``bool(tensor)`` spelled out in a compiled function: Dynamo traces it as ``.item()`` (the same
            # break without fullgraph); under fullgraph the item is an unbacked symbol bool() cannot guard on
            # (export and make_fx keep their data-dependent error)
            if fullgraph:
                from ._unbacked import _guard_error

                kind = tensor.dtype
                expr = "Eq(u0, 1)" if kind.name == "bool" else "Ne(zuf0, 0.0)" if kind.is_floating_point \
                    else "Ne(u0, 0)"
                raise _guard_error(expr)
        elif caller is not None:
            reason = DATA_DEPENDENT_BRANCH  # ``if tensor:`` (a break even under fullgraph=True)
        elif fullgraph or _config.capture_scalar_outputs:
            # PyTorch 2.13 keeps ``.item()`` (and float()/int() of a tensor) in a fullgraph=True
            # graph (or with capture_scalar_outputs) instead of breaking; under fullgraph the
            # value is data-dependent (``_unbacked``).
            rec.flush(None)
            return
    elif reason == "Tensor.tolist()" and fullgraph and type(tensor) is LazyTensor:
        rec.flush(None)  # integer items are unbacked symbols in PyTorch's graph
        return
    elif type(tensor) is not LazyTensor:
        # A real tensor: its data is current unless a pending op writes it; an alias that
        # escapes (numpy, data_ptr) could also be written by the caller while ops read it.
        storage = tensor._storage
        if not overlaps(rec.written, storage) and (reason in _PURE_READS or not overlaps(rec.input_ranges, storage)):
            return
    if reason == "Tensor.tolist()" and tensor is not None and (
            tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        reason = "Tensor.tolist() with non-integer tensor"  # Dynamo's break reason for float items
    rec.flush(reason)


def _create_graph_requested() -> bool:
    """Whether the ``autograd.grad``/``backward`` call that syncs asks for ``create_graph=True``."""
    f = sys._getframe(2)  # _create_graph_requested <- sync_hook <- sync_pending <- grad/backward
    for _ in range(4):
        if f is None:
            return False
        if f.f_code.co_name in ("grad", "backward") and "create_graph" in f.f_locals:
            return bool(f.f_locals["create_graph"])
        f = f.f_back
    return False


def _bool_caller():
    """The frame that asked for ``bool()`` of a tensor, when this data read comes from one."""
    f = sys._getframe(2)  # _bool_caller <- sync_hook or asserted_item <- ... <- Tensor.__bool__
    # (Once the __torch_function__ protocol is on, gate frames sit between the calls.)
    bool_code = torch_function.original_code(Tensor.__bool__)
    for _ in range(10):
        if f is None:
            return None
        if f.f_code is bool_code:
            return torch_function.caller_of_gate(f.f_back)
        f = f.f_back
    return None


_CALL_SITES: dict = {}  # code object -> offsets of its call instructions


def _calls_bool(frame) -> bool:
    """Whether ``frame`` asks for a tensor's truth by calling a function (``bool(t)``), not by a truth
    test of the code (``if t:``, ``not t``, ``t and u``): the instruction it is at is a call."""
    code = frame.f_code
    calls = _CALL_SITES.get(code)
    if calls is None:
        import dis

        calls = frozenset(ins.offset for ins in dis.get_instructions(code)
                          if ins.opname.startswith(("CALL", "PRECALL")))
        _CALL_SITES[code] = calls
    return frame.f_lasti in calls


_ASSERT_SITES: dict = {}  # code object -> {offset of an assert's truth test: its message}


def _assert_message(frame) -> str | None:
    """The message ("" when none) when the truth test running in ``frame`` is an ``assert``
    statement's: its jump is followed by raising AssertionError (LOAD_ASSERTION_ERROR, CPython
    3.9 and later); None otherwise."""
    code = frame.f_code
    sites = _ASSERT_SITES.get(code)
    if sites is None:
        import dis

        instructions = list(dis.get_instructions(code))
        sites = {}
        for i, ins in enumerate(instructions):
            if ins.opname == "LOAD_ASSERTION_ERROR":
                after = instructions[i + 1] if i + 1 < len(instructions) else None
                text = after.argval if after is not None and after.opname == "LOAD_CONST" and \
                    isinstance(after.argval, str) else ""
                for prev in instructions[max(i - 3, 0):i]:
                    if "JUMP" in prev.opname or prev.opname == "TO_BOOL":
                        sites[prev.offset] = text
        _ASSERT_SITES[code] = sites
    return sites.get(frame.f_lasti)


def asserted_item(rec, tensor):
    """``tensor.item()`` for ``assert tensor_condition, "msg"`` in the user's program, else None.

    PyTorch keeps such an assert in the graph as a runtime assertion that raises
    RuntimeError("msg"): no graph break, also under ``fullgraph=True``. ember evaluates the
    condition now and leaves the pending segment open: its ops run once on the side (the call
    is then never replayed without its Python). A segment that writes real tensors or draws
    random numbers cannot run twice; it is flushed instead (not counted as a break)."""
    caller = _bool_caller()
    message = _assert_message(caller) if caller is not None else None
    if message is None or not rec.nodes:
        return None
    rec.synced = True
    if rec.written or rec.has_random:
        rec.flush(None)
        value = tensor
    else:
        import ember
        from ember import fx

        from ._graph_build import build_graph_module

        gm = build_graph_module(rec, [tensor.__dict__["_lz_v"]], fx)
        rec.suspended = True
        try:
            with ember.no_grad():
                value = gm.forward(*rec.inputs)[0]
        finally:
            rec.suspended = False
    if _read(value):
        return True
    raise RuntimeError(message or "assertion error")


def _read(t) -> bool:
    from ember._src.interop import read_scalar

    return bool(read_scalar(t))


class _Suspended:
    """The capture passes ops through (they run for real) until exit."""

    __slots__ = ("rec", "prev")

    def __init__(self, rec):
        self.rec = rec

    def __enter__(self):
        self.prev = self.rec.suspended
        self.rec.suspended = True

    def __exit__(self, *exc):
        self.rec.suspended = self.prev
        return False


def eager_region_hook(reason: str):
    rec = current()
    if rec is None or rec.suspended:
        return dispatch._NO_REGION
    if getattr(rec.owner, "traces_through_regions", False):
        # make_fx / export trace forward graphs: a custom autograd.Function's forward ops are
        # recorded as they run (as PyTorch's make_fx and torch.export do), with no autograd
        # history to build around them.
        return _NoGrad()
    rec.flush(reason)
    rec.went_eager = True
    return _Suspended(rec)


class _NoGrad:
    def __enter__(self):
        from ember._src import grad_mode

        self.before = grad_mode.STATE.grad_enabled
        grad_mode.STATE.grad_enabled = False

    def __exit__(self, *exc):
        from ember._src import grad_mode

        grad_mode.STATE.grad_enabled = self.before
        return False


class _PythonOp:
    """A Python callable recorded as a node (as torch.fx records ``operator.getitem``): looks
    enough like an Op for the recorder (name, schema, tags, call_kernel on meta tensors)."""

    __slots__ = ("fn", "name", "schema", "tags")

    _CACHE: dict = {}

    def __new__(cls, fn, name):
        self = cls._CACHE.get(fn)
        if self is None:
            self = object.__new__(cls)
            self.fn, self.name, self.schema, self.tags = fn, name, f"{name}(Tensor self) -> Tensor", frozenset()
            cls._CACHE[fn] = self
        return self

    def call_kernel(self, args, kwargs):
        return self.fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def record_python_call(fn, args, what: str):
    rec = current()
    if rec is None or rec.suspended:
        return fn(*args)
    return rec.record_call(fn, args, what)
