"""Every collective, checked against PyTorch's gloo backend running the same program.

``programs/collectives_program.py`` runs once on ember and once on PyTorch (gloo) at 2 ranks and
once each at 3 ranks (and at 4 with ``EMBER_TEST_DIST_FULL=1``); each rank's results (values,
dtypes and the exception types of bad calls) must be equal. ``world_one_program.py`` does the
same in a world of one rank. Where gloo cannot serve as the oracle the expected values are computed here.
"""

from __future__ import annotations

import pytest
from dist_harness import FULL_RUNS, run_ranks

# gloo has no int16 reductions (ember's MPI engine has); gloo's MAX of a non-contiguous int64
# tensor comes back wrong (measured with torch 2.13): both are checked against values below.
NOT_FROM_GLOO = ("all_reduce/int16/", "all_reduce/noncontig_int_max")


_FOUR = pytest.param(4, marks=[pytest.mark.slow,
                               pytest.mark.skipif(not FULL_RUNS, reason="8 processes: set EMBER_TEST_DIST_FULL=1")])


@pytest.fixture(scope="module", params=[2, 3, _FOUR], ids=["2ranks", "3ranks", "4ranks"])
def both(request):
    world = request.param
    ember_results, _, _ = run_ranks("collectives_program.py", world, "ember", limit=120)
    torch_results, _, _ = run_ranks("collectives_program.py", world, "torch", limit=120)
    return world, ember_results, torch_results


def test_every_result_matches_gloo(both):
    world, ember_results, torch_results = both
    mismatches = []
    for rank in range(world):
        assert set(ember_results[rank]) == set(torch_results[rank])
        for key, expected in torch_results[rank].items():
            if key.startswith(NOT_FROM_GLOO):
                continue
            if ember_results[rank][key] != expected:
                mismatches.append(f"rank {rank} {key}: ember {ember_results[rank][key]} gloo {expected}")
    assert not mismatches, "\n".join(mismatches[:20])


def test_int16_and_noncontiguous_max_against_numpy(both):
    np = pytest.importorskip("numpy")
    world, ember_results, _ = both
    per_rank = [np.arange(6) + 3 * r for r in range(world)]
    expected = {
        "SUM": sum(per_rank), "MIN": np.minimum.reduce(per_rank), "MAX": np.maximum.reduce(per_rank),
        "PRODUCT": np.prod(per_rank, axis=0), "BAND": np.bitwise_and.reduce(per_rank),
        "BOR": np.bitwise_or.reduce(per_rank), "BXOR": np.bitwise_xor.reduce(per_rank),
    }
    noncontig = np.maximum.reduce([(np.arange(12) * (r + 1)).reshape(4, 3)[:, ::2] for r in range(world)])
    for rank in range(world):
        got = ember_results[rank]
        for op, value in expected.items():
            assert got[f"all_reduce/int16/{op}"] == {"dtype": "int16", "value": value.astype(np.int16).tolist()}
        assert got["all_reduce/int16/AVG"] == "RuntimeError"
        assert got["all_reduce/noncontig_int_max"] == {"dtype": "int64", "value": noncontig.tolist()}


def test_deprecated_reduce_op_warns_like_pytorch():
    # The dist_tuto tutorial spells ``dist.reduce_op.SUM``: same values as ReduceOp, a FutureWarning
    # per attribute read, and the same members as PyTorch's.
    import warnings

    import torch.distributed as tdist

    import ember.distributed as edist

    for dist in (edist, tdist):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert dist.reduce_op.SUM == dist.ReduceOp.SUM and dist.reduce_op.MIN == dist.ReduceOp.MIN
            members = sorted(dist.reduce_op.__members__)
        assert [w.category for w in caught] == [FutureWarning] * 3
        assert caught[0].filename == __file__
    assert sorted(edist.reduce_op.__members__) == sorted(tdist.reduce_op.__members__) == members


def test_reduce_op_prints_as_pytorch():
    # Programs log the op ("reducing with RedOpType.SUM"); an IntEnum printed its number.
    import torch.distributed as tdist

    import ember.distributed as edist

    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        ours, theirs = getattr(edist.ReduceOp, name), getattr(tdist.ReduceOp, name)
        assert (str(ours), repr(ours), f"{ours}", int(ours)) == (str(theirs), repr(theirs), f"{theirs}", int(theirs))


def test_world_of_one_matches_gloo():
    # programs/world_one_program.py: every collective and the errors of bad calls (wrong list
    # lengths, a root outside the world, sending to oneself) with world_size=1
    ours, _, _ = run_ranks("world_one_program.py", 1, "ember", limit=90)
    theirs, _, _ = run_ranks("world_one_program.py", 1, "torch", limit=90)
    assert set(ours[0]) == set(theirs[0])
    mismatches = [f"{k}: ember {ours[0][k]} gloo {v}" for k, v in theirs[0].items() if ours[0][k] != v]
    assert not mismatches, "\n".join(mismatches)
