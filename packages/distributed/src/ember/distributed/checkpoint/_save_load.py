"""``save`` and ``load``: every rank writes the pieces it owns; every rank reads the pieces that
overlap the region its own tensors cover, so a checkpoint loads at any world size or layout."""

from __future__ import annotations

import os
import traceback

import ember

from .. import _collectives as C
from .. import _object_collectives as O
from .. import _world
from ..tensor._dtensor import DTensor
from ..tensor._layout import local_bounds
from ..tensor._placements import Partial, Replicate
from ._filesystem import FileSystemReader, FileSystemWriter
from ._format import (
    Metadata,
    Piece,
    TensorEntry,
    check_value,
    dtype_name,
    flatten,
    from_bytes,
    path_key,
    set_path,
    to_bytes,
)
from .stateful import from_state_dict, to_state_dict


class CheckpointException(BaseException):
    """A checkpoint step failed (PyTorch's type): ``failures`` maps each failed rank to its
    (exception, ``traceback.StackSummary``) pair, as PyTorch's; a bare exception given is paired
    with its own traceback."""

    def __init__(self, msg: str, failures: dict):
        failures = {rank: failure if isinstance(failure, tuple) else
                    (failure, traceback.extract_tb(failure.__traceback__))
                    for rank, failure in failures.items()}
        super().__init__(msg, failures)
        self._failures = failures

    @property
    def failures(self) -> dict:
        return self._failures

    def __str__(self):
        text = f"CheckpointException ranks:{self._failures.keys()}\n"
        for rank, (exc, trace) in self._failures.items():
            text += f"Traceback (most recent call last): (RANK {rank})\n"
            if trace is not None:
                text += "".join(traceback.format_list(trace))
            text += "".join(traceback.format_exception_only(type(exc), exc))
        return text


def _distributed(no_dist: bool) -> bool:
    return not no_dist and _world.is_initialized()


def _owned_piece(t):
    """(local tensor, global offsets) this rank writes for ``t``, or None when another rank does."""
    if isinstance(t, DTensor):
        mesh = t.device_mesh
        if any(isinstance(p, Partial) for p in t.placements):
            t = t.redistribute(mesh, [Replicate() if isinstance(p, Partial) else p for p in t.placements])
        coordinate = mesh.get_coordinate()
        # One copy of replicated data: the rank at coordinate 0 of every Replicate mesh dim.
        if any(isinstance(p, Replicate) and coordinate[d] != 0 for d, p in enumerate(t.placements)):
            return None
        bounds = local_bounds(t.shape, mesh, t.placements)
        return t._local, [a for a, _ in bounds]
    if _world.is_initialized() and _world.get_rank() != 0:
        return None
    return t, [0] * t.dim()


class Staged:
    """What one rank writes for a checkpoint, already copied out of the live tensors: its data
    file (name and bytes) and, on rank 0, the metadata that every rank's pieces make up."""

    def __init__(self, writer, rank: int, file: str, data: bytes, metadata: Metadata):
        self.writer, self.rank, self.file, self.data, self.metadata = writer, rank, file, data, metadata


def stage(state_dict, writer, process_group, dist: bool) -> Staged:
    """The collective half of a save: prepares the directory, serializes this rank's pieces (a
    copy: the tensors may change afterwards) and exchanges every rank's piece table."""
    state_dict = to_state_dict(state_dict)
    rank = _world.get_rank() if dist else 0
    if rank == 0:
        writer.prepare()
    if dist:
        C.barrier(group=process_group)
    if rank != 0:
        writer.prepare()
    file = f"__{rank}_0.distcp"
    chunks, entries, offset = [], {}, 0
    for path, leaf in flatten(state_dict):
        key = path_key(path)
        if isinstance(leaf, ember.Tensor):
            entries[key] = {"shape": list(leaf.shape), "dtype": dtype_name(leaf.dtype), "pieces": []}
            owned = _owned_piece(leaf)
            if owned is not None:
                local, offsets = owned
                data = to_bytes(local)
                entries[key]["pieces"].append(vars(Piece(offsets, list(local.shape), file, offset, len(data))))
                chunks.append(data)
                offset += len(data)
        else:
            entries[key] = {"value": check_value(key, leaf)}
    gathered = [None] * _world.get_world_size(process_group) if dist else [entries]
    if dist:
        O.all_gather_object(gathered, entries, group=process_group)
    metadata = Metadata()
    for key, entry in gathered[0].items():
        if "value" in entry:
            metadata.state_dict_metadata[key] = {"value": entry["value"]}
        else:
            pieces = [Piece(**p) for part in gathered for p in part[key]["pieces"]]
            metadata.state_dict_metadata[key] = TensorEntry(entry["shape"], entry["dtype"], pieces)
    return Staged(writer, rank, file, b"".join(chunks), metadata)


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None,
         no_dist: bool = False) -> Metadata:
    """Writes ``state_dict`` (tensors, DTensors, JSON values, nested) as one checkpoint."""
    writer = storage_writer or FileSystemWriter(_checkpoint_path(checkpoint_id))
    dist = _distributed(no_dist)
    staged = stage(state_dict, writer, process_group, dist)
    writer.write_data(staged.file, staged.data)
    if dist:
        C.barrier(group=process_group)
    if staged.rank == 0:
        writer.write_metadata(staged.metadata)  # last: a checkpoint without it is incomplete, never half-read
    if dist:
        C.barrier(group=process_group)
    return staged.metadata


def _checkpoint_path(checkpoint_id):
    if checkpoint_id is None:
        raise ValueError("save/load need a checkpoint_id (a directory) or a storage_writer/storage_reader")
    return os.fspath(checkpoint_id)


def _fill(target_local, bounds, entry: TensorEntry, reader) -> None:
    """Copies into ``target_local`` (the region ``bounds`` of the global tensor) every saved piece
    that overlaps it."""
    covered = 0
    for piece in entry.pieces:
        overlap = []
        for (lo, hi), start, size in zip(bounds, piece.offsets, piece.sizes):
            a, b = max(lo, start), min(hi, start + size)
            if a >= b:
                break
            overlap.append((a, b))
        else:
            if len(overlap) != len(bounds):
                continue
            data = from_bytes(reader.read_bytes(piece.file, piece.start, piece.nbytes), entry.dtype, piece.sizes)
            src, dst = data, target_local
            for dim, ((a, b), start, (lo, _)) in enumerate(zip(overlap, piece.offsets, bounds)):
                src = src.narrow(dim, a - start, b - a)
                dst = dst.narrow(dim, a - lo, b - a)
            dst.copy_(src)
            n = 1
            for a, b in overlap:
                n *= b - a
            covered += n
    wanted = 1
    for lo, hi in bounds:
        wanted *= hi - lo
    if covered < wanted:
        raise RuntimeError(f"checkpoint: the saved pieces cover {covered} of the {wanted} elements needed")


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None, process_group=None,
         no_dist: bool = False) -> None:
    """Fills ``state_dict`` in place from a checkpoint: tensors (plain or DTensor, any layout) are
    copied into, other values replaced. Keys missing from the checkpoint raise."""
    reader = storage_reader or FileSystemReader(_checkpoint_path(checkpoint_id))
    try:
        metadata = reader.read_metadata()
    except FileNotFoundError as missing:
        # PyTorch's plan step fails on every rank with "metadata is None; ..." (an AssertionError)
        rank = _world.get_rank() if _distributed(no_dist) else 0
        error = AssertionError(f"metadata is None; global metadata read failed: {missing}")
        raise CheckpointException("plan", {rank: error}) from missing
    original, state_dict = state_dict, to_state_dict(state_dict)
    _load_into(state_dict, metadata, reader, no_dist, getattr(planner, "allow_partial_load", False))
    from_state_dict(original, state_dict)
    if _distributed(no_dist):
        C.barrier(group=process_group)


def _load_into(state_dict, metadata, reader, no_dist: bool, partial: bool = False) -> None:
    for path, leaf in flatten(state_dict):
        key = path_key(path)
        entry = metadata.state_dict_metadata.get(key)
        if entry is None and partial:
            continue
        rank = _world.get_rank() if _distributed(no_dist) else 0
        fqn = ".".join(str(p) for p in path)
        if entry is None:
            error = RuntimeError(f"Missing key in checkpoint state_dict: {fqn}.")
            raise CheckpointException("load", {rank: error})
        if isinstance(leaf, ember.Tensor) and isinstance(entry, TensorEntry):
            if list(leaf.shape) != list(entry.shape):
                # PyTorch's planner's error, raised as its plan step's CheckpointException
                error = ValueError(f"Size mismatch between saved {ember.Size(entry.shape)} and current: "
                                   f"{leaf.shape} for {fqn}")
                raise CheckpointException("plan", {rank: error})
            with ember.no_grad():
                if isinstance(leaf, DTensor):
                    bounds = local_bounds(leaf.shape, leaf.device_mesh, leaf.placements)
                    _fill(leaf._local, bounds, entry, reader)
                else:
                    _fill(leaf.detach(), [(0, n) for n in leaf.shape], entry, reader)
        elif isinstance(entry, TensorEntry):
            error = ValueError(f"Invalid checkpoint metadata for {fqn}, expected BytesStorageMetadata but found "
                               "<class 'torch.distributed.checkpoint.metadata.TensorStorageMetadata'>")
            raise CheckpointException("plan", {rank: error})
        else:
            # a saved value replaces whatever the state_dict holds there, a tensor too (as PyTorch's)
            value = entry.get("value") if isinstance(entry, dict) else None
            set_path(state_dict, path, tuple(value) if isinstance(leaf, tuple) else value)
