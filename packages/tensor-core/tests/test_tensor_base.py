"""ember._C.TensorBase: the C struct behind Tensor's fields keeps the attribute semantics the
Python code relies on (subclassing, shells built with object.__new__, pickling, weakrefs, GC of
reference cycles, writable fields, TypeError for malformed metadata)."""

import copy
import gc
import pickle
import weakref

import numpy as np
import pytest

import ember
from ember import _C
from ember._src.tensor import Tensor, make_tensor

FIELDS = ("_storage", "_shape", "_stride", "_offset", "dtype", "_device", "_requires_grad", "grad", "grad_fn",
          "_base", "_autograd_meta")


def test_tensor_derives_from_the_c_base():
    t = ember.ones(2, 3)
    assert isinstance(t, _C.TensorBase)
    assert type(t) is Tensor
    assert Tensor.__mro__[1] is _C.TensorBase
    for name in FIELDS:  # the descriptors are in Tensor's own namespace too (compile reads them there)
        assert name in Tensor.__dict__
    assert t._shape == (2, 3) and t._stride == (3, 1) and t._offset == 0
    assert t.dtype is ember.float32 and t._device == ember.device("cpu")
    assert t._requires_grad is False and t.grad is None and t.grad_fn is None and t._base is None


def test_make_tensor_views_a_storage():
    base = ember.arange(12, dtype=ember.float64)
    v = make_tensor(base._storage, (3, 2), (1, 3), 2, ember.float64, base._device)
    expected = np.lib.stride_tricks.as_strided(np.arange(12.0)[2:], (3, 2), (8, 24))
    np.testing.assert_array_equal(v.numpy(), expected)
    assert v._storage is base._storage


def test_object_new_shell_then_fields():
    # How tracers build tensors (compile's LazyTensor/FakeTensor, func's BatchedTensor).
    class Shell(Tensor):
        __slots__ = ()

    t = object.__new__(Shell)
    with pytest.raises(AttributeError):
        _ = t._shape
    src = ember.arange(6.0).reshape(2, 3)
    for name in FIELDS:
        setattr(t, name, getattr(src, name))
    assert isinstance(t, Tensor)
    np.testing.assert_array_equal((t + 1).numpy(), src.numpy() + 1)


def test_fields_are_writable_and_deletable():
    t = ember.zeros(4)
    t._shape, t._stride = (2, 2), (2, 1)
    assert t.shape == (2, 2)
    assert (t + 1).shape == (2, 2)
    t.grad = ember.ones(2, 2)
    t._autograd_meta = "meta"
    assert t._autograd_meta == "meta"
    del t.grad
    with pytest.raises(AttributeError):
        _ = t.grad
    t.grad = None
    assert t.grad is None
    size = ember.Size((2, 2))
    t._shape = size
    assert t._shape is size  # the object given is kept (a Size stays a Size)


def test_malformed_metadata_raises_type_error():
    t = ember.zeros(4)
    with pytest.raises(TypeError):
        t._shape = [4]
    with pytest.raises(TypeError):
        t._stride = 1
    with pytest.raises(TypeError):
        t._offset = "0"
    assert t._shape == (4,) and t._stride == (1,) and t._offset == 0  # unchanged after the errors


def test_symbolic_sizes_are_kept_and_take_the_general_path():
    class Sym:
        pass

    s = Sym()
    t = ember.zeros(4)
    t._shape = (s,)
    assert t._shape[0] is s  # stored; native kernels fall back to reading attributes (and refuse it)
    with pytest.raises((TypeError, RuntimeError)):
        _C.binary(_C.binary_ops["add"], t, t, t)


def test_subclass_instance_dict_and_parameter():
    class Tagged(Tensor):
        pass

    t = ember.ones(3).as_subclass(Tagged)
    t.tag = "x"
    assert t.__dict__ == {"tag": "x"}
    assert isinstance(t + 1, Tensor)
    assert isinstance(t, _C.TensorBase) and t._shape == (3,)


def test_pickle_and_deepcopy():
    t = ember.arange(6.0).reshape(2, 3)
    u = pickle.loads(pickle.dumps(t))
    assert u._shape == (2, 3) and u.dtype is ember.float32
    np.testing.assert_array_equal(u.numpy(), t.numpy())
    w = ember.ones(2, requires_grad=True)
    c = copy.deepcopy(w)
    assert c.requires_grad and c._storage is not w._storage


def test_weakref_and_gc_of_cycles():
    t = ember.ones(2)
    r = weakref.ref(t)
    assert r() is t
    del t
    gc.collect()
    assert r() is None

    class Node:
        pass

    a = ember.ones(2)
    n = Node()
    n.out = a
    a.grad_fn = n  # a cycle through a C field
    ra = weakref.ref(a)
    del a, n
    gc.collect()
    assert ra() is None


def test_requires_grad_mirror_follows_writes():
    t = ember.ones(2)
    t._requires_grad = 1  # any truthy object, as a slot allowed
    assert t.requires_grad
    t._requires_grad = False
    assert not t.requires_grad
