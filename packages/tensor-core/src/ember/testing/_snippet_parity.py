"""Runs one code snippet on PyTorch and on ember and says how the outcomes differ.

A snippet is Python source with the library bound to ``L`` (``L.tensor``, ``L.sum``, ...); its last
line, if an expression, is the result. What is compared, for each tensor in the result (tuples and
lists are walked): dtype, shape, whether it is contiguous, and values (NaN equal to NaN; exact for
integer and bool tensors). For a raised exception: its type and the head of its message, with
"torch" read as "ember". For a snippet that asks (``warns=True``), the categories of the warnings it
raised. Used by the semantics tests of tensor-core and autograd (torch is imported lazily: it is a
test oracle, never a runtime dependency).
"""

from __future__ import annotations

import ast
import math
import warnings

import numpy as np

# (rtol, atol) per dtype name for float results; integer and bool results compare exactly.
_TOLS = {
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "float32": (1e-5, 1e-6),
    "float64": (1e-10, 1e-12),
    "complex64": (1e-5, 1e-6),
    "complex128": (1e-10, 1e-12),
}


def run_snippet(lib, code: str):
    """``(result, exception, warning categories)`` of ``code`` run with ``L = lib``."""
    tree = ast.parse(code, mode="exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    env = {"L": lib, "math": math}
    result = exc = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(compile(tree, "<snippet>", "exec"), env)  # noqa: S102 - test snippets only
            if last is not None:
                result = eval(compile(ast.Expression(last.value), "<snippet>", "eval"), env)  # noqa: S307
        except Exception as error:  # noqa: BLE001 - the exception is what gets compared
            exc = error
    categories = sorted({w.category.__name__ for w in caught if not issubclass(w.category, DeprecationWarning)})
    return result, exc, categories


def _message_head(exc: BaseException, chars: int) -> str:
    text = str(exc).replace("torch", "ember").strip()
    return text.splitlines()[0][:chars] if text else ""


def _tensor_summary(t) -> tuple:
    name = str(t.dtype).split(".")[-1]
    return name, tuple(t.shape), bool(t.is_contiguous())


def _as_numpy(t) -> np.ndarray:
    t = t.detach()
    if hasattr(t, "resolve_conj"):
        t = t.resolve_conj().resolve_neg()
    if "bfloat16" in str(t.dtype):
        t = t.float()
    return np.array(t.numpy(), copy=True)


def _is_tensor(x) -> bool:
    return type(x).__name__ in ("Tensor", "Parameter") or hasattr(x, "is_contiguous") and hasattr(x, "dtype")


def _compare(got, expected, where: str, problems: list[str]) -> None:
    if _is_tensor(expected):
        if not _is_tensor(got):
            problems.append(f"{where}: ember gave {type(got).__name__}, torch a Tensor")
            return
        g_sum, e_sum = _tensor_summary(got), _tensor_summary(expected)
        if g_sum != e_sum:
            problems.append(f"{where}: ember (dtype, shape, contiguous) {g_sum}, torch {e_sum}")
            return
        g, e = _as_numpy(got), _as_numpy(expected)
        rtol, atol = _TOLS.get(e_sum[0], (0.0, 0.0))
        if g.dtype.kind in "fc" or e.dtype.kind in "fc":
            same = np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True) and np.array_equal(
                np.signbit(np.real(g)) & np.isinf(g), np.signbit(np.real(e)) & np.isinf(e)
            )
        else:
            same = np.array_equal(g, e)
        if not same:
            problems.append(f"{where}: values differ\n  ember {g.tolist()}\n  torch {e.tolist()}")
        return
    if isinstance(expected, (tuple, list)) and not isinstance(expected, str):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            problems.append(f"{where}: ember gave {got!r}, torch {expected!r}")
            return
        for i, (g, e) in enumerate(zip(got, expected)):
            _compare(g, e, f"{where}[{i}]", problems)
        return
    if isinstance(expected, float) and isinstance(got, float) and math.isnan(expected) and math.isnan(got):
        return
    if type(expected).__name__ in ("dtype", "Size", "device"):
        got, expected = str(got).replace("ember", "torch"), str(expected)
    if got != expected or type(got) is not type(expected) and not isinstance(expected, (tuple, list)):
        problems.append(f"{where}: ember gave {got!r}, torch {expected!r}")


def snippet_differences(code: str, *, message_chars: int = 0, warns: bool = False) -> list[str]:
    """How ember's outcome of ``code`` differs from PyTorch's (empty when they agree).

    ``message_chars``: how many leading characters of an exception's first line must agree
    (0: only the type). ``warns``: also compare the categories of warnings raised.
    """
    import torch

    import ember

    e_res, e_exc, e_warn = run_snippet(ember, code)
    t_res, t_exc, t_warn = run_snippet(torch, code)
    problems: list[str] = []
    if t_exc is not None or e_exc is not None:
        if e_exc is None:
            problems.append(f"torch raised {type(t_exc).__name__}: {t_exc}; ember returned {e_res!r}")
        elif t_exc is None:
            problems.append(f"ember raised {type(e_exc).__name__}: {e_exc}; torch returned {t_res!r}")
        elif type(e_exc).__name__ != type(t_exc).__name__ or (
            _message_head(e_exc, message_chars) != _message_head(t_exc, message_chars)
        ):
            problems.append(
                f"ember raised {type(e_exc).__name__}: {_message_head(e_exc, 200)!r}; "
                f"torch {type(t_exc).__name__}: {_message_head(t_exc, 200)!r}"
            )
    else:
        _compare(e_res, t_res, "result", problems)
    if warns and e_warn != t_warn:
        problems.append(f"warnings: ember {e_warn}, torch {t_warn}")
    return problems
