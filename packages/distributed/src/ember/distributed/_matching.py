"""Mismatched collectives caught by the MPI engine itself, without debug mode.

MPI matches a communicator's collectives by order alone and MPICH checks nothing about them:
ranks that run ``all_reduce`` on 4 and on 8 elements, on float32 and on float64, with SUM and
with MAX, or ``all_reduce`` against ``broadcast``, got garbage or hung until the timeout. (gloo
checks the byte count of every message: PyTorch's process with the smaller buffer aborts with
"Received data size doesn't match expected size", its peer raises ``RuntimeError``.)

So before its data every collective exchanges a 40-byte signature - what it is, its dtype,
reduction, root and element count - as one ``MPI_Iallreduce`` with MAX of ``[s, -s, n, -n, -y]``:
every rank learns the largest and the smallest signature and count of the group, which differ
exactly when some rank runs something else. The exchange has the same form for every
collective, so it always matches, whatever the ranks run. It is a barrier of its own: barriers
are just the exchange. Measured at 2 ranks: +2-3 us on a 4 KB all_reduce (MPICH alone ~4 us).

Collectives start their signature exchange and their data operation at once, back to back, and
check the signatures before they wait for the data (the ``Work``; ``MPIEngine._run_now`` for a
synchronous ``all_reduce`` or barrier, except a small message of ranks that each have a core,
which starts its data once the signatures came back - cheaper there): the exchange costs no
synchronizing round of its own. (Waiting for the signatures first did: on 4 ranks sharing 2
cores each round waits for the ranks' turns on the cores.) A mismatched data operation may
then be under way when the signatures disagree: MPI bounds every receive by its buffer, so it
cannot write past the tensors, and the check raises before anything is returned.

On a mismatch every rank raises ``DistBackendError`` (a ``RuntimeError``) describing both
calls. MPI cannot cancel mismatched data operations, which may never complete, so the
communicator they run on is retired. Where every rank's call was synchronous (``y`` = 1: a
synchronous ``all_reduce`` of a plain tensor, a barrier, or any collective called with
``async_op=False``: ``issue``), every rank learns of the mismatch
at the same point of its program, and the group goes on on a new communicator made from the
world's control communicator (``MPIEngine._recover``), as PyTorch's group does after ``TORCH_DISTRIBUTED_DEBUG=DETAIL``
reported a mismatch (gloo's own size check aborts a process instead). Elsewhere a rank may
already have started later collectives on the old communicator: the group is marked broken.

``all_to_all`` sends different amounts to each rank by design: only its kind and dtype count.
``EMBER_DISTRIBUTED_DEBUG=DETAIL`` still gives PyTorch's per-rank fingerprint message first.
"""

from __future__ import annotations

import array
import threading
import zlib

import ember

from ._backend import RedOpType

KINDS = ("all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter",
         "all_to_all", "barrier")
_KIND_CODE = {name: i + 1 for i, name in enumerate(KINDS)}
_DTYPE_CODE: dict = {}
_CODE_DTYPE: dict = {}
_ALL_CODED: list = []  # every dtype of ember coded (for messages)


def _dtype_code(dtype) -> int:
    code = _DTYPE_CODE.get(dtype)
    if code is None:
        code = zlib.crc32(str(dtype).encode()) & 0xFFFF  # the same in every process
        _DTYPE_CODE[dtype] = code
        _CODE_DTYPE[code] = dtype
    return code


def signature(kind: str, dtype=None, op=None, root: int = -1) -> int:
    """The signature of a collective (below 2**62): kind, dtype, reduction, root."""
    code = _dtype_code(dtype) if dtype is not None else 0
    opcode = int(op) + 1 if op is not None else 0
    return _KIND_CODE[kind] | code << 8 | opcode << 24 | (root + 1) << 32


CALL = threading.local()  # ``synchronous``: the collective being started is waited on at once


def issue(async_op: bool, method, *args):
    """``method(*args)`` (an engine's collective), telling the engine whether its caller waits for
    it at once in program order (``async_op=False``): such calls, mismatched on every rank, leave
    the group usable (``MPIEngine._recover``)."""
    if async_op:
        return method(*args)
    CALL.synchronous = True
    try:
        return method(*args)
    finally:
        CALL.synchronous = False


def buffers(sig: int, count: int, synchronous: bool = False) -> tuple[array.array, array.array]:
    """The send and receive buffers of one exchange. ``synchronous``: the caller waits for this
    collective at once, in program order (``MPIEngine._run_now``); the fifth entry, -1 then,
    comes back -1 only when every rank's call was."""
    return array.array("q", (sig, -sig, count, -count, -int(synchronous))), array.array("q", bytes(40))


def fill(send: array.array, sig: int, count: int, synchronous: bool = False) -> None:
    send[0], send[1], send[2], send[3], send[4] = sig, -sig, count, -count, -int(synchronous)


def all_synchronous(recv: array.array) -> bool:
    """After the exchange: whether every rank ran its call synchronously."""
    return recv[4] == -1


def _describe(sig: int, count: int) -> str:
    kind = KINDS[(sig & 0xFF) - 1] if 0 < (sig & 0xFF) <= len(KINDS) else "an unknown collective"
    if kind == "barrier":
        return "barrier"
    if not _ALL_CODED:
        for value in vars(ember).values():
            if isinstance(value, ember.dtype):
                _dtype_code(value)
        _ALL_CODED.append(True)
    dtype = _CODE_DTYPE.get(sig >> 8 & 0xFFFF)
    dtype_name = str(dtype).split(".")[-1] if dtype is not None else "another dtype"
    opcode, root = sig >> 24 & 0xFF, (sig >> 32) - 1
    text = kind
    if opcode:
        try:
            text += f"({RedOpType(opcode - 1).name})"
        except ValueError:
            pass
    text += f" of {count} {dtype_name} elements" if kind != "all_to_all" else f" of {dtype_name}"
    if root >= 0:
        text += f" with root {root}"
    return text


def problem(recv: array.array, sig: int, count: int, what: str, rank: int, usable: bool = False) -> str | None:
    """None when every rank ran this collective; else the error message (``usable``: the group
    goes on working, see ``MPIEngine._recover``)."""
    top_sig, low_sig, top_count, low_count = recv[0], -recv[1], recv[2], -recv[3]
    if top_sig == low_sig and top_count == low_count:
        return None
    other_sig = low_sig if sig == top_sig else top_sig
    other_count = low_count if count == top_count else top_count
    return (f"{what}: mismatched collectives across the ranks of the group: rank {rank} runs "
            f"{_describe(sig, count)}, another rank {_describe(other_sig, other_count)}. Is there a distributed "
            "collective mismatch in your code? (EMBER_DISTRIBUTED_DEBUG=DETAIL names each rank's call); "
            + ("every rank raised this error and the process group is still usable" if usable
               else "the process group is no longer usable"))
