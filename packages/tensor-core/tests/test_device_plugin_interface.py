"""The device-plugin interface of the core (device.Backend): a plugin device's storage allocation,
copies to and from it, pinned memory hooks, and the error for ops it has no kernel for. Exercised
with a stand-in device ("xpu") whose storages are host memory, so it runs without any GPU."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _C
from ember._src import device as devmod
from ember._src.dispatch import OPS


class _Storage:
    """A plugin storage: host bytes behind the interface a device storage provides."""

    device_type = "xpu"

    def __init__(self, nbytes, dev):
        self.host = _C.Storage.allocate(nbytes, False)
        self.device = ember.device("xpu", 0 if dev.index is None else dev.index)
        self.version = 0
        self.inference = False

    def data_ptr(self):
        return self.host.data_ptr()

    def nbytes(self):
        return self.host.nbytes()


def _as_host(t):
    from ember._src.tensor import make_tensor

    storage = t._storage.host if isinstance(t._storage, _Storage) else t._storage
    return make_tensor(storage, t._shape, t._stride, t._offset, t.dtype, ember.device("cpu"))


@pytest.fixture
def xpu():
    copies = []

    def copy(dst, src, non_blocking=False):
        copies.append((dst.device.type, src.device.type))
        _C.copy_(_as_host(dst), _as_host(src))

    def to_copy(self, *, dtype=None, device=None):
        from ember._src.tensor import new_empty_tensor

        out = new_empty_tensor(self._shape, dtype or self.dtype, device or self._device)
        copy(out, self)
        return out

    backend = devmod.Backend("xpu", lambda n, zero=False, dev=None: _Storage(n, dev or ember.device("xpu")),
                             copy=copy)
    devmod.register_backend(backend)
    OPS["_to_copy"].kernels["xpu"] = to_copy
    yield copies
    del OPS["_to_copy"].kernels["xpu"]
    del devmod._BACKENDS["xpu"]


def test_tensors_travel_to_and_from_a_plugin_device(xpu):
    x = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    y = x.to("xpu")
    assert y.device == ember.device("xpu:0")  # the plugin names the device index it allocated on
    assert ("xpu", "cpu") in xpu
    back = y.to("cpu")
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    assert ("cpu", "xpu") in xpu
    assert y.to("xpu") is y  # "xpu" names the device the tensor is already on
    z = ember.empty(2, 3)
    z.copy_(y)  # copy_ into a CPU tensor from a plugin tensor goes through the plugin's copy
    np.testing.assert_array_equal(z.numpy(), x.numpy())
    assert y.tolist() == x.tolist()  # read through a host copy
    assert "device='xpu:0'" in repr(y)


def test_ops_without_a_kernel_name_op_and_device(xpu):
    y = ember.ones(3).to("xpu")
    with pytest.raises(NotImplementedError, match="exp.*'xpu'"):
        ember.exp(y)


def test_unknown_plugin_device_raises_like_a_cpu_only_build():
    with pytest.raises(RuntimeError, match="without a 'mps' backend"):
        ember.ones(2).to("mps")


@pytest.mark.parametrize("call", [
    lambda L: L.device(0),
    lambda L: L.ones(2).to(0),
    lambda L: L.ones(2, device=0),
    lambda L: L.nn.Linear(2, 2).to(0),
])
def test_an_int_device_without_an_accelerator_raises_like_torch(call):
    # an int names the accelerator's device; with none (PyTorch's CPU build) that is a RuntimeError
    torch = pytest.importorskip("torch")
    if devmod._has_accelerator() or torch.cuda.is_available():
        pytest.skip("an accelerator is present")
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
            call(lib)
