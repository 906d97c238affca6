"""``async_save``: stage the checkpoint now, write it in the background.

Staging runs in the caller (every rank, collectively, as ``save``): each rank serializes the
pieces it owns into bytes (a copy on the CPU: training may change the tensors right after the
call returns) and the ranks exchange their piece tables, so rank 0 already holds the whole
metadata. What is left is file I/O, done by one background thread per call: each rank writes its
data file (atomically: temporary name, fsync, rename) and says so in the process group's store;
rank 0 waits for every rank, then writes ``.metadata`` (last, so a checkpoint is either complete
or ignored by ``load``) and tells the others. The background half never touches MPI, so it
cannot interleave with the training's own collectives; the store is safe to use from any thread.

The returned ``concurrent.futures.Future`` resolves to the ``Metadata`` once the checkpoint is
complete on every rank, or raises ``CheckpointException`` naming the ranks whose writes failed.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future
from datetime import timedelta

from .. import _world
from ._filesystem import FileSystemWriter
from ._save_load import CheckpointException, _checkpoint_path, _distributed, stage

_CALLS = itertools.count()  # the same sequence on every rank: async_save is collective
_TIMEOUT = timedelta(minutes=30)


def async_save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None,
               async_checkpointer_type=None, async_stager=None, no_dist: bool = False) -> Future:
    """``torch.distributed.checkpoint.async_save``: returns once the state is staged; the
    checkpoint is written by a background thread (see the module doc)."""
    writer = storage_writer or FileSystemWriter(_checkpoint_path(checkpoint_id))
    dist = _distributed(no_dist)
    staged = stage(state_dict, writer, process_group, dist)
    call = next(_CALLS)
    store, ranks = None, 1
    if dist:
        pg = _world.resolve(process_group)
        store, ranks = pg.store, pg.size()
        staged.rank = pg.rank()
    future: Future = Future()
    future.set_running_or_notify_cancel()
    thread = threading.Thread(target=_write, args=(staged, store, ranks, f"ember_async_save/{call}", future),
                              name=f"ember-async-save-{call}", daemon=True)
    thread.start()
    return future


def _write(staged, store, ranks: int, prefix: str, future: Future) -> None:
    try:
        error = None
        try:
            staged.writer.write_data(staged.file, staged.data)
        except Exception as err:  # noqa: BLE001 - reported to every rank through the store
            error = err
        staged.data = b""
        if store is None:
            if error is not None:
                raise CheckpointException("async_save", {0: error})
            staged.writer.write_metadata(staged.metadata)
            future.set_result(staged.metadata)
            return
        store.set(f"{prefix}/written/{staged.rank}", "ok" if error is None else f"{type(error).__name__}: {error}")
        if staged.rank == 0:
            keys = [f"{prefix}/written/{r}" for r in range(ranks)]
            store.wait(keys, _TIMEOUT)
            failures = {r: RuntimeError(v.decode()) for r, v in enumerate(store.multi_get(keys)) if v != b"ok"}
            if not failures:
                try:
                    staged.writer.write_metadata(staged.metadata)
                except Exception as err:  # noqa: BLE001
                    failures = {0: err}
            outcome = "ok" if not failures else "; ".join(f"rank {r}: {e}" for r, e in failures.items())
            store.set(f"{prefix}/done", outcome)
            if failures:
                raise CheckpointException("async_save", failures)
        else:
            store.wait([f"{prefix}/done"], _TIMEOUT)
            outcome = store.get(f"{prefix}/done").decode()
            if outcome != "ok":
                raise CheckpointException("async_save", {0: RuntimeError(outcome)})
        future.set_result(staged.metadata)
    except BaseException as err:  # noqa: BLE001 - the future carries it to the caller
        future.set_exception(err)
