"""ember.nested's strided nested tensor: construction, unbind, indexing and to_padded_tensor, against
torch.nested (what programs written for PyTorch's prototype API use)."""

import warnings

import pytest
import torch

import ember


def _run(lib):
    a = lib.arange(6.0).reshape(2, 3)
    b = -lib.arange(12.0).reshape(4, 3)
    nt = lib.nested.nested_tensor([a, b], dtype=lib.float64)
    out = [nt.is_nested, nt.dim(), nt.size(0), nt.size(2), str(nt.dtype).split(".")[1], nt.requires_grad,
           [list(t.shape) for t in nt.unbind()], nt[1].tolist(), nt.to_padded_tensor(0.5).tolist(),
           lib.nested.to_padded_tensor(nt, -1.0, (2, 5, 4)).tolist()]
    a.fill_(9)  # nested_tensor copied its components
    out.append(nt[0].tolist())
    out.append(str(lib.nested.nested_tensor([[1, 2], [3]]).dtype).split(".")[1])
    out.append(lib.nested.as_nested_tensor([lib.ones(2), lib.ones(3)]).to_padded_tensor(0).tolist())
    with pytest.raises(RuntimeError, match="irregular"):
        nt.size(1)
    with pytest.raises(RuntimeError, match="same dimension"):
        lib.nested.nested_tensor([lib.ones(2), lib.ones(2, 2)])
    return out


def test_nested_tensor_matches_torch():
    import ember.nested  # noqa: F401  (the import statement programs write)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _run(ember) == _run(torch)


def test_as_nested_tensor_keeps_autograd():
    for lib in (ember, torch):
        x = lib.ones(2, requires_grad=True)
        y = lib.ones(3, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nt = lib.nested.as_nested_tensor([x * 2, y * 3])
            (lib.nested.to_padded_tensor(nt, 0.0) * lib.arange(3.0)).sum().backward()
        assert x.grad.tolist() == [0.0, 2.0] and y.grad.tolist() == [0.0, 3.0, 6.0]
