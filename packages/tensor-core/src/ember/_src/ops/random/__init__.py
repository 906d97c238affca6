"""Random sampling: in-place samplers, multinomial, counting distributions."""
