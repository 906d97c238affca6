"""PyTorch's storage surface: ``UntypedStorage`` (bytes), the deprecated ``TypedStorage`` and its
legacy names, ``Tensor.set_`` on storages and a safe ``resize_``, against torch."""

import copy
import pickle
import warnings

import numpy as np
import pytest
import torch

import ember


def _both(fn):
    return fn(ember), fn(torch)


def test_untyped_storage_bytes_match_torch():
    for lib in (ember, torch):
        t = lib.arange(6, dtype=lib.float32)
        s = t.untyped_storage()
        assert isinstance(s, lib.UntypedStorage) and lib.is_storage(s)
    e, t = _both(lambda lib: lib.arange(6, dtype=lib.float32).untyped_storage())
    assert (e.nbytes(), e.size(), len(e), e.element_size()) == (t.nbytes(), t.size(), len(t), t.element_size())
    assert e.tolist() == t.tolist()
    assert (e[0], e[6], e[-1]) == (t[0], t[6], t[-1])
    assert str(e.device) == str(t.device) == "cpu" and e.is_cuda is t.is_cuda is False
    assert e[1:5].tolist() == t[1:5].tolist() and e[1:5].nbytes() == 4
    for s in (e, t):
        with pytest.raises(IndexError):
            s[24]
        with pytest.raises(IndexError):
            s[-25]
        with pytest.raises(TypeError):
            s["a"]
        with pytest.raises(RuntimeError, match="step of 2"):
            s[0:8:2]
        with pytest.raises(RuntimeError, match="int types"):
            s[0] = 2.5


def test_untyped_storage_writes_match_torch():
    def run(lib):
        s = lib.zeros(2).untyped_storage()
        s[0] = 300  # wraps modulo 256
        s[1] = -1
        s[2] = True
        s[4:6] = 7
        out = s.tolist()
        u = lib.UntypedStorage(8)
        u.fill_(3)
        u[0] = 7
        c = u.clone()
        u[1] = 9
        return out, c.tolist(), u.tolist(), lib.UntypedStorage([1, 2, 3]).tolist(), lib.UntypedStorage(b"ab").tolist()
    assert run(ember) == run(torch)


def test_untyped_storage_views_share_memory_and_write_through():
    for lib in (ember, torch):
        t = lib.zeros(4)
        s = t.untyped_storage()
        assert s.data_ptr() == t[2:].untyped_storage().data_ptr() == t.view(2, 2).untyped_storage().data_ptr()
        s[4:8] = 0  # bytes of element 1
        s.fill_(0)
        t.untyped_storage()[0:4].copy_(lib.tensor([1.0]).untyped_storage())
        assert t.tolist() == [1.0, 0.0, 0.0, 0.0]
    e = ember.zeros(2)
    assert e.untyped_storage()._cdata == e[1:].untyped_storage()._cdata


def test_resize_grows_and_shrinks_like_torch():
    for lib in (ember, torch):
        b = lib.zeros(4)
        v = b[1:3]
        b.untyped_storage().resize_(64)
        assert b.untyped_storage().nbytes() == 64 and v.tolist() == [0.0, 0.0] and v.data_ptr() - b.data_ptr() == 4
        b.add_(1)
        assert v.tolist() == [1.0, 1.0]
        u = lib.UntypedStorage(8).fill_(5)
        assert u.resize_(4).tolist() == [5] * 4 and u.resize_(6).nbytes() == 6
    with pytest.raises(RuntimeError, match="not resizable"):
        ember.from_numpy(np.zeros(3)).untyped_storage().resize_(0)


def test_resize_never_leaves_a_dangling_view():
    # PyTorch segfaults on y + 1 after shrinking y's storage; ember raises.
    y = ember.arange(4.0)
    y.untyped_storage().resize_(0)
    assert y.shape == (4,)
    with pytest.raises(IndexError, match="exceeds its storage"):
        y + 1
    with pytest.raises(IndexError, match="exceeds its storage"):
        y.sum()
    with pytest.raises(IndexError, match="exceeds its storage"):
        y.add_(1)
    with pytest.raises(IndexError, match="exceeds its storage"):
        y.tolist()
    y.untyped_storage().resize_(16)  # big enough again: usable, the bytes zero
    assert (y + 1).tolist() == [1.0] * 4
    # Exported memory (a memoryview, a NumPy array, a storage slice) blocks resize_.
    x = ember.zeros(4)
    view = memoryview(x.untyped_storage())
    with pytest.raises(RuntimeError, match="exported"):
        x.untyped_storage().resize_(0)
    view.release()
    piece = x.untyped_storage()[0:4]
    with pytest.raises(RuntimeError, match="exported"):
        x.untyped_storage().resize_(0)
    del piece
    x.untyped_storage().resize_(0)
    with pytest.raises(RuntimeError):
        ember.UntypedStorage(4).resize_(-1)


def test_untyped_storage_construction_and_copies():
    assert ember.UntypedStorage(3, device="meta").device.type == "meta"
    assert ember.UntypedStorage().nbytes() == 0
    with pytest.raises(RuntimeError):
        ember.UntypedStorage(-1)
    with pytest.raises(RuntimeError):
        torch.UntypedStorage(-1)
    s = ember.tensor([1, 2], dtype=ember.int16).untyped_storage()
    assert pickle.loads(pickle.dumps(s)).tolist() == s.tolist()
    d = copy.deepcopy(s)
    assert d.tolist() == s.tolist() and d.data_ptr() != s.data_ptr()
    assert "UntypedStorage(device=cpu) of size 4" in repr(s)


def test_typed_storage_matches_torch():
    def run(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = lib.arange(6, dtype=lib.float32)
            ts = t.storage()
        ts[1] = 10
        out = [type(ts).__name__, str(ts.dtype).split(".")[1], ts.size(), len(ts), ts.tolist(), ts[2], ts[-1],
               ts.nbytes(), ts.element_size(), t.tolist(), ts.data_ptr() == t.data_ptr(),
               isinstance(ts, lib.FloatStorage), isinstance(ts, lib.TypedStorage), isinstance(ts, lib.LongStorage),
               lib.is_storage(ts), ts.untyped().nbytes(), ts.pickle_storage_type()]
        msg = [str(w.message) for w in caught if "TypedStorage is deprecated" in str(w.message)]
        out.append(len(msg) <= 1)
        for bad in (6, -7):
            with pytest.raises(IndexError):
                ts[bad]
        with pytest.raises(RuntimeError, match="slices are only supported"):
            ts[1:3]
        f = lib.FloatStorage([1, 2, 3])
        out += [f.tolist(), lib.FloatStorage.dtype is lib.float32, lib.FloatStorage(2).size(),
                lib.TypedStorage([1, 2], dtype=lib.int64).tolist(), lib.BoolStorage([1, 0]).tolist(),
                f.fill_(3).tolist(), f.clone().tolist(), f.resize_(4), f.size(), f.double().tolist()[:3],
                lib.tensor([1.0, 2]).storage().copy_(lib.FloatStorage([5, 6])).tolist()]
        return out
    e, t = run(ember), run(torch)
    assert e == t


def test_typed_storage_warns_with_torchs_text():
    from ember._src import storage as st
    st._WARNED[0] = False
    with pytest.warns(UserWarning, match="TypedStorage is deprecated. It will be removed in the future and "
                                         "UntypedStorage will be the only storage class"):
        ember.ones(2).storage()


def test_set_on_storages_matches_torch():
    def run(lib):
        t = lib.arange(6, dtype=lib.float32)
        ts = t._typed_storage() if lib is ember else t.storage()
        a = lib.tensor([]).set_(ts, 1, (2, 2), (1, 2))
        b = lib.tensor([]).set_(t.untyped_storage(), 1, (2,), (1,))
        c = lib.tensor([1.0, 2.0]).set_(lib.FloatStorage([5, 6, 7]))
        d = lib.empty(3).set_()
        out = [a.tolist(), a.storage_offset(), b.tolist(), c.tolist(), tuple(d.shape),
               t[2:].storage_offset(), a.data_ptr() == t.data_ptr() + 4]
        with pytest.raises(RuntimeError, match="Expected a Storage of type"):
            lib.zeros(3, dtype=lib.int64).set_(lib.FloatStorage(3))
        with pytest.raises(RuntimeError):
            lib.zeros(2, requires_grad=True).set_(lib.FloatStorage(3))
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(ember) == run(torch)


def test_save_load_keeps_working_with_storages(tmp_path):
    x = ember.arange(5.0)
    v = x[1:]
    ember.save({"x": x, "v": v}, tmp_path / "a.pt")
    out = ember.load(tmp_path / "a.pt")
    assert out["v"].untyped_storage() is out["x"].untyped_storage() and out["v"].tolist() == [1.0, 2.0, 3.0, 4.0]
    back = torch.load(tmp_path / "a.pt")
    assert back["v"].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_saved_storages_use_torchs_records(tmp_path):
    e = ember.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.save({"s": e._typed_storage(), "t": e, "u": ember.tensor([1, 2], dtype=ember.uint8).untyped_storage()},
                   tmp_path / "s.pt")
        back = torch.load(tmp_path / "s.pt", weights_only=False)  # torch refuses UntypedStorage otherwise
        assert type(back["s"]).__name__ == "TypedStorage" and back["s"].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert back["s"].data_ptr() == back["t"].data_ptr()  # one record for the tensor and its storage
        assert back["u"].tolist() == [1, 2]
        torch.save(torch.arange(3.0).storage(), tmp_path / "t.pt")
        out = ember.load(tmp_path / "t.pt")
        assert isinstance(out, ember.FloatStorage) and out.tolist() == [0.0, 1.0, 2.0]
        with pytest.raises(RuntimeError, match="different types"):
            ember.save([e, e.untyped_storage()], tmp_path / "x.pt")


def test_legacy_constructors_view_a_storage_as_torch():
    def run(lib):
        f = lib.FloatStorage([1, 2])
        a = lib.Tensor(f)
        a[0] = 5  # a view: writes reach the storage
        out = [a.tolist(), f.tolist(), lib.FloatTensor(lib.FloatStorage([3])).tolist(),
               lib.tensor([1.0, 2]).new(lib.FloatStorage([3, 4])).tolist(),
               lib.Tensor(lib.tensor([1.0, 2]).untyped_storage()).tolist(),
               lib.tensor([1.0, 2]).new(lib.tensor([6.0, 7]).untyped_storage()).tolist()]
        with pytest.raises(RuntimeError, match="Expected a Storage of type"):
            lib.LongTensor(lib.FloatStorage([1]))
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(ember) == run(torch)


def test_set_grows_a_resizable_storage_as_torch():
    for lib in (ember, torch):
        x = lib.arange(12.0)
        y = lib.empty(0).set_(x.untyped_storage(), 10, (5,), (1,))
        assert x.untyped_storage().nbytes() == 60 and y.shape == (5,) and y[:2].tolist() == [10.0, 11.0]
    with pytest.raises(RuntimeError, match="out of bounds"):  # borrowed memory cannot grow
        ember.empty(0).set_(ember.from_numpy(np.zeros(2, dtype=np.float32)).untyped_storage(), 0, (5,), (1,))
