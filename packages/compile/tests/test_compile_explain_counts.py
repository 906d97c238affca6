"""``explain()``'s graph and break counts against torch._dynamo.explain 2.13, for breaks with
one op, or none, before or after them (PyTorch counts ``graph_count - 1`` breaks, and lists
every break's reason)."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import ember


def op_after_print(x):
    y = x * 2
    print("hi")
    return y + 1


def one_op_branch_returns(x):
    y = x.sin()
    if y.sum() > 0:
        return y + 1
    return y - 1


def one_op_branch_falls_through(x):
    y = x.sin()
    if y.sum() > 0:
        y = y.cos()
    return y


def branch_returns_without_op(x):
    y = x.sin()
    if y.sum() > 0:
        return y
    return -y


def item_then_op(x):
    n = x.sin().cos().sum().item()
    return x + n


def item_then_nothing(x):
    y = x.sin()
    y.sum().item()
    return y


def print_at_start(x):
    print("start")
    return x + 1


def print_at_end(x):
    y = x.sin()
    print("a")
    return y


def branch_then_print(x):
    y = x.sin()
    if y.sum() > 0:
        y = y + 0
    print("b")
    return y.cos()


def no_ops(x):
    return x


PROGRAMS = [op_after_print, one_op_branch_returns, one_op_branch_falls_through, branch_returns_without_op,
            item_then_op, item_then_nothing, print_at_start, print_at_end, branch_then_print, no_ops]


def _counts(lib, fn, sign):
    lib._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()):
        ex = lib._dynamo.explain(fn)(lib.ones(3) * sign)
    return ex.graph_count, ex.graph_break_count, [r.reason.split(" ")[0] for r in ex.break_reasons]


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_explain_counts_match_torch(fn, sign):
    assert _counts(ember, fn, sign) == _counts(torch, fn, sign)
