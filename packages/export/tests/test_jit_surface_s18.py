"""``jit.script_if_tracing`` and ``jit.isinstance`` against torch 2.13."""
# ruff: noqa: UP006, UP035, UP045 - the typing forms programs pass to jit.isinstance

from __future__ import annotations

import warnings
from typing import Dict, List, Optional, Tuple

import pytest
import torch

import ember


def _program(lib):
    calls = []

    def pick(x):
        if bool(x.sum() > 0):
            return x * 2
        return x - 1

    def counted(x):
        calls.append(1)
        return pick(x)

    wrapped = lib.jit.script_if_tracing(pick)
    return wrapped, pick, calls, lib.jit.script_if_tracing(counted)


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_script_if_tracing_runs_plainly_and_scripts_while_tracing(lib):
    wrapped, pick, calls, counted = _program(lib)
    assert wrapped.__name__ == "pick" and wrapped.__wrapped__ is pick
    assert wrapped.__dict__["__original_fn"] is pick and wrapped.__dict__["__script_if_tracing_wrapper"] is True
    assert counted(lib.ones(2)).tolist() == [2.0, 2.0] and calls == [1]  # not tracing: fn itself runs

    def f(x):
        return wrapped(x) + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = lib.jit.trace(f, lib.ones(2))
    # scripted, the branch stays data dependent in the trace
    assert traced(lib.ones(2)).tolist() == [3.0, 3.0]
    assert traced(-lib.ones(2)).tolist() == [-1.0, -1.0]


_CASES = [([1, 2], List[int]), ([1, "a"], List[int]), ({"a": [1]}, Dict[str, List[int]]),
          ({1: [1]}, Dict[str, List[int]]), (None, Optional[List[int]]), ([1.0], Optional[List[int]]),
          ((1, "a"), Tuple[int, str]), ((1,), Tuple[int, str]),
          (3, (str, int)), (3, int | None), ([[1]], List[List[float]]), ([[1.0]], list[list[float]]), ("x", str),
          ({"a": 1}, dict[str, int]), ([1], Tuple[int])]


@pytest.mark.parametrize("obj, target", _CASES)
def test_jit_isinstance_as_torch(obj, target):
    assert ember.jit.isinstance(obj, target) is torch.jit.isinstance(obj, target)


@pytest.mark.parametrize("target", [list, List, Dict, dict, tuple, Optional, [int]])
def test_jit_isinstance_refuses_bare_containers_as_torch(target):
    with pytest.raises(RuntimeError) as want:
        torch.jit.isinstance([1], target)
    with pytest.raises(RuntimeError) as got:
        ember.jit.isinstance([1], target)
    assert str(got.value) == str(want.value)


def test_jit_isinstance_warns_on_empty_containers():
    for lib in (torch, ember):
        with pytest.warns(UserWarning, match="inner type of a container is lost"):
            assert lib.jit.isinstance([], List[int])


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_a_traced_module_is_a_traced_module(lib):
    model = lib.nn.Linear(3, 2)
    traced = lib.jit.trace(model, lib.ones(1, 3))
    assert isinstance(traced, lib.jit.TracedModule) and isinstance(traced, lib.jit.ScriptModule)
    assert not isinstance(model, lib.jit.TracedModule)
    assert not isinstance(lib.jit.script(model), lib.jit.TracedModule)


@pytest.mark.parametrize("check", ["is_tuple", "is_list", "is_dict", "is_optional", "is_union"])
def test_jit_annotations_checks_as_torch(check):
    import torch.jit.annotations as ta

    import ember.jit.annotations as ea

    forms = [Tuple[int, str], tuple[int], List[int], list[str], Dict[str, int], dict[str, int], Optional[int],
             int | None, int | str, "List[int]", int, None, list, tuple, dict, Tuple, List, Dict, Optional]
    forms.append(__import__("typing").Union)
    for form in forms:
        try:
            want = ("ok", getattr(ta, check)(form))
        except RuntimeError as e:
            want = ("error", str(e))
        try:
            got = ("ok", getattr(ea, check)(form))
        except RuntimeError as e:
            got = ("error", str(e))
        assert got == want, form


def test_jit_annotations_reexports_typing_names():
    import ember.jit.annotations as ea

    assert ea.List is List and ea.Tuple is Tuple and ea.Dict is Dict and ea.Optional is Optional
    assert ea.BroadcastingList2[int] is None and ea.BroadcastingList3 is ea.BroadcastingList1


class _Plain:
    pass


class _Colour(__import__("enum").Enum):
    RED = 1


def test_jit_internal_qualified_name_and_copy_wrapper_as_torch():
    import torch._jit_internal as tj

    import ember._jit_internal as ej

    def f():
        pass

    class Local:
        pass

    overridden = type("Over", (), {"_jit_override_qualname": "my.Name"})
    for obj in (_Plain, f, Local, lambda: 0, overridden, torch.nn.Linear, _Colour.RED):
        for mangle in (True, False):
            assert ej._qualified_name(obj, mangle) == tj._qualified_name(obj, mangle)
    for bad in (object(), 3):
        with pytest.raises(RuntimeError) as want:
            tj._qualified_name(bad)
        with pytest.raises(RuntimeError) as got:
            ej._qualified_name(bad)
        assert str(got.value) == str(want.value)
    g = ej._copy_to_script_wrapper(f)
    assert g is f and f._torchscript_modifier == tj.FunctionModifiers.COPY_TO_SCRIPT_WRAPPER
    assert ember._jit_internal is ej
