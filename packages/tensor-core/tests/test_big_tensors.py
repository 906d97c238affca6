"""Tensors of more than 2**31 elements: every index, size and offset is 64-bit.

Two tiers. The cheap one always runs: size and stride arithmetic on the meta device (shapes,
strides, numel, views, broadcasting of > 2**31 elements without memory) and absurd
allocations that must raise, not crash. The ``bigmem`` tier allocates 2-5 GB per test and
runs only with EMBER_TEST_BIGMEM=1 (``nox -s bigmem``). Expected values are built from a
mostly-zero tensor with a few marked elements past 2**31, so they are known without an
oracle holding a second copy in memory.
"""

from __future__ import annotations

import os

import pytest

import ember

BIG = 2**31 + 7  # past both int32 and uint32-as-int31 indexing
# Marked elements of the shared uint8 tensor: {index: value}; the rest are zero.
MARKS = {10: 1, 2**31 - 1: 2, 2**31: 3, 2**31 + 1: 9, BIG - 3: 7, BIG - 1: 5}

_skip_unless_enabled = pytest.mark.skipif(
    os.environ.get("EMBER_TEST_BIGMEM") != "1", reason="allocates gigabytes: set EMBER_TEST_BIGMEM=1 (nox -s bigmem)"
)


def bigmem(test):
    """Marks a test ``bigmem`` (``-m bigmem`` selects them) and skips it unless EMBER_TEST_BIGMEM=1."""
    return pytest.mark.bigmem(_skip_unless_enabled(test))


def _mem_available() -> int:
    """Bytes the kernel says can be allocated without swapping (0 when unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _needs(gigabytes: float) -> None:
    # EMBER_TEST_BIGMEM_GB overrides MemAvailable, which some VMs report low until memory is touched.
    declared = os.environ.get("EMBER_TEST_BIGMEM_GB")
    available = float(declared) * 2**30 if declared else _mem_available()
    if available < gigabytes * 2**30:
        pytest.skip(f"needs {gigabytes} GB of free memory")


# -- always on: metadata only -----------------------------------------------------------------


def test_meta_shapes_strides_numel():
    t = ember.empty(BIG, dtype=ember.uint8, device="meta")
    assert t.shape == (BIG,) and t.stride() == (1,) and t.numel() == BIG
    m = ember.empty(3, 2**31 + 1, device="meta")
    assert m.stride() == (2**31 + 1, 1) and m.numel() == 3 * (2**31 + 1)
    assert m.t().shape == (2**31 + 1, 3) and m.t().stride() == (1, 2**31 + 1)
    assert m.element_size() * m.numel() == 4 * 3 * (2**31 + 1)


def test_meta_views_past_2_31():
    t = ember.empty(BIG, dtype=ember.int8, device="meta")
    tail = t[2**31 :]
    assert tail.shape == (7,) and tail.storage_offset() == 2**31
    assert t[BIG - 1 :].storage_offset() == BIG - 1
    assert t[::2**30].shape == (3,) and t[::2**30].stride() == (2**30,)
    v = ember.empty(2**31 + 8, device="meta").view(8, -1)
    assert v.shape == (8, 2**28 + 1) and v.stride() == (2**28 + 1, 1)
    assert v[7].storage_offset() == 7 * (2**28 + 1)
    r = v.reshape(2, 4, -1).permute(2, 0, 1)
    assert r.shape == (2**28 + 1, 2, 4) and r.stride() == (1, 4 * (2**28 + 1), 2**28 + 1)
    assert v.unsqueeze(0).expand(3, 8, 2**28 + 1).stride() == (0, 2**28 + 1, 1)
    assert t.unfold(0, 2**31, 7).shape == (2, 2**31)


def test_meta_broadcasting_and_ops():
    a = ember.empty(2**16, 1, device="meta")
    b = ember.empty(1, 2**16, device="meta")
    out = a + b
    assert out.shape == (2**16, 2**16) and out.numel() == 2**32 and out.device.type == "meta"
    assert (a * b).sum(dim=1).shape == (2**16,)
    big = ember.empty(BIG, dtype=ember.uint8, device="meta")
    assert ember.cat([big, big]).shape == (2 * BIG,)
    assert big.to(ember.int64).shape == (BIG,) and big.sum().dtype == ember.int64


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("shape", [(2**62,), (2**40, 2**40), (2**20, 2**20, 2**20, 2**20), (2**31, 2**31, 2)])
def test_size_overflow_raises(device, shape):
    # numel * itemsize past int64: PyTorch's "Storage size calculation overflowed".
    with pytest.raises(RuntimeError, match="overflow"):
        ember.empty(*shape, device=device)


def test_dimension_past_int64_is_type_error():
    with pytest.raises(TypeError):
        ember.empty(2**63)


def test_unallocatable_raises_runtime_error():
    # 2**50 bytes (1 PiB) fits int64 but no machine has it: an error, never a crash.
    with pytest.raises(RuntimeError, match="allocate"):
        ember.empty(2**50, dtype=ember.uint8)
    with pytest.raises(RuntimeError, match="allocate"):
        ember.zeros(2**48, dtype=ember.float32)


def test_blas_dimension_limit_without_memory():
    # Expanded (stride-0) operands reach the kernel as they are: the int32 check needs no data.
    a = ember.ones(1, 1).expand(1, 2**31)
    b = ember.ones(1, 1).expand(2**31, 1)
    with pytest.raises(RuntimeError, match="int32"):
        a @ b
    with pytest.raises(RuntimeError, match="int32"):
        ember.ones(2, 1).expand(2, 2**31) @ ember.ones(1, 2).expand(2**31, 2)


@pytest.mark.parametrize(
    "shape, stride, offset",
    [((3, 2), (2**62, 2**62 + 1), 0), ((5,), (-(2**62),), 2**62), ((2,), (2**63 - 1,), 0), ((2**40,), (2**30,), 0)],
)
def test_forged_strides_past_int64_raise(shape, stride, offset):
    # Slots written directly (as a buggy extension might): the kernel's bounds check must not wrap.
    t = ember.zeros(4)
    t._shape, t._stride, t._offset = shape, stride, offset
    with pytest.raises(IndexError, match="exceeds its storage"):
        t.sum()


def test_expand_past_int64_numel_raises():
    t = ember.ones(1, 1)
    assert t.expand(2**31, 2**31).numel() == 2**62  # fine: a view of one element
    with pytest.raises(RuntimeError, match="overflow"):
        t.expand(2**40, 2**40)
    with pytest.raises(RuntimeError, match="overflow"):
        ember.empty(1, 2**40, device="meta").expand(2**40, 2**40)


def test_integer_matmul_scratch_failure_raises_not_aborts():
    # No BLAS (no int32 limit) for integers, but packing an expanded 2**40-long operand cannot
    # be allocated: the failure happens on OpenMP threads and must come back as an exception.
    a = ember.ones(2, 1, dtype=ember.uint8).expand(2, 2**40)
    b = ember.ones(1, 1, dtype=ember.uint8).expand(2**40, 2**20)
    with pytest.raises((MemoryError, RuntimeError)):
        a @ b


def test_view_of_absurd_shape_raises():
    t = ember.empty(4, device="meta")
    with pytest.raises(RuntimeError):
        t.view(2**62, 2**62)
    with pytest.raises(RuntimeError):
        ember.empty(4).as_strided((2**40,), (2**40,))


# -- bigmem: real data past 2**31 ----------------------------------------------------------


@pytest.fixture(scope="module")
def marked():
    """A shared read-only uint8 tensor of BIG elements: zero except MARKS."""
    _needs(3)
    t = ember.zeros(BIG, dtype=ember.uint8)
    for index, value in MARKS.items():
        t[index] = value
    yield t
    del t


@bigmem
def test_sum_and_extremes(marked):
    assert marked.sum().item() == sum(MARKS.values())
    assert marked.sum(dtype=ember.int64).item() == sum(MARKS.values())
    assert marked.argmax().item() == 2**31 + 1  # the 9
    assert marked.max().item() == 9
    assert marked[2**31 :].argmin().item() == 2  # first zero of the tail
    assert marked.count_nonzero().item() == len(MARKS)


@bigmem
def test_read_at_the_end(marked):
    for index, value in MARKS.items():
        assert marked[index].item() == value
        assert marked[index - BIG].item() == value  # negative index
    assert marked[2**31 :].tolist() == [3, 9, 0, 0, 7, 0, 5]
    assert marked[BIG - 7 : BIG : 3].tolist() == [3, 0, 5]


@bigmem
def test_write_at_the_end():
    _needs(3)
    t = ember.zeros(BIG, dtype=ember.int8)
    t[BIG - 2] = -5
    t[2**31 + 3] = 100
    t[-1] = 1
    assert t[2**31 :].tolist() == [0, 0, 0, 100, 0, -5, 1]
    assert t.sum().item() == 96
    assert t.argmin().item() == BIG - 2 and t.argmax().item() == 2**31 + 3
    t[2**31 + 3 :].fill_(-1)  # a view starting past 2**31
    assert t[2**31 :].tolist() == [0, 0, 0, -1, -1, -1, -1]


@bigmem
def test_clone_and_slice_copy(marked):
    _needs(5)
    c = marked.clone()
    assert c.data_ptr() != marked.data_ptr() and c[-1].item() == 5 and c.sum().item() == sum(MARKS.values())
    del c
    tail = marked[2**31 - 1 :].contiguous()
    assert tail.shape == (8,) and tail.tolist() == [2, 3, 9, 0, 0, 7, 0, 5]
    dst = ember.zeros(BIG, dtype=ember.uint8)
    dst[2**31 :].copy_(marked[2**31 :])
    dst.copy_(marked)
    assert dst[2**31 - 1 :].tolist() == [2, 3, 9, 0, 0, 7, 0, 5]


@bigmem
def test_view_reshape_and_transpose_copy():
    _needs(5)
    n = 2**31 + 8
    t = ember.zeros(n, dtype=ember.uint8)
    t[-1] = 4
    t[n - 2**28 - 2] = 6  # last element of row 6 (rows of 2**28 + 1)
    v = t.view(8, -1)
    assert v[7, -1].item() == 4 and v[6, -1].item() == 6
    assert v.sum(dim=1).tolist() == [0] * 6 + [6, 4]
    assert v.sum(dim=0)[-1].item() == 10
    # A transposed copy walks strides of 2**28 + 1 through the whole tensor.
    tt = v.t().contiguous()
    assert tt.shape == (2**28 + 1, 8) and tt[-1].tolist() == [0] * 6 + [6, 4]
    del tt
    assert t.reshape(2, -1)[1, -1].item() == 4


@bigmem
def test_comparison_and_nonzero(marked):
    _needs(5)
    mask = marked > 4
    assert mask.dtype == ember.bool and mask[-1].item() and mask.sum().item() == 3
    del mask
    nz = (marked == 7).nonzero()
    assert nz.tolist() == [[BIG - 3]]
    assert marked.nonzero().flatten().tolist() == sorted(MARKS)
    assert ember.where(marked == 5, marked, 0).sum().item() == 5  # stays uint8: no 16 GB int64


@bigmem
def test_cat_past_2_31(marked):
    _needs(5)
    small = ember.tensor([11, 12, 13], dtype=ember.uint8)
    out = ember.cat([marked, small])
    assert out.shape == (BIG + 3,) and out[BIG - 1 :].tolist() == [5, 11, 12, 13]
    del out
    out = ember.cat([small, marked])
    assert out[-4:].tolist() == [0, 7, 0, 5] and out[2**31 + 4].item() == 9


@bigmem
def test_to_dtype(marked):
    _needs(5)
    s = marked.to(ember.int8)
    assert s.dtype == ember.int8 and s[2**31 :].tolist() == [3, 9, 0, 0, 7, 0, 5]
    del s
    h = marked.to(ember.int16)
    assert h[-1].item() == 5 and h.sum().item() == sum(MARKS.values())


@bigmem
def test_fill_and_elementwise():
    _needs(5)
    t = ember.empty(BIG, dtype=ember.uint8)
    t.fill_(3)
    assert t[-1].item() == 3 and t.sum().item() == 3 * BIG
    t.add_(2)
    u = t * 2
    assert u[-1].item() == 10 and u[2**31].item() == 10
    assert (u == 10).all().item()


@bigmem
def test_gather_index_select_above_2_31(marked):
    idx = ember.tensor([BIG - 1, 2**31 + 1, 0, BIG - 3, 2**31], dtype=ember.int64)
    expected = [5, 9, 0, 7, 3]
    assert marked.index_select(0, idx).tolist() == expected
    assert marked.gather(0, idx).tolist() == expected
    assert marked[idx].tolist() == expected
    assert ember.take(marked, idx).tolist() == expected
    bad = ember.tensor([BIG], dtype=ember.int64)
    with pytest.raises(IndexError):
        marked.index_select(0, bad)


@bigmem
def test_scatter_and_index_put_above_2_31():
    _needs(3)
    t = ember.zeros(BIG, dtype=ember.uint8)
    idx = ember.tensor([BIG - 1, 2**31 + 2], dtype=ember.int64)
    t[idx] = ember.tensor([8, 6], dtype=ember.uint8)
    t.scatter_(0, ember.tensor([2**31], dtype=ember.int64), ember.tensor([4], dtype=ember.uint8))
    t.index_add_(0, idx, ember.tensor([1, 1], dtype=ember.uint8))
    assert t[2**31 :].tolist() == [4, 0, 7, 0, 0, 0, 9]


@bigmem
def test_cumsum_past_2_31():
    # int64 input and output of 2**31 + 7 elements: 32 GB.
    _needs(36)
    t = ember.ones(BIG, dtype=ember.int64)
    c = t.cumsum(0)
    assert c[-1].item() == BIG and c[2**31].item() == 2**31 + 1
    del t
    assert c[2**31 + 5].item() == 2**31 + 6


@bigmem
def test_scan_in_place_dtype(marked):
    # A scan over 2**31 + 7 elements without the int64 promotion: 2 GB out.
    _needs(5)
    c = marked.cumsum(0, dtype=ember.uint8)
    assert c[2**31 - 2 : 2**31 + 2].tolist() == [1, 3, 6, 15] and c[-1].item() == sum(MARKS.values())


@bigmem
def test_reductions_along_a_long_dim(marked):
    values, indices = marked.max(dim=0)
    assert values.item() == 9 and indices.item() == 2**31 + 1
    row = marked.view(1, BIG)
    assert row.sum(dim=1).tolist() == [sum(MARKS.values())]
    assert row.argmax(dim=1).tolist() == [2**31 + 1] and row.amin(dim=1).tolist() == [0]
    values, indices = marked.topk(3)
    assert values.tolist() == [9, 7, 5] and indices.tolist() == [2**31 + 1, BIG - 3, BIG - 1]
    values, indices = marked[2**31 - 4 :].kthvalue(11)
    assert values.item() == 9 and indices.item() == 5


@bigmem
def test_masked_ops(marked):
    _needs(7)
    mask = marked > 4
    assert ember.masked_select(marked, mask).tolist() == [9, 7, 5]
    out = marked.masked_fill(mask, 1)
    assert out[2**31 :].tolist() == [3, 1, 0, 0, 1, 0, 1]


@bigmem
def test_cumsum_uint8_promotes(marked):
    # uint8 -> int64: 2 GB in, 16 GB out.
    _needs(20)
    c = marked.cumsum(0)
    assert c.dtype == ember.int64 and c[-1].item() == sum(MARKS.values()) and c[2**31].item() == 6


@bigmem
def test_sort_and_topk_long_row():
    # A row past 2**31 (sort refused those before): uint32 positions, ~16 bytes of scratch an element.
    _needs(64)
    t = ember.zeros(BIG, dtype=ember.uint8)
    t[2**31 + 2] = 9
    t[5] = 9
    values, indices = t.topk(2)
    assert values.tolist() == [9, 9] and indices.tolist() == [5, 2**31 + 2]
    values, indices = t.sort(descending=True, stable=True)
    assert values[:3].tolist() == [9, 9, 0] and indices[:2].tolist() == [5, 2**31 + 2]


@bigmem
def test_matmul_dims_past_blas_int_raise():
    # OpenBLAS takes int32 sizes: a clear error, never a wrapped-around dimension. The operands
    # are real (not expanded) but never written: the error comes before any page is touched.
    _needs(2)
    a = ember.empty(1, BIG, dtype=ember.float32)
    b = ember.empty(BIG, 1, dtype=ember.float32)
    for product in (lambda: a @ b, lambda: ember.mm(b, a[:, :1]), lambda: ember.mv(a, b[:, 0]),
                    lambda: ember.matmul(a.view(1, 1, BIG), b.view(1, BIG, 1))):
        with pytest.raises(RuntimeError, match="int32"):
            product()


@bigmem
def test_integer_matmul_long_inner_dim(marked):
    # Integer products do not use BLAS: a (1, BIG) @ (BIG, 1) product, packed operands included.
    _needs(9)
    ones = ember.ones(BIG, 1, dtype=ember.uint8)
    assert (marked.view(1, BIG) @ ones).item() == sum(MARKS.values())
