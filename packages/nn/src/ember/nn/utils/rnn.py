"""Variable-length sequence batches for the recurrent layers: ``PackedSequence`` and the
pack / pad helpers, as in ``torch.nn.utils.rnn``.

A packed batch stores the sequences time step by time step: step ``t`` holds the
``batch_sizes[t]`` sequences still running, longest first. Packing and padding are each one
``index_select`` (a gather whose backward is one ``index_add``), with the gather index
built by tensor ops from the lengths.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import ember
from ember import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


def _bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(PackedSequence_):
    """The data and time-step batch sizes of a packed batch of sequences.

    Made by ``pack_padded_sequence`` / ``pack_sequence``; ``sorted_indices`` maps the packed
    (longest-first) order back to the caller's batch order, ``unsorted_indices`` is its inverse.
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            # PackedSequence((data, batch_sizes), sorted_indices=...)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never be created "
                "manually. They should be instantiated by functions like pack_sequence and "
                "pack_padded_sequences in nn.utils.rnn. "
                "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """Converts ``data`` like ``Tensor.to``; the indices follow it to its device."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def follow(t: Tensor) -> Tensor:
            return t.to(data.device)

        return type(self)(data, self.batch_sizes, _bind(self.sorted_indices, follow),
                          _bind(self.unsorted_indices, follow))

    def cuda(self, *args, **kwargs) -> PackedSequence:
        return self.to(*args, device="cuda", **kwargs)

    def cpu(self, *args, **kwargs) -> PackedSequence:
        return self.to(*args, device="cpu", **kwargs)

    def double(self) -> PackedSequence:
        return self.to(dtype=ember.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=ember.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=ember.float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=ember.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=ember.int32)

    def short(self) -> PackedSequence:
        return self.to(dtype=ember.int16)

    def char(self) -> PackedSequence:
        return self.to(dtype=ember.int8)

    def byte(self) -> PackedSequence:
        return self.to(dtype=ember.uint8)

    @property
    def is_cuda(self) -> bool:
        return self.data.device.type == "cuda"

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a 1-D permutation (``None`` stays ``None``)."""
    if permutation is None:
        return None
    output = ember.empty_like(permutation)
    output.scatter_(0, permutation, ember.arange(permutation.numel(), device=permutation.device))
    return output


def _lengths_tensor(lengths) -> Tensor:
    if isinstance(lengths, Tensor):
        return lengths.to(dtype=ember.int64)
    return ember.as_tensor(lengths, dtype=ember.int64, device="cpu")


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Packs a padded ``T x B x *`` (``B x T x *`` if ``batch_first``) batch of sequences."""
    lengths = _lengths_tensor(lengths)
    batch_dim = 0 if batch_first else 1
    if enforce_sorted:
        sorted_indices = None
    else:
        lengths, sorted_indices = ember.sort(lengths, descending=True)
        sorted_indices = sorted_indices.to(input.device)
        input = input.index_select(batch_dim, sorted_indices)
    if lengths.dim() != 1:
        # lengths is a CPU int64 tensor by now (PyTorch's Python side converts it first, as _lengths_tensor)
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D cpu Long "
                           f"tensor")
    batch = input.size(batch_dim)
    if lengths.numel() != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.numel()} "
                           f"(batch_size={batch})")
    if batch > 1 and bool((lengths[1:] > lengths[:-1]).any()):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
            "if you do not need ONNX exportability.")
    if batch == 0 or int(lengths[-1]) <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    steps = input.size(1 - batch_dim)
    longest = int(lengths[0])
    if longest > steps:
        raise RuntimeError(f"pack_padded_sequence: a length of {longest} exceeds the {steps} time steps of the input")
    # (t, b) pairs of the live positions, in time-major order: exactly the packed order.
    live = ember.arange(longest).unsqueeze(1) < lengths.unsqueeze(0)
    batch_sizes = live.sum(1)
    pos = live.nonzero()
    rest = input.shape[2:]
    if batch_first:
        flat = pos[:, 1] * steps + pos[:, 0]
    else:
        flat = pos[:, 0] * batch + pos[:, 1]
    data = input.reshape((batch * steps,) + tuple(rest)).index_select(0, flat.to(input.device))
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Pads a packed batch back to ``T x B x *`` (or ``B x T x *``); returns it and the lengths."""
    data, batch_sizes = sequence.data, sequence.batch_sizes
    max_seq_length = batch_sizes.size(0)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {max_seq_length}")
        max_seq_length = total_length
    steps = batch_sizes.size(0)
    batch = int(batch_sizes[0])
    total = data.size(0)
    # Gather index into data plus one padding row (index `total`) for every (t, b) position.
    starts = ember.cumsum(batch_sizes, 0) - batch_sizes
    columns = ember.arange(batch).unsqueeze(0)
    index = ember.where(columns < batch_sizes.unsqueeze(1), starts.unsqueeze(1) + columns, total)
    if max_seq_length > steps:
        index = ember.cat([index, ember.full((max_seq_length - steps, batch), total, dtype=ember.int64)])
    if batch_first:
        index = index.t().contiguous()
    pad_row = ember.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    source = ember.cat([data, pad_row])
    out_shape = (batch, max_seq_length) if batch_first else (max_seq_length, batch)
    padded = source.index_select(0, index.reshape(-1).to(data.device)).reshape(out_shape + tuple(data.shape[1:]))
    lengths = (batch_sizes.unsqueeze(1) > ember.arange(batch).unsqueeze(0)).sum(0)
    unsorted_indices = sequence.unsorted_indices
    if unsorted_indices is not None:
        batch_dim = 0 if batch_first else 1
        return padded.index_select(batch_dim, unsorted_indices), lengths[unsorted_indices.cpu()]
    return padded, lengths


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stacks ``L_i x *`` sequences into ``T x B x *`` (``B x T x *``), padding each to the longest."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    sequences = tuple(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    first = sequences[0]
    if first.ndim == 0:  # PyTorch fails slicing its trailing sizes (a RuntimeError); a later 0-d one, at size(0)
        raise RuntimeError("pad_sequence: the first sequence is 0-d; each sequence needs a length dimension")
    longest = max(s.size(0) for s in sequences)
    padded = []
    for seq in sequences:
        seq = _fit_trailing(seq.to(first.dtype), tuple(first.shape[1:]))
        short = longest - seq.size(0)
        if short:
            fill = ember.full((short,) + tuple(seq.shape[1:]), padding_value, dtype=first.dtype, device=seq.device)
            seq = ember.cat([seq, fill] if padding_side == "right" else [fill, seq])
        padded.append(seq)
    return ember.stack(padded, 0 if batch_first else 1)


def _fit_trailing(seq: Tensor, trailing: tuple) -> Tensor:
    # PyTorch copies each sequence into its slot of the output (first sequence's trailing dims),
    # broadcasting it there: its error is the broadcast's, at the rightmost dim that cannot match.
    if tuple(seq.shape[1:]) == trailing:
        return seq
    slot = (seq.size(0),) + trailing
    if seq.ndim <= len(slot):
        have = [1] * (len(slot) - seq.ndim) + list(seq.shape)
        for i in range(len(slot) - 1, -1, -1):
            if have[i] != slot[i] and 1 not in (have[i], slot[i]):
                raise RuntimeError(f"The size of tensor a ({slot[i]}) must match the size of tensor b ({have[i]}) at "
                                   f"non-singleton dimension {i}")
        if any(h != 1 and d == 1 for h, d in zip(have, slot)):
            wide = [h if d == 1 else d for h, d in zip(have, slot)]
            raise RuntimeError(f"output with shape {list(slot)} doesn't match the broadcast shape {wide}")
        return seq.expand(slot)
    raise RuntimeError(f"expand(torch.FloatTensor{{{list(seq.shape)}}}, size={list(slot)}): the number of sizes "
                       f"provided ({len(slot)}) must be greater or equal to the number of dimensions in the tensor "
                       f"({seq.ndim})")


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list[Tensor]:
    """Splits a padded batch back into its sequences (``lengths`` give each one's length)."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(length)].clone() for seq, length in zip(padded_sequences, lengths, strict=True)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of ``L_i x *`` sequences (``pad_sequence`` then ``pack_padded_sequence``)."""
    lengths = ember.as_tensor([v.size(0) for v in sequences], dtype=ember.int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences held by a ``PackedSequence``, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
