"""Grad mode state, owned by the core because the dispatcher consults it on every op.

The autograd engine itself is the ``ember-autograd`` package; these switches only decide
whether the dispatcher hands an op to it.
"""

from __future__ import annotations

import functools
import threading

# Becomes True the first time any thread turns inference mode on: until then, creating a tensor
# skips reading the thread-local flag (the native fast path reads this list too).
INFERENCE_USED = [False]


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self._inference = False

    @property
    def inference(self) -> bool:
        return self._inference

    @inference.setter
    def inference(self, value: bool) -> None:
        if value:
            INFERENCE_USED[0] = True
        self._inference = value


STATE = _State()

INFERENCE_INPLACE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal "
    "tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details."
)
INFERENCE_SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
    "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it "
    "in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`."
)


def is_grad_enabled() -> bool:
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _DecoratorContextManager:
    """Usable as ``with no_grad():`` and as ``@no_grad()`` (or bare ``@no_grad``)."""

    def __new__(cls, orig_func=None, *args, **kwargs):
        if orig_func is not None and callable(orig_func) and cls in (no_grad, enable_grad):
            return cls()(orig_func)
        return super().__new__(cls)

    def __call__(self, orig_func):
        import inspect  # on first use: inspect pulls in dis, tokenize, ast (import ember < 0.1 s)

        if inspect.isgeneratorfunction(orig_func):
            return _generator_in_context(self.clone, orig_func)

        @functools.wraps(orig_func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return orig_func(*args, **kwargs)

        return wrapper

    def clone(self):
        return self.__class__()


def _generator_in_context(make_context, func):
    """A decorated generator function: each resumption of the generator (next, send, throw,
    close) runs inside a fresh context, and the caller's code between them runs outside it, as
    PyTorch's decorators do. (Entering once around the call would leave the body unguarded: a
    generator's body only runs when it is resumed.)"""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gen = func(*args, **kwargs)
        with make_context():
            try:
                value = gen.send(None)
            except StopIteration as stop:
                return stop.value
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                with make_context():
                    gen.close()
                raise
            except BaseException as exc:
                resume, arg = gen.throw, exc
            else:
                resume, arg = gen.send, sent
            with make_context():
                try:
                    value = resume(arg)
                except StopIteration as stop:
                    return stop.value

    return wrapper


class no_grad(_DecoratorContextManager):  # noqa: N801
    """Disables gradient recording inside its block."""

    def __init__(self):  # a bare ``@no_grad`` never gets here: __new__ returns the wrapped function
        self.prev = True

    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev
        return False


class enable_grad(_DecoratorContextManager):  # noqa: N801
    """Enables gradient recording inside its block (e.g. within ``no_grad``)."""

    def __init__(self):  # a bare ``@no_grad`` never gets here: __new__ returns the wrapped function
        self.prev = True

    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev
        return False


class set_grad_enabled(_DecoratorContextManager):  # noqa: N801
    """``set_grad_enabled(False)`` switches grad mode now, and restores it when used as a context."""

    def __init__(self, mode: bool):
        self.prev = STATE.grad_enabled
        self.mode = bool(mode)
        STATE.grad_enabled = self.mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev
        return False

    def clone(self):
        return set_grad_enabled(self.mode)


class inference_mode(_DecoratorContextManager):  # noqa: N801
    """Like ``no_grad``; tensors created inside are inference tensors."""

    def __new__(cls, mode=True):
        if callable(mode):
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)
        self.prev = (True, False)

    def __enter__(self):
        self.prev = (STATE.grad_enabled, STATE.inference)
        # inference_mode(False) leaves inference mode and turns grad on, even inside no_grad (PyTorch's
        # InferenceMode(false) guard sets grad mode to true).
        STATE.grad_enabled = not self.mode
        STATE.inference = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self.prev
        return False

    def clone(self):
        return inference_mode(self.mode)
