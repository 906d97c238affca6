"""``ember.distributed.elastic``: the parts of torchelastic that training scripts import."""
