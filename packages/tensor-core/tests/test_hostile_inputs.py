"""No crash on hostile input: every case must raise a Python exception, never kill the process.

Cases drive the public ops and the native entry points (``ember._C.*``, called directly with
wrong types, wrong dtypes, mismatched shapes, out-of-range indices and views that point
outside their storage). A case that crashed the interpreter would take pytest down with it,
so each group of cases runs in one subprocess: the child announces each case before running
it, so a segfault or abort fails the test with the name of the case that caused it. Groups
keep the number of subprocesses (each imports ember) low.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Each case: (name, code). The code runs with `ember`, `E` (= ember) and `C` (= ember._C) in scope
# and must raise an Exception (any type: the fuzzer compares types against PyTorch).
SIZES = [
    ("empty_2_62", "E.empty(2**62)"),
    ("empty_2_63", "E.empty(2**63)"),
    ("empty_negative", "E.empty(-1)"),
    ("empty_product_overflows", "E.empty(2**32, 2**32)"),
    ("empty_product_overflows_3d", "E.empty(2**21, 2**21, 2**22)"),
    ("zeros_huge", "E.zeros(2**40, 2**30)"),
    ("full_negative", "E.full((3, -2), 1.0)"),
    ("ones_float_size", "E.ones(2.5)"),
    ("ones_str_size", "E.ones('3')"),
    ("arange_huge", "E.arange(0, 2**62)"),
    ("arange_zero_step", "E.arange(0, 10, 0)"),
    ("arange_nan", "E.arange(0, float('nan'))"),
    ("arange_inf", "E.arange(0, float('inf'))"),
    ("linspace_negative", "E.linspace(0, 1, -1)"),
    ("randn_negative", "E.randn(-3)"),
    ("randperm_negative", "E.randperm(-1)"),
    ("reshape_overflow", "E.ones(4).reshape(2**62, 2**2)"),
    ("view_negative", "E.ones(4).view(-2, -2)"),
    ("expand_overflow", "E.ones(1, 1).expand(2**40, 2**40).sum()"),
    ("expand_negative", "E.ones(1).expand(-2)"),
    ("repeat_overflow", "E.ones(2).repeat(2**62)"),
    ("repeat_negative", "E.ones(2).repeat(-1)"),
    ("storage_allocate_negative", "C.Storage.allocate(-8)"),
    ("storage_allocate_huge", "C.Storage.allocate(2**62)"),
    ("empty_out_of_memory", "E.empty(2**60)"),
    ("tensor_ragged", "E.tensor([[1, 2], [3]])"),
    ("tensor_bad_type", "E.tensor([object()])"),
    ("multinomial_negative", "E.multinomial(E.tensor([-1.0, 2.0]), 1)"),
    ("multinomial_nan", "E.multinomial(E.tensor([float('nan'), 1.0]), 1)"),
    ("multinomial_too_many", "E.multinomial(E.tensor([1.0, 2.0]), 3)"),
    ("bincount_negative", "E.bincount(E.tensor([-1, 2]))"),
    ("histc_inf_range", "E.histc(E.tensor([1.0, float('inf')]), 4)"),
    ("histc_zero_bins", "E.histc(E.tensor([1.0]), 0)"),
    (
        "one_hot_negative",
        "E.nn.functional.one_hot(E.tensor([-1]), 3) if hasattr(E, 'nn') else C.one_hot(None)",
    ),
]

INDICES = [
    ("index_select_high", "E.index_select(E.ones(3, 4), 0, E.tensor([3]))"),
    ("index_select_low", "E.index_select(E.ones(3, 4), 1, E.tensor([-5]))"),
    ("index_select_huge", "E.index_select(E.ones(3), 0, E.tensor([2**62]))"),
    ("index_select_int64_min", "E.index_select(E.ones(3), 0, E.tensor([-2**63]))"),
    ("index_select_float_index", "E.index_select(E.ones(3), 0, E.tensor([0.0]))"),
    ("index_select_2d_index", "E.index_select(E.ones(3), 0, E.tensor([[0]]))"),
    ("gather_high", "E.gather(E.ones(2, 3), 1, E.tensor([[0, 3]]))"),
    ("gather_negative", "E.gather(E.ones(2, 3), 1, E.tensor([[-1]]))"),
    ("gather_huge", "E.gather(E.ones(2, 3), 0, E.tensor([[2**40]]))"),
    ("gather_bad_rank", "E.gather(E.ones(2, 3), 1, E.tensor([0]))"),
    ("gather_index_too_big", "E.gather(E.ones(2, 3), 1, E.zeros(3, 3, dtype=E.int64))"),
    ("scatter_high", "E.zeros(2, 3).scatter_(1, E.tensor([[5]]), E.ones(1, 1))"),
    ("scatter_negative", "E.zeros(2, 3).scatter_(0, E.tensor([[-3]]), E.ones(1, 1))"),
    ("scatter_src_too_small", "E.zeros(2, 3).scatter_(1, E.zeros(2, 3, dtype=E.int64), E.ones(1, 1))"),
    ("scatter_add_high", "E.zeros(3).scatter_add_(0, E.tensor([3]), E.ones(1))"),
    ("scatter_reduce_high", "E.zeros(3).scatter_reduce_(0, E.tensor([7]), E.ones(1), 'amax')"),
    ("scatter_reduce_bad_mode", "E.zeros(3).scatter_reduce_(0, E.tensor([1]), E.ones(1), 'median')"),
    ("index_add_high", "E.zeros(3, 2).index_add_(0, E.tensor([3]), E.ones(1, 2))"),
    ("index_copy_negative", "E.zeros(3, 2).index_copy_(0, E.tensor([-4]), E.ones(1, 2))"),
    ("index_fill_high", "E.zeros(3, 2).index_fill_(1, E.tensor([2]), 1.0)"),
    ("embedding_high", "E.embedding(E.ones(4, 2), E.tensor([4]))"),
    ("embedding_negative", "E.embedding(E.ones(4, 2), E.tensor([-1]))"),
    ("embedding_huge", "E.embedding(E.ones(4, 2), E.tensor([2**62]))"),
    ("embedding_float_index", "E.embedding(E.ones(4, 2), E.tensor([1.0]))"),
    ("getitem_high", "E.ones(3)[E.tensor([3])]"),
    ("getitem_low", "E.ones(3)[E.tensor([-4])]"),
    ("getitem_int_high", "E.ones(3)[3]"),
    ("getitem_mask_shape", "E.ones(3)[E.tensor([True, False])]"),
    ("index_put_high", "E.zeros(3).index_put_((E.tensor([3]),), E.ones(1))"),
    ("index_put_accumulate_negative", "E.zeros(3).index_put_((E.tensor([-9]),), E.ones(1), accumulate=True)"),
    ("setitem_high", "E.zeros(3, 2).__setitem__((E.tensor([0]), E.tensor([2])), 1.0)"),
    ("index_put_bad_values", "E.zeros(3).index_put_((E.tensor([0, 1]),), E.ones(3))"),
    ("take_high", "E.take(E.ones(2, 2), E.tensor([4]))"),
    ("take_empty_source", "E.take(E.ones(0), E.tensor([0]))"),
    ("masked_scatter_short_source", "E.zeros(4).masked_scatter_(E.ones(4, dtype=E.bool), E.ones(2))"),
    ("masked_fill_bad_mask", "E.zeros(4).masked_fill_(E.ones(3, dtype=E.bool), 1.0)"),
    (
        "nll_target_high",
        "E.nn.functional.nll_loss(E.zeros(2, 3), E.tensor([0, 3])) if hasattr(E, 'nn') "
        "else E.index_select(E.ones(1), 0, E.tensor([1]))",
    ),
    ("topk_k_too_big", "E.topk(E.ones(3), 4)"),
    ("kthvalue_k_zero", "E.kthvalue(E.ones(3), 0)"),
    ("narrow_out_of_range", "E.ones(3).narrow(0, 2, 5)"),
    ("select_out_of_range", "E.ones(3).select(0, 3)"),
    (
        "searchsorted_bad_sorter",
        "E.searchsorted(E.tensor([1.0, 2.0]), E.tensor([1.5]), sorter=E.tensor([0, 5]))",
    ),
]

VIEWS = [
    ("as_strided_past_end", "E.ones(4).as_strided((3,), (2,), 0)"),
    ("as_strided_offset_past_end", "E.ones(4).as_strided((2,), (1,), 3)"),
    ("as_strided_negative_stride", "E.ones(4).as_strided((2,), (-1,), 1)"),
    ("as_strided_negative_offset", "E.ones(4).as_strided((2,), (1,), -1)"),
    ("as_strided_negative_size", "E.ones(4).as_strided((-2,), (1,), 0)"),
    ("as_strided_huge_stride", "E.ones(4).as_strided((2,), (2**62,), 0)"),
    ("as_strided_overflowing_extent", "E.ones(4).as_strided((2**31, 2**31), (2**33, 2**33), 0)"),
    ("as_strided_rank_mismatch", "E.ones(4).as_strided((2, 2), (1,), 0)"),
    ("view_wrong_numel", "E.ones(4).view(3)"),
    ("view_non_contiguous", "E.ones(2, 3).t().view(6)"),
    ("permute_repeated", "E.ones(2, 3).permute(0, 0)"),
    ("transpose_bad_dim", "E.ones(2, 3).transpose(0, 2)"),
    ("unfold_too_big", "E.ones(3).unfold(0, 4, 1)"),
    ("unfold_zero_step", "E.ones(3).unfold(0, 2, 0)"),
    ("diagonal_same_dims", "E.ones(2, 2).diagonal(0, 0, 0)"),
    ("broadcast_mismatch", "E.ones(2, 3) + E.ones(4)"),
    ("cat_mismatch", "E.cat([E.ones(2, 3), E.ones(2, 4)])"),
    ("cat_empty_list", "E.cat([])"),
    ("stack_mismatch", "E.stack([E.ones(2), E.ones(3)])"),
    ("mm_mismatch", "E.mm(E.ones(2, 3), E.ones(2, 3))"),
    ("bmm_batch_mismatch", "E.bmm(E.ones(2, 2, 2), E.ones(3, 2, 2))"),
    ("matmul_0d", "E.matmul(E.ones(()), E.ones(2))"),
    ("conv_weight_mismatch", "E.conv2d(E.ones(1, 3, 4, 4), E.ones(2, 2, 3, 3))"),
    ("conv_kernel_too_big", "E.conv2d(E.ones(1, 1, 2, 2), E.ones(1, 1, 3, 3))"),
    ("conv_zero_stride", "E.conv2d(E.ones(1, 1, 4, 4), E.ones(1, 1, 3, 3), stride=0)"),
    ("conv_negative_padding", "E.conv2d(E.ones(1, 1, 4, 4), E.ones(1, 1, 3, 3), padding=-1)"),
    ("max_pool_kernel_too_big", "E.max_pool2d(E.ones(1, 1, 2, 2), 5)"),
    ("max_pool_zero_stride", "E.max_pool2d(E.ones(1, 1, 4, 4), 2, 0)"),
    ("avg_pool_padding_too_big", "E.avg_pool1d(E.ones(1, 1, 4), 2, 1, 2)"),
    ("pad_too_negative", "E.constant_pad_nd(E.ones(2, 2), [-3, 0])"),
    ("layer_norm_shape_mismatch", "E.layer_norm(E.ones(2, 3), (4,))"),
    ("group_norm_indivisible", "E.group_norm(E.ones(2, 3), 2)"),
    ("nan_inf_sort_ok_but_bad_dim", "E.sort(E.tensor([float('nan'), float('inf')]), dim=1)"),
    ("cumsum_bad_dim", "E.cumsum(E.ones(2), 2)"),
    ("sum_bad_dim", "E.ones(2).sum(dim=(0, 0))"),
    ("softmax_bad_dim", "E.softmax(E.ones(2, 0), 2)"),
]

# Native entry points called directly, past the Python validation.
NATIVE = [
    ("binary_none", "C.binary(0, None, None, None)"),
    ("binary_ints", "C.binary(0, 1, 2, 3)"),
    ("binary_bad_code", "o = E.ones(2); C.binary(10**6, o, o, o)"),
    ("binary_shape_mismatch", "C.binary(0, E.ones(2), E.ones(3), E.ones(4))"),
    ("binary_out_too_small", "C.binary(0, E.ones(1), E.ones(4), E.ones(4))"),
    ("binary_dtype_mismatch", "C.binary(0, E.ones(2), E.ones(2, dtype=E.int64), E.ones(2))"),
    ("unary_bad_code", "o = E.ones(2); C.unary(-1, o, o, 0.0, 0.0, 0.0)"),
    ("unary_shape_mismatch", "C.unary(0, E.ones(2), E.ones(5), 0.0, 0.0, 0.0)"),
    ("copy_shape_mismatch", "C.copy_(E.ones(2), E.ones(7))"),
    ("copy_wrong_types", "C.copy_('a', 3)"),
    ("fill_wrong_value", "C.fill_(E.ones(2), 'x')"),
    ("gather_native_oob", "C.gather(E.ones(1, 2), E.ones(2, 3), E.tensor([[0, 9]]), 1)"),
    ("gather_native_bad_dim", "C.gather(E.ones(1, 2), E.ones(2, 3), E.tensor([[0, 1]]), 5)"),
    ("gather_native_float_index", "C.gather(E.ones(1, 2), E.ones(2, 3), E.ones(1, 2), 1)"),
    ("scatter_native_oob", "C.scatter(E.zeros(2, 3), 1, E.tensor([[7]]), E.ones(1, 1), 0, True, None)"),
    (
        "scatter_native_bad_reduce",
        "C.scatter(E.zeros(2, 3), 1, E.tensor([[0]]), E.ones(1, 1), 99, True, None)",
    ),
    ("index_gather_bad_offsets", "C.index_gather(E.ones(2), E.ones(3), E.tensor([0, 10**9]))"),
    ("index_gather_negative_offsets", "C.index_gather(E.ones(2), E.ones(3), E.tensor([-5, 0]))"),
    ("index_gather_shape_mismatch", "C.index_gather(E.ones(2), E.ones(3), E.tensor([0, 0, 0, 0, 0]))"),
    ("index_put_bad_offsets", "C.index_put(E.zeros(3), E.ones(2), E.tensor([0, 2**40]), False)"),
    ("index_put_int32_offsets", "C.index_put(E.zeros(3), E.ones(2), E.tensor([0, 1], dtype=E.int32), False)"),
    ("masked_copy_bad_src", "C.masked_copy(E.zeros(4), E.ones(4, dtype=E.bool), E.ones(3))"),
    ("masked_scatter_native_short", "C.masked_scatter(E.zeros(4), E.ones(4, dtype=E.bool), E.ones(1))"),
    ("embedding_native_oob", "C.embedding(E.zeros(1, 2), E.ones(4, 2), E.tensor([99]))"),
    ("embedding_native_shape", "C.embedding(E.zeros(5, 2), E.ones(4, 2), E.tensor([1]))"),
    ("histc_native_bins_mismatch", "C.histc(E.zeros(3), E.ones(4), 10, 0.0, 1.0)"),
    ("histc_native_negative_bins", "C.histc(E.zeros(3), E.ones(4), -3, 0.0, 1.0)"),
    ("bincount_native_negative", "C.bincount(E.zeros(2, dtype=E.int64), E.tensor([-1, 5]), None)"),
    ("bincount_native_too_small", "C.bincount(E.zeros(2, dtype=E.int64), E.tensor([0, 5]), None)"),
    (
        "searchsorted_native_mismatch",
        "C.searchsorted(E.zeros(3, dtype=E.int64), E.ones(2), E.ones(5), False, None)",
    ),
    ("sort_native_shape", "C.sort(E.ones(3), E.zeros(2, dtype=E.int64), E.ones(3), 0, False, True)"),
    ("topk_native_k", "C.topk(E.ones(3), E.zeros(3, dtype=E.int64), E.ones(3), 5, 0, True, True)"),
    ("reduce_native_bad_nred", "C.reduce(0, E.ones(1), E.ones(4), 10**6, 0.0)"),
    ("reduce_native_bad_code", "C.reduce(10**6, E.ones(1), E.ones(4), 4, 0.0)"),
    ("matmul_native_shapes", "C.matmul_(E.ones(2, 2), E.ones(3, 3), E.ones(4, 4))"),
    ("iota_native_wrong", "C.iota(None, 0, 1)"),
    ("pad_native_bad", "C.pad_nd(E.ones(2), E.ones(3), [5, 5], 0, 0.0)"),
    ("storage_subscript", "s = E.ones(2).untyped_storage(); s[10**6]"),
    ("dlpack_garbage", "C.from_dlpack(object())"),
    (
        "tampered_view_past_storage",
        "t = E.ones(4); t._shape = (100,); t._stride = (1,); C.copy_(E.ones(100), t)",
    ),
    ("tampered_negative_offset", "t = E.ones(4); t._offset = -10; C.copy_(E.ones(4), t)"),
    ("tampered_huge_stride", "t = E.ones(4); t._shape = (2,); t._stride = (2**62,); C.copy_(E.ones(2), t)"),
    (
        "tampered_wrapping_stride",
        "t = E.ones(4); t._shape = (3,); t._stride = (2**63 // 2 + 1,); C.copy_(E.ones(3), t)",
    ),
    ("tampered_wrapping_offset", "t = E.ones(4); t._offset = 2**63 - 1; C.copy_(E.ones(4), t)"),
    ("tampered_rank", "t = E.ones(4); t._shape = (2, 2); (t * 2)"),
    ("tampered_rank_mismatch", "t = E.ones(4); t._stride = (1, 1); C.copy_(E.ones(4), t)"),
]

GROUPS = {"sizes": SIZES, "indices": INDICES, "views": VIEWS, "native": NATIVE}

_CHILD = textwrap.dedent("""
    import json, sys
    import ember
    E, C = ember, ember._C
    cases = json.loads(sys.stdin.read())
    for name, code in cases:
        print("START", name, flush=True)
        try:
            exec(code, {"ember": ember, "E": E, "C": C})
        except MemoryError:
            print("RAISED", name, "MemoryError", flush=True)
        except Exception as exc:
            print("RAISED", name, type(exc).__name__, flush=True)
        else:
            print("RETURNED", name, flush=True)
""")


def run_cases(cases):
    """Runs the cases in as few subprocesses as possible: {name: outcome}.

    The outcome is the exception type's name, 'RETURNED' (no exception), or 'CRASH (exit N)'
    for the case the child was running when it died; the cases after it run in a new child.
    """
    env = dict(os.environ, OMP_NUM_THREADS="2")
    outcomes, todo = {}, list(cases)
    while todo:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(todo),
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        last = None
        for line in proc.stdout.splitlines():
            kind, name, *rest = line.split()
            if kind == "START":
                last = name
            else:
                outcomes[name] = rest[0] if rest else kind
        if proc.returncode == 0:
            break
        if last is None or last in outcomes:  # died outside a case (import, interpreter exit)
            pytest.fail(f"child died outside a case (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        outcomes[last] = f"CRASH (exit {proc.returncode}): {proc.stderr[-1500:]}"
        todo = todo[[n for n, _ in todo].index(last) + 1 :]
    return outcomes


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_hostile_inputs_raise_python_exceptions(group):
    outcomes = run_cases(GROUPS[group])
    assert set(outcomes) == {name for name, _ in GROUPS[group]}
    bad = {name: out for name, out in outcomes.items() if out == "RETURNED" or out.startswith("CRASH")}
    assert not bad, f"hostile inputs that did not raise a Python exception: {bad}"


def test_case_names_are_unique():
    names = [name for cases in GROUPS.values() for name, _ in cases]
    assert len(names) == len(set(names))
