"""``ember.nn.utils``: gradient clipping, parameter vectors, RNN sequence packing."""

from . import rnn  # noqa: F401
from .rnn import PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence  # noqa: F401
from .rnn import unpack_sequence, unpad_sequence  # noqa: F401
