"""``torch._check`` and kin: runtime checks a PyTorch program states about its values, which a
tracer keeps as facts instead of guards. A condition may be a tracer's data-dependent bool (an
object with ``__ember_unguarded__``, ember-compile's ``UnbackedBool``): it is read without the
guard error a plain ``if`` on it raises."""

from __future__ import annotations

import warnings

_DEFAULT = ("Expected cond to be True, but got False. (Could this error message be improved? "
            "If so, please report an enhancement request to PyTorch.)")


def _value(cond):
    if hasattr(type(cond), "__ember_unguarded__"):
        return cond.__ember_unguarded__()
    return cond


def _check_with(error_type, cond, message=None) -> None:
    value = _value(cond)
    if not isinstance(value, bool):
        from .tensor import Tensor

        if isinstance(value, Tensor):
            raise TypeError("cond must be a bool, but got a Tensor. For tensor conditions, use "
                            "torch._check_tensor_all() to assert that all elements are true.")
        raise TypeError(f"cond must be a bool, but got {type(value)}")
    if value:
        return
    raise error_type(_DEFAULT if message is None else str(message()))


def _check(cond, message=None) -> None:
    """Raises RuntimeError (``message()`` or a default text) when ``cond`` is False."""
    _check_with(RuntimeError, cond, message)


def _check_index(cond, message=None) -> None:
    _check_with(IndexError, cond, message)


def _check_value(cond, message=None) -> None:
    _check_with(ValueError, cond, message)


def _check_type(cond, message) -> None:
    _check_with(TypeError, cond, message)


def _check_not_implemented(cond, message=None) -> None:
    _check_with(NotImplementedError, cond, message)


def _check_is_size(i, message=None, *, max=None) -> None:  # noqa: A002 - PyTorch's keyword
    warnings.warn("_check_is_size will be removed in a future PyTorch release along with guard_size_oblivious. "
                  "    Use _check(i >= 0) instead.", FutureWarning, stacklevel=2)
    i = _value(i)
    _check(i >= 0, message)
    if max is not None:
        _check(i <= max, message)


def _check_tensor_all(cond, message=None) -> None:
    from . import dtypes
    from .tensor import Tensor

    if not isinstance(cond, Tensor) or cond.dtype is not dtypes.bool:
        raise TypeError(f"cond must be a tensor with dtype torch.bool, but got {getattr(cond, 'dtype', type(cond))}")
    _check(bool(cond.all()), message)


def _assert(condition, message) -> None:
    """``torch._assert``: ``assert condition, message`` that tracers keep."""
    if type(condition) is not bool and hasattr(type(condition), "__ember_unguarded__"):
        condition = condition.__ember_unguarded__()
    assert condition, message


def _assert_async(tensor, msg=None) -> None:
    """``torch._assert_async``: raises when the one-element ``tensor`` is zero (on the CPU, now)."""
    if tensor.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    if not bool(tensor):
        raise RuntimeError(msg or "Expected Tensor with single nonzero value, but got zero")
