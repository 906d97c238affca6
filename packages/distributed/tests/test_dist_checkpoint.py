"""Distributed checkpoint: an FSDP model and its Adam state saved at 4 ranks load at 2 ranks into
another layout (FSDP + tensor parallel) with equal values; the same program on PyTorch's DCP
reports the same; the format is JSON + raw bytes (no pickle), written atomically."""

from __future__ import annotations

import json
import tempfile
import traceback
from pathlib import Path

import pytest
from dist_harness import FULL_RUNS, run_ranks


def _save_then_load(lib):
    where = tempfile.mkdtemp(prefix="ember-dcp-")
    saved, _, _ = run_ranks("dcp_program.py", 4, lib=lib, args=("save",), extra_env={"DCP_DIR": where}, limit=150)
    loaded, _, _ = run_ranks("dcp_program.py", 2, lib=lib, args=("load",), extra_env={"DCP_DIR": where}, limit=150)
    return where, saved, loaded


def test_checkpoint_saved_at_4_ranks_loads_at_2_into_another_layout():
    where, saved, loaded = _save_then_load("ember")
    assert saved[0]["files"] == [".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"]
    for got in loaded:
        assert got["model"] is True and got["exp_avg"] is True and got["step"] is True
        assert got["extra"] == {"epoch": 3, "tag": "run-1"}
    meta = json.loads((Path(where) / ".metadata").read_text())
    assert meta["format"] == "ember-dcp"
    assert not any(p.name.endswith(".tmp") or ".tmp" in p.name for p in Path(where).iterdir())


@pytest.mark.slow
@pytest.mark.skipif(not FULL_RUNS, reason="10 PyTorch processes: set EMBER_TEST_DIST_FULL=1")
def test_checkpoint_reports_match_pytorch_dcp():
    _, _, ours = _save_then_load("ember")
    _, _, theirs = _save_then_load("torch")
    assert ours == theirs


def test_async_save_matches_pytorch():
    where = tempfile.mkdtemp(prefix="ember-dcp-async-")
    ours, _, _ = run_ranks("async_dcp_program.py", 2, extra_env={"DCP_DIR": where}, limit=120)
    theirs, _, _ = run_ranks("async_dcp_program.py", 2, lib="torch", extra_env={"DCP_DIR": where + "-torch"},
                             limit=120)
    for rank in range(2):
        assert {k: v for k, v in ours[rank].items() if k != "files"} == {k: v for k, v in theirs[rank].items()
                                                                          if k != "files"}
        assert all(v is True for k, v in ours[rank].items() if k not in ("files", "ddp_keys", "stateful")), ours[rank]
        assert ours[rank]["stateful"] == [True, True, False, 7, True, True, True]
    assert ours[0]["files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]


def test_async_save_without_a_group(tmp_path):
    import ember
    import ember.distributed.checkpoint as dcp

    w = ember.arange(6.0)
    future = dcp.async_save({"w": w, "step": 7}, checkpoint_id=tmp_path, no_dist=True)
    w.add_(1.0)  # staged already: the checkpoint keeps the values at the call
    assert isinstance(future.result(), dcp.Metadata) and future.done()
    target = {"w": ember.zeros(6), "step": 0}
    dcp.load(target, checkpoint_id=tmp_path, no_dist=True)
    assert target["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and target["step"] == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == [".metadata", "__0_0.distcp"]
    bad = dcp.async_save({"w": w}, storage_writer=_FailingWriter(tmp_path / "bad"), no_dist=True)
    with pytest.raises(dcp.CheckpointException):
        bad.result()
    assert not (tmp_path / "bad" / ".metadata").exists()


class _FailingWriter:
    def __init__(self, path):
        from ember.distributed.checkpoint import FileSystemWriter

        self._inner = FileSystemWriter(path)

    def prepare(self):
        self._inner.prepare()

    def write_data(self, name, data):
        raise OSError("disk full")

    def write_metadata(self, metadata):
        self._inner.write_metadata(metadata)


def test_bad_checkpoints_raise_without_running_anything(tmp_path):
    import ember
    import ember.distributed.checkpoint as dcp

    with pytest.raises(dcp.CheckpointException) as caught:  # PyTorch's plan step: "metadata is None"
        dcp.load({"w": ember.zeros(2)}, checkpoint_id=tmp_path, no_dist=True)
    error, trace = caught.value.failures[0]  # (exception, StackSummary) pairs, as PyTorch's
    assert type(error) is AssertionError and str(error).startswith("metadata is None; global metadata read failed")
    assert isinstance(caught.value.__cause__, FileNotFoundError) and isinstance(trace, traceback.StackSummary)
    assert str(caught.value).startswith("CheckpointException ranks:dict_keys([0])\nTraceback (most recent call")
    dcp.save({"w": ember.arange(4.0), "n": 3}, checkpoint_id=tmp_path, no_dist=True)
    target = {"w": ember.zeros(4), "n": 0}
    dcp.load(target, checkpoint_id=tmp_path, no_dist=True)
    assert target["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and target["n"] == 3
    with pytest.raises(dcp.CheckpointException) as caught:  # PyTorch's planner error, in its plan step's exception
        dcp.load({"w": ember.zeros(5)}, checkpoint_id=tmp_path, no_dist=True)
    error, _ = caught.value.failures[0]
    assert repr(error) == "ValueError('Size mismatch between saved ember.Size([4]) and current: " \
        "ember.Size([5]) for w')"
    with pytest.raises(dcp.CheckpointException, match="expected BytesStorageMetadata"):
        dcp.load({"w": 1}, checkpoint_id=tmp_path, no_dist=True)
    target = {"n": ember.zeros(2)}  # a saved value replaces a tensor, as in PyTorch
    dcp.load(target, checkpoint_id=tmp_path, no_dist=True)
    assert target == {"n": 3}
    with pytest.raises(TypeError, match="JSON"):
        dcp.save({"f": object()}, checkpoint_id=tmp_path / "x", no_dist=True)
    meta = json.loads((tmp_path / ".metadata").read_text())
    meta["entries"]['["w"]']["tensor"]["pieces"][0]["file"] = "../../etc/passwd"
    (tmp_path / ".metadata").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="bad data file name"):
        dcp.load({"w": ember.zeros(4)}, checkpoint_id=tmp_path, no_dist=True)
    (tmp_path / ".metadata").write_bytes(b"\x80\x04cos\nsystem\n.")  # a pickle is refused, never run
    with pytest.raises(ValueError):
        dcp.load({"w": ember.zeros(4)}, checkpoint_id=tmp_path, no_dist=True)


@pytest.mark.parametrize("lib", ["ember", "torch"])
def test_partial_load_through_the_default_load_planner(tmp_path, lib):
    # The same calls on PyTorch's DCP (the oracle) and on ember's: a key the checkpoint lacks
    # raises, unless the load planner allows a partial load (then it is left untouched).
    if lib == "torch":
        torch = pytest.importorskip("torch")
        import torch.distributed.checkpoint as dcp
    else:
        import ember as torch
        import ember.distributed.checkpoint as dcp
    dcp.save({"w": torch.arange(4.0)}, checkpoint_id=tmp_path, no_dist=True,
             planner=dcp.DefaultSavePlanner(dedup_save_to_lowest_rank=True))
    with pytest.raises(dcp.CheckpointException):
        dcp.load({"w": torch.zeros(4), "extra": torch.zeros(2)}, checkpoint_id=tmp_path, no_dist=True)
    target = {"w": torch.zeros(4), "extra": torch.full((2,), 7.0)}
    dcp.load(target, checkpoint_id=tmp_path, no_dist=True, planner=dcp.DefaultLoadPlanner(allow_partial_load=True))
    assert target["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and target["extra"].tolist() == [7.0, 7.0]
