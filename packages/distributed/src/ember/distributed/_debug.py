"""``EMBER_DISTRIBUTED_DEBUG=DETAIL`` (PyTorch's ``TORCH_DISTRIBUTED_DEBUG``): catch mismatched
collectives before they run.

MPI matches collectives by order only: ranks that disagree on the operation, the shape or the
dtype corrupt data or hang. In DETAIL mode every collective first all-gathers a fingerprint
(sequence number, operation, shapes, dtypes) over its group and raises ``RuntimeError`` naming
what each rank is running when they differ. It costs one small extra collective per call.
"""

from __future__ import annotations

import hashlib
import os

import ember

_LEVEL = ["OFF"]


def read_debug_level() -> str:
    """Reads the environment (at ``init_process_group``, as PyTorch does)."""
    _LEVEL[0] = os.environ.get("EMBER_DISTRIBUTED_DEBUG", os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF")).upper()
    return _LEVEL[0]


def debug_level() -> str:
    return _LEVEL[0]


def _describe(tensors) -> tuple[list, list]:
    shapes, dtypes = [], []
    for t in tensors:
        if isinstance(t, ember.Tensor):
            shapes.append(list(t.shape))
            dtypes.append(str(t.dtype).split(".")[-1])
    return shapes, dtypes


def check_fingerprint(pg, op_name: str, tensors) -> None:
    """All-gathers this call's fingerprint over ``pg``; raises if any rank runs something else."""
    if _LEVEL[0] != "DETAIL":
        return
    seq = getattr(pg, "_debug_seq", 0)
    pg._debug_seq = seq + 1
    shapes, dtypes = _describe(tensors)
    text = f"CollectiveFingerPrint(SequenceNumber={seq}, OpType={op_name.upper()}, TensorShape={shapes}, " \
           f"TensorDtypes={dtypes})"
    digest = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "little", signed=True)
    engine = pg._engine
    mine = ember.tensor([digest], dtype=ember.int64)
    everyone = ember.empty(pg.size(), dtype=ember.int64)
    engine.allgather(everyone, mine).wait()
    values = everyone.tolist()
    if len(set(values)) == 1:
        return
    # Someone differs: exchange the readable fingerprints (padded to one length) to say who.
    raw = text.encode()
    length = ember.tensor([len(raw)], dtype=ember.int64)
    lengths = ember.empty(pg.size(), dtype=ember.int64)
    engine.allgather(lengths, length).wait()
    width = max(lengths.tolist())
    padded = ember.zeros(width, dtype=ember.uint8)
    padded[: len(raw)] = ember.tensor(list(raw), dtype=ember.uint8)
    texts = ember.empty(width * pg.size(), dtype=ember.uint8)
    engine.allgather(texts, padded).wait()
    data = bytes(texts.tolist())
    descriptions = [data[i * width: i * width + n].decode() for i, n in enumerate(lengths.tolist())]
    me = pg.rank()
    other = next(i for i, v in enumerate(values) if v != values[me])
    raise RuntimeError(
        f"Detected mismatch between collectives on ranks. Rank {pg._ranks[me]} is running collective: "
        f"{descriptions[me]}, but Rank {pg._ranks[other]} is running collective: {descriptions[other]}."
    )
