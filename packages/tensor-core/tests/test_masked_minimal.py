"""ember.masked's reductions and normalizations against torch.masked (masked-out elements count as
the reduction's identity; fully masked rows give PyTorch's nan/inf)."""

import warnings

import pytest
import torch

import ember

CASES = [
    ("sum", (1,), {}), ("sum", (), {}), ("sum", (1,), {"keepdim": True}), ("prod", (1,), {}), ("amax", (1,), {}),
    ("amin", (1,), {}), ("amax", ((0, 1),), {}), ("mean", (1,), {}), ("mean", (0,), {}), ("argmax", (1,), {}),
    ("argmin", (1,), {}), ("softmax", (1,), {}), ("log_softmax", (1,), {}), ("softmin", (1,), {}),
    ("logsumexp", (1,), {}), ("var", (1,), {}), ("std", (1,), {}), ("norm", (2.0, 1), {}),
    ("normalize", (2.0, 1), {}), ("cumsum", (1,), {}),
]


@pytest.mark.parametrize("name,args,kwargs", CASES)
def test_masked_ops_match_torch(name, args, kwargs):
    def run(lib):
        x = lib.tensor([[1.0, 2, 3], [4, 5, 6]])
        m = lib.tensor([[True, False, True], [False, False, False]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = getattr(lib.masked, name)(x, *args, mask=m, **kwargs)
            plain = getattr(lib.masked, name)(x, *args, **kwargs)
        return [round(v, 4) if v == v else "nan" for v in out.flatten().tolist()], list(out.shape), \
            [round(v, 4) for v in plain.flatten().tolist()]

    assert run(ember) == run(torch)


def test_mask_of_other_dtype_and_broadcast_mask_as_torch():
    # PyTorch's _input_mask: a mask of another dtype counts its nonzeros as kept, a smaller mask is
    # broadcast with expand's error, a mask of more dims is an IndexError.
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    for lib in (ember, torch):
        got = lib.masked.amax(lib.tensor(x), 1, mask=lib.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]]))
        assert got.tolist() == [3.0, 5.0]
        assert lib.masked.sum(lib.tensor(x), 1, mask=lib.tensor([True, False, True])).tolist() == [4.0, 10.0]
        with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(3\) must match the existing size "
                                               r"\(2\) at non-singleton dimension 1"):
            lib.masked.sum(lib.tensor(x), 1, mask=lib.ones(3, 2, dtype=lib.bool))
        with pytest.raises(IndexError, match="_input_mask expected broadcastable mask"):
            lib.masked.sum(lib.ones(3), 0, mask=lib.ones(1, 3, dtype=lib.bool))
