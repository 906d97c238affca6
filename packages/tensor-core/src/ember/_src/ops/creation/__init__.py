"""Factories: tensors from data, shapes and ranges, from buffers and strides."""
