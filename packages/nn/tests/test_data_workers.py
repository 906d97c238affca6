"""DataLoader with worker processes: same batches as one process, seeding, errors, crashes, shutdown."""

from __future__ import annotations

import gc
import multiprocessing
import os
import random
import signal
import time

import pytest

import ember
from ember.utils import data as ed

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    if multiprocessing.active_children():
        gc.collect()  # an iterator kept alive by a reference cycle (e.g. a caught traceback)
    assert multiprocessing.active_children() == []


class DataError(Exception):
    pass


class Samples(ed.Dataset):
    """i -> {"x": row i, "i": i, "name": str}; optional failure modes at index `bad`."""

    def __init__(self, n=10, bad=None, mode=None):
        self.x = ember.arange(n * 2, dtype=ember.float32).reshape(n, 2)
        self.n, self.bad, self.mode = n, bad, mode

    def __getitem__(self, i):
        if i == self.bad and ed.get_worker_info() is not None:
            if self.mode == "raise":
                raise DataError(f"bad sample {i}")
            if self.mode == "keyerror":
                raise KeyError(i)
            if self.mode == "exit":
                os._exit(3)
            if self.mode == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.mode == "sleep":
                time.sleep(3)
            if self.mode == "unpicklable":
                return lambda: i
        return {"x": self.x[i], "i": i, "name": f"s{i}"}

    def __len__(self):
        return self.n


def _flatten(batches):
    return [(b["x"].tolist(), b["i"].tolist(), b["name"]) for b in batches]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 3},
        {"batch_size": 4, "drop_last": True, "prefetch_factor": 1},
        {"batch_size": 3, "shuffle": True},
        {"batch_size": None},
    ],
)
def test_workers_match_single_process(kwargs):
    if kwargs.get("batch_size", 1) is None:
        collect = lambda loader: [(s["x"].tolist(), s["i"], s["name"]) for s in loader]  # noqa: E731
    else:
        collect = _flatten
    extra = {"prefetch_factor": kwargs.pop("prefetch_factor")} if "prefetch_factor" in kwargs else {}

    def run(num_workers):
        gen = ember.Generator().manual_seed(7)
        return collect(
            ed.DataLoader(
                Samples(), num_workers=num_workers, generator=gen, **kwargs, **(extra if num_workers else {})
            )
        )

    single = run(0)
    assert run(2) == single
    if kwargs.get("shuffle"):
        assert sorted(i for b in single for i in b[1]) == list(range(10))


def test_out_of_order_delivery_keeps_every_batch():
    loader = ed.DataLoader(Samples(), batch_size=2, num_workers=2, in_order=False)
    assert sorted(i for b in _flatten(loader) for i in b[1]) == list(range(10))


@pytest.mark.parametrize(
    "mode, exc, match",
    [
        ("raise", DataError, "bad sample 5"),
        ("keyerror", KeyError, "KeyError: 5"),
        ("unpicklable", Exception, "pickl"),
    ],
)
def test_worker_exception_is_reraised(mode, exc, match):
    # A collate_fn that keeps samples as they are, so the lambda reaches the pickler.
    loader = ed.DataLoader(Samples(bad=5, mode=mode), batch_size=2, num_workers=2, collate_fn=list)
    it = iter(loader)
    assert [s["i"] for s in next(it)] == [0, 1]
    next(it)
    with pytest.raises(exc, match=match) as info:
        next(it)
    text = str(info.value)
    assert "in DataLoader worker process 0" in text and "Traceback" in text
    # The loader goes on after the failed batch, as PyTorch's does.
    assert [s["i"] for s in next(it)] == [6, 7]
    del it, info


def test_worker_init_fn_error_is_reraised():
    def init(worker_id):
        raise DataError(f"init {worker_id}")

    with pytest.raises(DataError, match="init 0"):
        list(ed.DataLoader(Samples(), num_workers=1, worker_init_fn=init))


@pytest.mark.parametrize("mode, persistent", [("exit", False), ("sigkill", True)])
def test_dead_worker_is_an_error_not_a_hang(mode, persistent):
    # prefetch_factor=1: worker 0 gets batch [4, 5] only once [0, 1] has been received (a
    # killed worker loses the results it had not yet flushed to the pipe).
    loader = ed.DataLoader(
        Samples(bad=4, mode=mode),
        batch_size=2,
        num_workers=2,
        prefetch_factor=1,
        persistent_workers=persistent,
    )
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(loader)
    if persistent:
        # The broken iterator is replaced by one with fresh workers.
        it = iter(loader)
        assert next(it)["i"].tolist() == [0, 1]
        it._shutdown_workers()


def test_timeout():
    loader = ed.DataLoader(Samples(bad=0, mode="sleep"), batch_size=2, num_workers=1, timeout=0.3)
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.3 seconds"):
        next(iter(loader))


class WorkerReport(ed.Dataset):
    """Each sample says which process made it and what its random streams give."""

    def __getitem__(self, i):
        info = ed.get_worker_info()
        return {
            "pid": os.getpid(),
            "id": info.id,
            "num_workers": info.num_workers,
            "seed": info.seed,
            "py": random.random(),
            "ember": ember.rand(1).item(),
            "init": os.environ.get("DATA_TEST_INIT", ""),
        }

    def __len__(self):
        return 4


def _init(worker_id):
    os.environ["DATA_TEST_INIT"] = f"w{worker_id}"


def test_persistent_workers_seeds_and_init_fn():
    loader = ed.DataLoader(
        WorkerReport(),
        batch_size=None,
        num_workers=2,
        persistent_workers=True,
        worker_init_fn=_init,
        generator=ember.Generator().manual_seed(0),
    )
    epochs = [list(loader)]
    next(iter(loader))  # an epoch left unfinished: its results in flight are dropped at the next one
    epochs += [list(loader) for _ in range(2)]
    assert [len(e) for e in epochs] == [4, 4, 4]
    assert [s["id"] for s in epochs[2]] == [0, 1, 0, 1]
    pids = [sorted({s["pid"] for s in e}) for e in epochs]
    assert pids[0] == pids[1] == pids[2] and len(pids[0]) == 2 and os.getpid() not in pids[0]
    first = epochs[0]
    assert [s["id"] for s in first] == [0, 1, 0, 1]  # round robin, delivered in order
    assert {s["num_workers"] for s in first} == {2}
    with pytest.raises(AttributeError):  # WorkerInfo is frozen, as PyTorch's
        ed.WorkerInfo(0, 1, 0, None).id = 1
    assert [s["init"] for s in first] == ["w0", "w1", "w0", "w1"]
    base = first[0]["seed"]
    assert first[1]["seed"] == base + 1
    # Per-worker seeding: workers draw different streams, and a worker's stream is the one
    # its seed gives.
    assert first[0]["py"] != first[1]["py"]
    assert first[0]["py"] == random.Random(base).random()
    assert first[0]["ember"] == ember.rand(1, generator=ember.Generator().manual_seed(base)).item()
    # Same generator seed, new loader: same worker seeds.
    again = ed.DataLoader(
        WorkerReport(), batch_size=None, num_workers=2, generator=ember.Generator().manual_seed(0)
    )
    assert [s["seed"] for s in again] == [s["seed"] for s in first]
    loader._iterator._shutdown_workers()
    del loader


class Shards(ed.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = ed.get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class TShards(torch.utils.data.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        return iter(range(info.id, self.n, info.num_workers))


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("num_workers, batch_size", [(2, 3), (3, 2), (2, None)])
def test_iterable_dataset_sharding_matches_torch(num_workers, batch_size):
    plain = lambda t: t.tolist() if hasattr(t, "tolist") else t  # noqa: E731
    expected = [
        plain(t)
        for t in torch.utils.data.DataLoader(TShards(11), batch_size=batch_size, num_workers=num_workers)
    ]
    out = [plain(t) for t in ed.DataLoader(Shards(11), batch_size=batch_size, num_workers=num_workers)]
    assert out == expected
    assert sorted(sum(([x] if isinstance(x, int) else x for x in out), [])) == list(range(11))


def test_iterable_dataset_persistent_workers_two_epochs():
    loader = ed.DataLoader(Shards(7), batch_size=2, num_workers=2, persistent_workers=True)
    first = [t.tolist() for t in loader]
    assert first == [[0, 2], [1, 3], [4, 6], [5]]
    assert [t.tolist() for t in loader] == first
    loader._iterator._shutdown_workers()


def test_workers_stop_when_iterator_is_dropped():
    it = iter(ed.DataLoader(Samples(), batch_size=1, num_workers=2))
    next(it)
    assert len(multiprocessing.active_children()) == 2
    del it  # the fixture checks that both workers are gone


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_interpreter_exit_with_live_workers():
    # Persistent workers and an unfinished iterator still alive at exit: the program ends
    # at once and takes its workers with it.
    import subprocess
    import sys

    code = (
        # a hang (seen once in CI, 2026-12-05; not located) prints where the main process waits
        "import faulthandler, sys\nfaulthandler.dump_traceback_later(45, exit=True, file=sys.stderr)\n"
        "import ember\nfrom ember.utils import data as ed\n"
        "ds = ed.TensorDataset(ember.arange(100))\n"
        "loader = ed.DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True)\n"
        "it = iter(loader)\nnext(it)\n"
        "print(*[w.pid for w in it._workers])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2 and not any(_running(p) for p in pids)
