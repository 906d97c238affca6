"""``ember.compile`` and its wrappers: compiled functions, bound methods and OptimizedModule."""

from __future__ import annotations

import functools

from ._break_reasons import DISABLED_CALL
from ._compiled import CompiledFunction, disable_context, wrap_function
from ._recorder import current
from ._user_frames import user_frame

# PyTorch's order (its error lists them so). "lite" (PyTorch: fewer graph passes, ops falling back
# to eager kernels) compiles as the default mode does.
_MODES = (None, "default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# What each mode sets in the inductor's config (as torch._inductor.list_mode_options).
_MODE_OPTIONS = {
    "reduce-overhead": {"triton.cudagraphs": True},
    "max-autotune": {"max_autotune": True, "triton.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
}


def compile(  # noqa: A001 - PyTorch's name
    model=None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend="inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
):
    """Compiles a function or module (PyTorch's ``torch.compile``).

    Every call re-runs the Python of ``model`` while recording its tensor ops into graphs,
    which ``backend`` compiles once per distinct recording and the cache reuses. Graph breaks
    happen only where the program reads tensor data (``.item()``, ``print(t)``, ``if t:``).

    Example::

        >>> import ember
        >>> f = ember.compile(lambda x: (x * 2).sin(), backend="eager")
        >>> f(ember.zeros(2)).tolist()
        [0.0, 0.0]
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(m for m in _MODES if m)}")
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")  # PyTorch's words
    if dynamic is not None and not isinstance(dynamic, bool):
        raise AssertionError(f"Expected enable to be a bool, got {type(dynamic)}")  # PyTorch's words
    from .backends.registry import lookup_backend

    lookup_backend(backend)  # an unknown name fails here, as in PyTorch
    if disable:
        return model
    _first_compile_setup()
    if options is None and mode in _MODE_OPTIONS:
        options = dict(_MODE_OPTIONS[mode])
    if options and backend == "inductor":
        from .inductor import config

        with config.patch(options):  # an unknown option fails here, as in PyTorch
            pass
    import ember

    if isinstance(model, ember.nn.Module):
        return OptimizedModule(model, CompiledFunction(model, backend, fullgraph, dynamic, options,
                                                       name=type(model).__name__))
    state = CompiledFunction(model, backend, fullgraph, dynamic, options)
    return wrap_function(model, state)


_SETUP_DONE = False


def _first_compile_setup() -> None:
    """What PyTorch's first ``torch.compile(fn)`` (or ``_dynamo.optimize(backend)``) does to the
    process, once (its ``TorchPatcher.patch``): distribution argument validation becomes off by
    default (``Distribution.set_default_validate_args(False)``). A later
    ``set_default_validate_args(True)`` stays; ``export`` and ``compile(..., disable=True)`` change
    nothing."""
    global _SETUP_DONE
    if _SETUP_DONE:
        return
    _SETUP_DONE = True
    try:
        from ember.distributions import Distribution
    except ImportError:  # ember-nn not installed: no distributions to configure
        return
    Distribution.set_default_validate_args(False)


def _optimized_module_class():
    import ember

    class OptimizedModule(ember.nn.Module):
        """A compiled module: calls go through the capture; everything else is ``_orig_mod``'s.

        ``_orig_mod`` is a registered submodule, so parameters are shared and state_dict keys
        carry the ``_orig_mod.`` prefix, as in PyTorch.
        """

        def __init__(self, mod, state):
            super().__init__()
            self._orig_mod = mod
            object.__setattr__(self, "_ember_compiled", state)
            self.training = mod.training

        def __call__(self, *args, **kwargs):
            return self._ember_compiled(*args, **kwargs)

        def forward(self, *args, **kwargs):
            return self._ember_compiled(*args, **kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._modules["_orig_mod"], name)

        def train(self, mode: bool = True):
            self._orig_mod.train(mode)
            self.training = mode
            return self

        def _get_name(self) -> str:
            return "OptimizedModule"

        def __dir__(self):
            return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))

    OptimizedModule.__module__ = "ember.compiler"
    OptimizedModule.__qualname__ = "OptimizedModule"
    return OptimizedModule


class _LazyClass:
    """``OptimizedModule`` is built on first use, so importing the compiler does not import nn."""

    _cls = None

    def __call__(self, *args, **kwargs):
        return self.get()(*args, **kwargs)

    def get(self):
        if _LazyClass._cls is None:
            _LazyClass._cls = _optimized_module_class()
        return _LazyClass._cls

    def __instancecheck__(self, obj):
        return isinstance(obj, self.get())


OptimizedModule = _LazyClass()


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """Marks ``fn`` to run eagerly even when a compiled function calls it (``torch.compiler.disable``).

    Called from inside a capture, the pending graph runs first (a graph break) and ``fn`` runs
    on real tensors; the capture resumes after it returns.
    """
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    state = getattr(fn, "_ember_compiled", None)
    inner = state.fn if state is not None else fn

    @functools.wraps(inner)
    def run_eagerly(*args, **kwargs):
        rec = current()
        if rec is None:
            with disable_context():
                return inner(*args, **kwargs)
        # PyTorch's break reason (explain(), and the Unsupported of fullgraph=True)
        why = (f"{DISABLED_CALL}\n  Explanation: Skip calling function "
               f"`{inner}` since it was wrapped with `torch.compiler.disable` (reason: {reason})\n"
               "  Hint: Remove the `torch.compiler.disable` call")
        if getattr(rec.owner, "fullgraph", False):
            # a break even with nothing pending, as in PyTorch ("Skip calling
            # `torch.compiler.disable()`d function"): Unsupported before it runs
            rec.owner.note_break(why, user_frame(), rec)
        rec.flush(why)
        rec.went_eager = True
        rec.suspended = True
        try:
            with disable_context():
                return inner(*args, **kwargs)
        finally:
            rec.suspended = False

    run_eagerly._ember_disabled = True
    return run_eagerly


def nested_compile_region(fn=None, *, options=None, max_reuse_entries: int = 8, reuse_hash_fn=None):
    """``torch.compiler.nested_compile_region``: marks ``fn`` as a region PyTorch compiles once and
    reuses at each call inside a compiled function. ember's capture records every call's ops into
    the enclosing graph, so the function is returned as it is (same results, eager or compiled)."""
    if fn is None:
        return lambda f: f
    return fn
