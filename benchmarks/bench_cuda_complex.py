"""ember's complex kernels and FFTs on CUDA beside PyTorch CUDA, in one process on one GPU.

Complex elementwise (mul, abs, exp: interleaved pairs in ember's generated kernels), complex GEMM
(cuBLAS CUDA_C_32F), and the FFTs both run on cuFFT (fft, rfft, irfft, fft2, a 4-d fftn that ember runs
in two passes), plus stft. Device times are CUDA-event medians (``_timing.cuda_median_ms``, host issue
time hidden); the table gives each framework's ms and ember's time over PyTorch's (< 1: ember faster).

    python benchmarks/bench_cuda_complex.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

from _timing import cuda_median_ms

import ember


def _data(torch, fw, shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    t = torch.randn(*shape, device="cuda", generator=g, dtype=getattr(torch, dtype))
    if fw is torch:
        return t
    return ember.from_numpy(t.cpu().numpy()).cuda()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch

    iters = 10 if args.quick else 30
    n = 1 << (22 if args.quick else 24)
    cases = {
        "mul c64": ((n,), "complex64", lambda fw, x, y: lambda: x * y),
        "abs c64": ((n,), "complex64", lambda fw, x, y: lambda: x.abs()),
        "exp c64": ((n,), "complex64", lambda fw, x, y: lambda: x.exp()),
        "sum c64": ((n,), "complex64", lambda fw, x, y: lambda: x.sum()),
        # over trailing dims: the row kernels' pairs form (session 20); over a leading dim: the real column kernel
        "sum dim -1 c64 (4096, 1024)": ((4096, 1024), "complex64", lambda fw, x, y: lambda: x.sum(-1)),
        "mean dim 1 c128 (64, 65536)": ((64, 65536), "complex128", lambda fw, x, y: lambda: x.mean(1)),
        "sum dim 0 c64 (4096, 1024)": ((4096, 1024), "complex64", lambda fw, x, y: lambda: x.sum(0)),
        "mm c64 2048": ((2048, 2048), "complex64", lambda fw, x, y: lambda: x @ y),
        "fft c64 (4096, 1024)": ((4096, 1024), "complex64", lambda fw, x, y: lambda: fw.fft.fft(x)),
        "fft dim 0 c64 (1024, 4096)": ((1024, 4096), "complex64", lambda fw, x, y: lambda: fw.fft.fft(x, dim=0)),
        "rfft f32 (4096, 4096)": ((4096, 4096), "float32", lambda fw, x, y: lambda: fw.fft.rfft(x)),
        "irfft c64 (4096, 2049)": ((4096, 2049), "complex64", lambda fw, x, y: lambda: fw.fft.irfft(x)),
        "fft2 c64 (64, 256, 256)": ((64, 256, 256), "complex64", lambda fw, x, y: lambda: fw.fft.fft2(x)),
        "fftn 4-d c64 (8, 32, 64, 64)": ((8, 32, 64, 64), "complex64", lambda fw, x, y: lambda: fw.fft.fftn(x)),
        "fft n=1000 f64 (2048, 1000)": ((2048, 1000), "float64", lambda fw, x, y: lambda: fw.fft.fft(x, n=1000)),
        "stft f32 (16, 160000) n_fft 512": ((16, 160000), "float32", lambda fw, x, y: lambda: fw.stft(
            x, 512, hop_length=128, window=fw.hann_window(512, device="cuda"), return_complex=True)),
    }
    rows = []
    for name, (shape, dtype, make) in cases.items():
        row = {"name": name}
        for label, fw in (("ember", ember), ("torch", torch)):
            x, y = _data(torch, fw, shape, dtype), _data(torch, fw, shape, dtype, seed=1)
            row[label + "_ms"] = round(cuda_median_ms(fw, make(fw, x, y), iters, hide_host=True), 4)
        row["ratio"] = round(row["ember_ms"] / row["torch_ms"], 3)
        rows.append(row)
        print(f"{name:36s} ember {row['ember_ms']:>9} ms  torch {row['torch_ms']:>9} ms  ember/torch {row['ratio']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
