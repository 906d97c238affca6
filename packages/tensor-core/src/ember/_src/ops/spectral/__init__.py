"""Fourier transforms (and their engines) and signal processing."""
