"""``ember.nn.utils``: gradient clipping, parameter vectors, RNN sequence packing."""

from . import rnn  # noqa: F401
from .rnn import (  # noqa: F401
    PackedSequence,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)
