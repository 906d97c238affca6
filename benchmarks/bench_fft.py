"""FFT benchmark: ember's engines (pocketfft from SciPy or NumPy, in every install; FFTW, when the
build links it) beside PyTorch in one process, as ember_time / torch_time, 1 thread (the primary
figure).

Run from the repository root:
    PYTHONPATH=$(python3 ci/dev_env.py) python benchmarks/bench_fft.py [--quick]
"""

from __future__ import annotations

import argparse
import os

# ruff: noqa: I001 - ember before torch, so both share the libgomp ember configures.
import ember
import torch

from _timing import median_time

CASES = [
    ("fft c64 (256, 1024)", "fft", (256, 1024), "complex64", {}),
    ("rfft f32 (256, 1024)", "rfft", (256, 1024), "float32", {}),
    ("irfft c64 (256, 513)", "irfft", (256, 513), "complex64", {}),
    ("rfft2 f32 (64, 128, 128)", "rfft2", (64, 128, 128), "float32", {}),
    ("fftn c128 (32, 64, 64)", "fftn", (32, 64, 64), "complex128", {}),
    ("rfft f64 (8, 100003) prime length", "rfft", (8, 100003), "float64", {}),
]


def _engine_time(fn, x, kwargs, engine: str, repeat: int) -> float:
    old = os.environ.get("EMBER_FFT_ENGINE")
    os.environ["EMBER_FFT_ENGINE"] = engine
    try:
        return median_time(lambda: fn(x, **kwargs), repeat)
    finally:
        if old is None:
            os.environ.pop("EMBER_FFT_ENGINE")
        else:
            os.environ["EMBER_FFT_ENGINE"] = old


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 3 if args.quick else 9
    ember.set_num_threads(1)
    torch.set_num_threads(1)
    have_fftw = ember._C.fft_available
    print(f"{'case':34s} {'numpy/torch':>12s} {'scipy/torch':>12s} {'fftw/torch':>11s} {'scipy/fftw':>11s}")
    for label, name, shape, dtype, kwargs in CASES:
        t = torch.randn(shape, dtype=getattr(torch, dtype))
        e = ember.tensor(t.numpy())
        t_time = _engine_time(getattr(torch.fft, name), t, kwargs, "", repeat)
        fn = getattr(ember.fft, name)
        numpy_time = _engine_time(fn, e, kwargs, "numpy", repeat)
        scipy_time = _engine_time(fn, e, kwargs, "scipy", repeat)
        fftw_time = _engine_time(fn, e, kwargs, "fftw", repeat) if have_fftw else float("nan")
        print(f"{label:34s} {numpy_time / t_time:12.2f} {scipy_time / t_time:12.2f} {fftw_time / t_time:11.2f} "
              f"{scipy_time / fftw_time:11.2f}")


if __name__ == "__main__":
    main()
