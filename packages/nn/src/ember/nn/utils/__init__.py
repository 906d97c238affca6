"""``ember.nn.utils``: gradient clipping, parameter vectors, RNN sequence packing."""
