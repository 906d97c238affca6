"""``opcheck``: checks that a custom op's registrations agree with each other (``torch.library.opcheck``).

- ``test_schema``: running the op writes only the arguments its schema marks as written, and
  its outputs do not alias its inputs;
- ``test_autograd_registration``: an op called with inputs that require grad has a backward;
- ``test_faketensor``: the fake implementation gives the real output's shapes, dtypes and strides;
- ``test_aot_dispatch_dynamic``: the op traced by ``make_fx`` and compiled by ``ember.compile``
  (``aot_eager``) computes what it computes eagerly, gradients included.
"""

from __future__ import annotations

import ember
from ember._src.tensor import Tensor

from ._registry import entry_of

DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


class OpCheckError(Exception):
    """One of ``opcheck``'s tests failed (PyTorch's OpCheckError)."""


def _clone(x):
    if isinstance(x, Tensor):
        c = x.detach().clone()
        return c.requires_grad_(x.requires_grad) if x.is_floating_point() or x.is_complex() else c
    if type(x) in (list, tuple):
        return type(x)(_clone(y) for y in x)
    if type(x) is dict:
        return {k: _clone(v) for k, v in x.items()}
    return x


def _tensors(x) -> list:
    if isinstance(x, Tensor):
        return [x]
    if type(x) in (list, tuple):
        return [t for y in x for t in _tensors(y)]
    return []


def _same(a, b, atol, rtol) -> bool:
    try:
        ember.testing.assert_close(a, b, atol=atol, rtol=rtol, equal_nan=True)
    except AssertionError:
        return False
    return True


def _test_schema(entry, args, kwargs, atol, rtol):
    full = entry.schema.bind(args, kwargs)
    before = [_clone(a) for a in full]
    with ember.no_grad():
        out = entry.op(*full)
    mutated = set(entry.schema.mutated_positions())
    for i, (a, b) in enumerate(zip(full, before)):
        if i in mutated or not isinstance(a, Tensor):
            continue
        if not _same(a, b, 0, 0):
            raise OpCheckError(f"{entry.qualname}: argument {entry.schema.arguments[i].name} is not defined as "
                               "mutable (mutates_args) but was mutated")
    inputs = [a._storage for a in _tensors(full)]
    for o in _tensors(out):
        if any(o._storage is s for s in inputs):
            raise OpCheckError(f"{entry.qualname}: an output aliases an input; custom ops must return new tensors "
                               "(return a .clone())")


def _test_autograd_registration(entry, args, kwargs, atol, rtol):
    full = entry.schema.bind(args, kwargs)
    if not any(isinstance(t, Tensor) and t.requires_grad for t in _tensors(full)):
        return
    if entry.backward is None and entry.composite is None:
        raise OpCheckError(f"{entry.qualname}: an input requires grad but the op has no autograd registration "
                           "(use register_autograd)")


def _test_faketensor(entry, args, kwargs, atol, rtol):
    from ember.compiler import FakeTensorMode

    full = _clone(entry.schema.bind(args, kwargs))
    with ember.no_grad():
        real = entry.op(*_clone(full))
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(a) if isinstance(a, Tensor) else a for a in full]
    with ember.no_grad(), mode:
        fake = entry.op(*fakes)
    real_t, fake_t = _tensors(real), _tensors(fake)
    if len(real_t) != len(fake_t):
        raise OpCheckError(f"{entry.qualname}: the fake implementation returns {len(fake_t)} tensors, the kernel "
                           f"{len(real_t)}")
    for i, (r, f) in enumerate(zip(real_t, fake_t)):
        if tuple(r.shape) != tuple(f.shape) or r.dtype != f.dtype:
            raise OpCheckError(f"{entry.qualname}: output {i}: the fake implementation gives {tuple(f.shape)} "
                               f"{f.dtype}, the kernel {tuple(r.shape)} {r.dtype}")


def _test_aot_dispatch_dynamic(entry, args, kwargs, atol, rtol):
    from ember.compiler import make_fx

    full = entry.schema.bind(args, kwargs)
    eager_in = _clone(full)
    eager_out = entry.op(*eager_in)
    tensor_pos = [i for i, a in enumerate(full) if isinstance(a, Tensor)]

    def flat(*tensors):
        values = list(full)
        for i, t in zip(tensor_pos, tensors):
            values[i] = t
        return entry.op(*values)

    traced_in = _clone(full)
    with ember.no_grad():
        gm = make_fx(flat, tracing_mode="fake")(*[traced_in[i] for i in tensor_pos])
        traced_out = gm(*[traced_in[i] for i in tensor_pos])
    if not _same(_tensors(traced_out), [t.detach() for t in _tensors(eager_out)], atol, rtol):
        raise OpCheckError(f"{entry.qualname}: the op traced by make_fx computes a different result than eagerly")
    compiled_in = _clone(full)
    compiled_out = ember.compile(flat, backend="aot_eager", fullgraph=True)(*[compiled_in[i] for i in tensor_pos])
    if not _same([t.detach() for t in _tensors(compiled_out)], [t.detach() for t in _tensors(eager_out)], atol,
                 rtol):
        raise OpCheckError(f"{entry.qualname}: the op under ember.compile computes a different result than eagerly")
    wants = [i for i in tensor_pos if isinstance(full[i], Tensor) and full[i].requires_grad]
    outs = [o for o in _tensors(eager_out) if o.requires_grad]
    if wants and outs and (entry.backward is not None or entry.composite is not None):
        c_outs = [o for o in _tensors(compiled_out) if o.requires_grad]
        seeds = [ember.ones_like(o) for o in outs]
        g_eager = ember.autograd.grad(outs, [eager_in[i] for i in wants], seeds, allow_unused=True)
        g_comp = ember.autograd.grad(c_outs, [compiled_in[i] for i in wants], seeds, allow_unused=True)
        for a, b in zip(g_eager, g_comp):
            if (a is None) != (b is None) or (a is not None and not _same(a, b, atol, rtol)):
                raise OpCheckError(f"{entry.qualname}: gradients under ember.compile differ from eager ones")


_TESTS = {"test_schema": _test_schema, "test_autograd_registration": _test_autograd_registration,
          "test_faketensor": _test_faketensor, "test_aot_dispatch_dynamic": _test_aot_dispatch_dynamic}


def opcheck(op, args: tuple, kwargs: dict | None = None, *, test_utils=DEFAULT_TEST_UTILS,
            raise_exception: bool = True, atol=None, rtol=None) -> dict:
    """Runs the checks named in ``test_utils`` on ``op(*args, **kwargs)``; returns ``{test: "SUCCESS" or
    the exception}`` (raises the first failure when ``raise_exception``)."""
    entry = entry_of(op)
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    unknown = [t for t in test_utils if t not in _TESTS]
    if unknown:
        raise ValueError(f"opcheck: unknown test_utils {unknown}; expected some of {list(_TESTS)}")
    kwargs = dict(kwargs or {})
    results = {}
    for name in test_utils:
        try:
            _TESTS[name](entry, args, kwargs, atol, rtol)
            results[name] = "SUCCESS"
        except Exception as exc:
            if raise_exception:
                if isinstance(exc, OpCheckError):
                    raise
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {type(exc).__name__}: {exc}") from exc
            results[name] = exc
    return results
