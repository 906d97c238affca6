"""Tensor introspection and memory helpers against PyTorch: is_signed/is_inference/is_neg/
isreal/get_device/is_storage/detach, output_nr, Tensor.new, apply_/map_/map2_, cuda and
pin_memory without an accelerator, and share_memory_ (checked across a fork)."""

import os

import numpy as np
import pytest

import ember
from ember._src import plugins

from conftest import assert_same, make_pair, torch

needs_autograd = pytest.mark.skipif(plugins.load("autograd") is None, reason="needs ember-autograd")


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int64", "float16", "bfloat16", "float64"])
def test_predicates(dtype):
    e, t = make_pair((2, 3), dtype, layout="transposed")
    assert ember.is_signed(e) == torch.is_signed(t) == e.is_signed()
    assert ember.is_neg(e) is False and e.is_neg() is t.is_neg() is False
    assert_same(ember.isreal(e), torch.isreal(t))
    assert_same(e.isreal(), t.isreal())
    assert ember.get_device(e) == torch.get_device(t) == -1
    assert ember.is_same_size(e, e) is torch.is_same_size(t, t) is True


def test_isreal_complex_and_meta():
    z = ember.tensor([1 + 0j, 1 + 1j, -0.0 + 0j])
    assert_same(ember.isreal(z), torch.isreal(torch.tensor([1 + 0j, 1 + 1j, -0.0 + 0j])))
    assert ember.empty(2, device="meta").get_device() == torch.empty(2, device="meta").get_device()


def test_is_storage_and_detach():
    x = ember.arange(3.0)
    assert ember.is_storage(x.untyped_storage()) and not ember.is_storage(x)
    assert torch.is_storage(torch.arange(3.0).untyped_storage()) and not torch.is_storage(torch.arange(3.0))
    d = ember.detach(x)
    assert d.untyped_storage() is x.untyped_storage() and d.requires_grad is False
    with pytest.raises(TypeError):
        ember.detach([1.0])


def test_is_inference():
    with ember.inference_mode():
        a = ember.ones(3)
        b = a * 2
    c = ember.ones(3)
    assert ember.is_inference(a) and b.is_inference() and a[1:].is_inference()
    assert not c.is_inference() and not (c + 1).is_inference()
    with torch.inference_mode():
        ta = torch.ones(3)
    assert torch.is_inference(ta) and not torch.ones(3).is_inference()


def test_pointers():
    x = ember.arange(6.0).reshape(2, 3)[1]
    assert x.const_data_ptr() == x.data_ptr() == x.untyped_storage().data_ptr() + 3 * 4


@needs_autograd
def test_output_nr():
    x = ember.zeros(3, 2, requires_grad=True)
    tx = torch.zeros(3, 2, requires_grad=True)
    assert x.output_nr == tx.output_nr == 0
    # Multi-output ops number their outputs (ember's unbind/split are per-piece views, not one op).
    assert [o.output_nr for o in ember.var_mean(x, 0)] == [o.output_nr for o in torch.var_mean(tx, 0)] == [0, 1]
    assert [o.output_nr for o in ember.linalg.qr(x)] == [0, 1]
    assert ember.zeros(1).output_nr == 0


# -- Tensor.new ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make_args", [
    lambda m: (2, 3), lambda m: (m.Size([2, 3]),), lambda m: ([1, 2],), lambda m: ((2, 3),),
    lambda m: ([[1.5, 2], [3, 4]],), lambda m: (),
])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float64"])
def test_new(make_args, dtype):
    e, t = make_pair((2,), dtype)
    e_args, t_args = make_args(ember), make_args(torch)
    e_out, t_out = e.new(*e_args), t.new(*t_args)
    assert e_out.dtype == e.dtype and tuple(e_out.shape) == tuple(t_out.shape)
    if e_args and not isinstance(e_args[0], (int, ember.Size)):  # data, not sizes: compare values
        assert_same(e_out, t_out)


def test_new_from_tensor_and_errors():
    x = ember.zeros(2)
    other = ember.tensor([1.0, 2.0])
    aliased = x.new(other)
    assert aliased.untyped_storage() is other.untyped_storage()
    with pytest.raises(TypeError):
        torch.zeros(2).new(torch.tensor([1, 2]))
    with pytest.raises(TypeError):
        x.new(ember.tensor([1, 2]))
    with pytest.raises(TypeError):
        torch.zeros(2).new(2, dtype=torch.int64)
    with pytest.raises(TypeError):
        x.new(2, dtype=ember.int64)
    assert x.new(2, device="meta").is_meta


# -- apply_ / map_ / map2_ ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_apply_(dtype, layout):
    e, t = make_pair((3, 4), dtype, layout=layout)
    fn = (lambda v: not v) if dtype == "bool" else (lambda v: v * 2 + 1.7)
    assert e.apply_(fn) is e
    t.apply_(fn)
    assert_same(e, t)


def test_map_and_map2_():
    e, t = make_pair((2, 3), "float64", layout="transposed")
    oe, ot = make_pair((3,), "float64", seed=1)
    ye, yt = make_pair((2, 1), "float64", seed=2)
    assert_same(e.clone().map_(oe, lambda a, b: a * b - 1), t.clone().map_(ot, lambda a, b: a * b - 1))
    assert_same(e.map2_(oe, ye, lambda a, b, c: a + b * c), t.map2_(ot, yt, lambda a, b, c: a + b * c))


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.zeros(2, 3).map_(m.arange(3), lambda a, b: a), TypeError),
    (lambda m: m.zeros(2, 3).map_(m.arange(2.0), lambda a, b: a), RuntimeError),
    (lambda m: m.zeros(3).map_(m.zeros(2, 3), lambda a, b: a), RuntimeError),
    (lambda m: m.zeros(2, 3).map2_(m.arange(3.0), 5, lambda a, b, c: a), TypeError),
    (lambda m: m.zeros(2, dtype=m.int32).apply_(lambda v: "a"), TypeError),
    (lambda m: m.zeros(2, requires_grad=True).apply_(lambda v: v), RuntimeError),
])
def test_python_fill_errors(call, exc):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc):
        call(ember)


def test_apply_on_meta_is_a_no_op():
    m = ember.empty(2, device="meta")
    assert m.apply_(lambda v: v + 1) is m


# -- accelerators -------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda m: m.zeros(2).cuda(), lambda m: m.zeros(2).to("cuda"), lambda m: m.zeros(2, device="cuda"),
    lambda m: m.ones(2, 2, device="cuda:0"),
])
def test_no_cuda_raises_assertion_error(call):
    with pytest.raises(AssertionError):
        call(torch)
    with pytest.raises(AssertionError, match="CUDA"):
        call(ember)


@pytest.mark.parametrize("call", [
    lambda m: m.zeros(2, pin_memory=True), lambda m: m.ones(2, pin_memory=True),
    lambda m: m.full((2,), 1.0, pin_memory=True),
    lambda m: m.arange(3, pin_memory=True), lambda m: m.linspace(0, 1, 3, pin_memory=True),
    lambda m: m.eye(2, pin_memory=True), lambda m: m.zeros_like(m.zeros(2), pin_memory=True),
    lambda m: m.scalar_tensor(1.0, pin_memory=True), lambda m: m.logspace(0, 1, 3, pin_memory=True),
])
def test_factories_accept_pin_memory_false_and_refuse_true(call):
    for m in (torch, ember):
        with pytest.raises(RuntimeError):
            call(m)


def test_pin_memory():
    for m in (torch, ember):
        assert m.zeros(2, pin_memory=False).is_pinned() is False
        assert m.full_like(m.zeros(2), 3.0, pin_memory=False).tolist() == [3.0, 3.0]
        assert m.zeros(2).is_pinned() is False
        with pytest.raises(RuntimeError):
            m.zeros(2).pin_memory()
        with pytest.raises(RuntimeError):
            m.empty(2, pin_memory=True)
        with pytest.raises(RuntimeError):
            m.tensor([1.0], pin_memory=True)


# -- shared memory ------------------------------------------------------------------------------

def test_share_memory_in_place_keeps_views_and_values():
    base = ember.arange(12.0).reshape(3, 4)
    view = base[1:, ::2]
    before = base.clone()
    assert not base.is_shared()
    assert base.share_memory_() is base
    assert base.is_shared() and view.is_shared() and base.untyped_storage().is_shared()
    assert_same(base, to_torch_values(before))
    view.fill_(-1.0)  # the view writes into the moved memory
    assert base[1, 0].item() == -1.0 and base[1, 1].item() == 5.0
    ptr = base.data_ptr()
    base.share_memory_()  # already shared: nothing moves
    assert base.data_ptr() == ptr


def to_torch_values(e):
    return torch.tensor(e.tolist())


def test_share_memory_from_numpy_and_empty():
    arr = np.arange(4, dtype=np.float32)
    t = ember.from_numpy(arr).share_memory_()
    t.add_(1)
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0] and arr.tolist() == [0.0, 1.0, 2.0, 3.0]  # as PyTorch: moved
    assert ember.zeros(0).share_memory_().is_shared()
    with pytest.raises(RuntimeError):
        ember.zeros(2, device="meta").share_memory_()
    assert ember.zeros(2, device="meta").is_shared() is torch.zeros(2, device="meta").is_shared() is False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_shared_memory_is_seen_across_fork():
    shared = ember.zeros(1000, dtype=ember.int64).share_memory_()
    private = ember.zeros(1000, dtype=ember.int64)
    pid = os.fork()
    if pid == 0:  # the child writes; only the shared tensor's writes reach the parent
        try:
            shared.fill_(7)
            private.fill_(7)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert shared.sum().item() == 7000 and private.sum().item() == 0


def test_shared_storage_maps_from_its_fd():
    x = ember.arange(5, dtype=ember.int32).share_memory_()
    storage = x.untyped_storage()
    again = ember._C.Storage.from_shm_fd(storage.shm_fd, storage.nbytes())
    y = ember.empty(0, dtype=ember.int32).set_(again, 0, (5,))
    assert y.data_ptr() != x.data_ptr()  # a second mapping of the same memory
    y[2] = 40
    assert x.tolist() == [0, 1, 40, 3, 4]
    with pytest.raises(ValueError):
        ember._C.Storage.from_shm_fd(storage.shm_fd, storage.nbytes() + 4096)


def test_share_memory_keeps_memory_a_dlpack_consumer_reads():
    x = ember.arange(1000.0)
    consumer = torch.from_dlpack(x)  # holds x's storage from C++ and reads the old pointer
    x.share_memory_()
    assert x.is_shared()
    x.fill_(5.0)
    del x
    assert consumer.sum().item() == sum(range(1000))  # the old block is alive and unchanged


def _fill_received(t, value):
    t.fill_(value)


def _fill_from_queue(q, done):
    t = q.get()
    t.fill_(5)
    done.put(True)


@pytest.mark.parametrize("lib", ["torch", "ember"])
def test_shared_tensor_sent_to_a_spawned_process_is_the_same_memory(lib):
    # mnist_hogwild: model.share_memory(), then mp.Process(target=train, args=(model, ...)) with
    # the spawn start method; the children's optimizer steps must land in the parent's model
    import multiprocessing

    T = torch if lib == "torch" else ember
    base = T.zeros(4, 6).share_memory_()
    private = T.zeros(3)
    ctx = multiprocessing.get_context("spawn")
    for target in (base[1:, ::2], private):  # a strided view with an offset; an unshared tensor
        p = ctx.Process(target=_fill_received, args=(target, 3.0))
        p.start()
        p.join(60)
        assert p.exitcode == 0
    assert base.sum().item() == 27.0 and base[1:, ::2].eq(3.0).all().item() and base[0].eq(0).all().item()
    # PyTorch moves an unshared tensor into shared memory to send it; ember copies it
    # (docs/deviations.md, "utils.data: DataLoader batches travel by pickling")
    assert private.sum().item() == (9.0 if lib == "torch" else 0.0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_shared_tensor_put_on_a_queue_is_the_same_memory():
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    q, done = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_fill_from_queue, args=(q, done))
    p.start()
    x = ember.zeros(8, dtype=ember.int64).share_memory_()
    q.put(x[2:6])
    assert done.get(timeout=60)
    p.join(60)
    assert p.exitcode == 0 and x.tolist() == [0, 0, 5, 5, 5, 5, 0, 0]


def test_shape_ndim_data_ptr_read_natively_match_torch():
    # Tensor.shape/ndim/data_ptr()/numel()/is_contiguous() are _C.TensorBase's (no Python frame); the same
    # answers as PyTorch's.
    from ember._src import dispatch

    base_e, base_t = ember.arange(24.0).reshape(2, 3, 4), torch.arange(24.0).reshape(2, 3, 4)
    views = (lambda x: x, lambda x: x[1], lambda x: x[:, 1:, 2], lambda x: x.transpose(0, 2)[1:], lambda x: x[0, 0, 0])
    for f in views:
        e, t = f(base_e), f(base_t)
        assert type(e.shape) is ember.Size and e.shape == tuple(t.shape) and e.ndim == t.ndim == len(e.shape)
        assert repr(e.shape) == repr(t.shape).replace("torch", "ember")
        assert e.data_ptr() - base_e.data_ptr() == t.data_ptr() - base_t.data_ptr()
        assert e.numel() == e.nelement() == t.numel() and e.is_contiguous() == t.is_contiguous()
        assert e.is_contiguous(None) == e.is_contiguous(memory_format=ember.contiguous_format) == t.is_contiguous()
    h = ember.ones(3, dtype=ember.float16)[1:]
    assert h.data_ptr() == h.untyped_storage().data_ptr() + 2
    assert ember.ones(2, 3, device="meta").data_ptr() == 0
    sizes = ember.Size([2, 3])
    z = ember.zeros(sizes)
    z._shape = sizes  # a stored Size is returned as it is (immutable), a tuple is wrapped
    assert z.shape is sizes and ember.zeros(2, 3).shape is not ember.zeros(2, 3).shape
    with pytest.raises(RuntimeError, match="doesn't have storage"):
        ember.eye(2).to_sparse().data_ptr()
    assert ember.eye(3).to_sparse().numel() == 9
    cl, tcl = ember.ones(2, 3, 4, 5), torch.ones(2, 3, 4, 5)
    for fmt, tfmt in ((ember.channels_last, torch.channels_last), (ember.contiguous_format, torch.contiguous_format)):
        assert cl.is_contiguous(memory_format=fmt) == tcl.is_contiguous(memory_format=tfmt)
        assert cl.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2).is_contiguous(memory_format=fmt) == (
            tcl.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2).is_contiguous(memory_format=tfmt))
    with pytest.raises(TypeError):
        cl.is_contiguous(memory_format=3)
    seen = []
    dispatch.set_sync_hook(lambda tensor, reason: seen.append(reason))
    try:
        z.data_ptr()
    finally:
        dispatch.set_sync_hook(None)
    assert seen == ["Tensor.data_ptr()"]

    class Sub(ember.Tensor):
        @property
        def shape(self):
            return "sub"

        def data_ptr(self):
            return -1

    s = z.as_subclass(Sub)
    assert s.shape == "sub" and s.data_ptr() == -1 and s.ndim == 2
