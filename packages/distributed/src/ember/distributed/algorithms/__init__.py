"""``ember.distributed.algorithms``: DDP communication hooks."""
