"""``utils.swap_tensors`` against torch 2.13."""

from __future__ import annotations

import weakref

import pytest
import torch

import ember


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_contents_attributes_and_classes_are_exchanged(lib):
    a = lib.arange(6.0).reshape(2, 3)
    b = lib.zeros(10, dtype=lib.float64, requires_grad=True)
    a.tag = "a"
    ids = id(a), id(b)
    lib.utils.swap_tensors(a, b)
    assert (id(a), id(b)) == ids
    assert a.shape == (10,) and a.dtype == lib.float64 and a.requires_grad and a.is_leaf
    assert b.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and b.stride() == (3, 1) and not b.requires_grad
    assert b.tag == "a" and not hasattr(a, "tag")
    (a * 2).sum().backward()
    assert a.grad.tolist() == [2.0] * 10
    p, q = lib.nn.Parameter(lib.ones(3)), lib.ones(3, dtype=lib.float64)
    lib.utils.swap_tensors(p, q)
    assert type(p) is lib.Tensor and type(q) is lib.nn.Parameter
    assert p.dtype == lib.float64 and q.dtype == lib.float32 and q.requires_grad


def test_many_dims_and_views_keep_their_layout():
    big, small = ember.arange(2 * 3 * 4 * 5 * 6 * 7 * 2.0).reshape(2, 3, 4, 5, 6, 7, 2), ember.ones(3)
    ref_big = big.clone()
    view = big.transpose(0, 6)[1]
    ember.utils.swap_tensors(big, small)
    assert big.shape == (3,) and small.shape == (2, 3, 4, 5, 6, 7, 2)
    ember.testing.assert_close(small, ref_big)
    ember.testing.assert_close(small.transpose(0, 6)[1], view)
    small.add_(1)  # the swapped tensor still writes the storage its views see
    ember.testing.assert_close(view, ref_big.transpose(0, 6)[1] + 1)


@pytest.mark.parametrize("which", ["t1", "t2"])
def test_weak_references_refuse_as_torch(which):
    for lib in (torch, ember):
        held = lib.ones(2)
        ref = weakref.ref(held)
        args = (held, lib.zeros(2)) if which == "t1" else (lib.zeros(2), held)
        with pytest.raises(RuntimeError, match=f"^Cannot swap {which} because it has weakref associated with it$"):
            lib.utils.swap_tensors(*args)
        assert ref() is held and held.tolist() == [1.0, 1.0]


def test_different_slots_refuse_as_torch():
    for lib in (torch, ember):
        class Slotted(lib.Tensor):
            __slots__ = ("extra",)

        with pytest.raises(RuntimeError, match="^Cannot swap t1 and t2 if they have different slots$"):
            lib.utils.swap_tensors(lib.ones(1), lib.ones(1).as_subclass(Slotted))


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_backward_through_a_graph_recorded_before_the_swap_is_refused(lib):
    x = lib.ones(3, requires_grad=True)
    y = (x * 2).sum()
    z = lib.zeros(3, requires_grad=True)
    lib.utils.swap_tensors(x, z)
    with pytest.raises(RuntimeError, match="^Trying to execute AccumulateGrad node that was poisoned by swap_tensors"):
        y.backward()
    assert x.grad is None and z.grad is None
