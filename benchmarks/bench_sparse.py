"""Sparse benchmark (issue 19): ember vs PyTorch in one process, one thread, as ratios.

Run from the repository root:
    PYTHONPATH=$(python ci/dev_env.py) python benchmarks/bench_sparse.py [--quick] [--threads N]

Cases (goal: ember/torch <= 1.0):

- ``csr_x_dense``: a 100k x 100k CSR matrix with 1M stored float32 values (random positions)
  times a dense 100k x 64 float32 matrix (a GCN layer's aggregation).
- ``coo_coalesce``: coalescing a 1M-entry COO tensor of shape 100k x 100k (random positions,
  some duplicates).
- ``coo_x_dense``: ``torch.sparse.mm`` of the same matrix in COO form (coalesced) times the dense
  matrix: COO compressed to rows on each call, then the CSR kernel.

Bandwidth: the bytes each kernel must move at least, divided by its time. CSR x dense reads
the row pointers, the column indices and values (12 B per stored value + 8 B per row), one
dense row of 64 floats per stored value (mostly cache misses: 256 B), and writes the output
(256 B per row); coalesce reads the indices and values (20 B per entry) and writes the result
(the sort's extra passes are not counted). Compare with the machine's stream bandwidth
(``--stream`` measures a large copy with numpy).

Figures (2026-12-02, the shared 2-core x86_64 dev machine under load ~12 from other jobs, one
thread, median of 7; wall clock, so +-30%):

| case | ember | torch | ratio | ember GB/s | torch GB/s |
| --- | --- | --- | --- | --- | --- |
| csr_x_dense | 447 ms | 603 ms | 0.74 | 0.66 | 0.49 |
| coo_coalesce | 893 ms | 1588 ms | 0.56 | 0.04 | 0.03 |
| coo_x_dense | 803 ms | 2114 ms | 0.38 | 0.38 | 0.14 |

numpy copy on the same machine at the same time: 1.62 GB/s (read + write), so the CSR product
reaches ~40% of the copy bandwidth available to one thread then; its dense-row reads are random
256-byte gathers (a cache miss each), which a streaming copy never pays. The coalesce is the
radix sort of 1M 34-bit keys (4 passes of 11 bits) plus the scatter of the values.
"""

from __future__ import annotations

import argparse

import numpy as np

# ruff: noqa: I001 - ember first: both then share the libgomp ember configures.
import ember
import torch

from _timing import median_time


def _problem(n: int, nnz: int, width: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, nnz)
    cols = rng.integers(0, n, nnz)
    values = rng.standard_normal(nnz).astype(np.float32)
    dense = rng.standard_normal((n, width)).astype(np.float32)
    return np.stack([rows, cols]).astype(np.int64), values, dense


def bench(n: int, nnz: int, width: int, repeat: int) -> list[tuple]:
    idx, values, dense = _problem(n, nnz, width)
    e_coo = ember.sparse_coo_tensor(ember.tensor(idx), ember.tensor(values), (n, n))
    t_coo = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(values), (n, n))
    e_csr, t_csr = e_coo.to_sparse_csr(), t_coo.to_sparse_csr()
    e_dense, t_dense = ember.tensor(dense), torch.tensor(dense)
    stored = e_csr._nnz()
    assert np.allclose((e_csr @ e_dense).numpy(), (t_csr @ t_dense).numpy(), rtol=1e-3, atol=1e-3)

    results = []
    te = median_time(lambda: ember.mm(e_csr, e_dense), repeat)
    tt = median_time(lambda: torch.mm(t_csr, t_dense), repeat)
    moved = stored * (12 + 4 * width) + n * (8 + 4 * width)
    results.append(("csr_x_dense", te, tt, moved))

    te = median_time(lambda: e_coo.coalesce(), repeat)
    tt = median_time(lambda: t_coo.coalesce(), repeat)
    results.append(("coo_coalesce", te, tt, nnz * 20 + stored * 20))

    e_c, t_c = e_coo.coalesce(), t_coo.coalesce()
    te = median_time(lambda: ember.sparse.mm(e_c, e_dense), repeat)
    tt = median_time(lambda: torch.sparse.mm(t_c, t_dense), repeat)
    results.append(("coo_x_dense", te, tt, stored * (20 + 4 * width) + n * 4 * width))
    return results


def stream_bandwidth() -> float:
    a = np.ones(64 << 20, dtype=np.uint8)
    b = np.empty_like(a)
    t = median_time(lambda: np.copyto(b, a), 5)
    return 2 * a.nbytes / t


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10x smaller problem, fewer repeats")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--stream", action="store_true", help="also measure a numpy copy's bandwidth")
    args = parser.parse_args()
    ember.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    n, nnz = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
    repeat = 3 if args.quick else 7
    print(f"threads={args.threads} n={n} nnz={nnz} width=64")
    print(f"{'case':<14} {'ember':>10} {'torch':>10} {'ratio':>7} {'ember GB/s':>11} {'torch GB/s':>11}")
    for name, te, tt, moved in bench(n, nnz, 64, repeat):
        print(f"{name:<14} {te * 1e3:>8.2f}ms {tt * 1e3:>8.2f}ms {te / tt:>7.2f} {moved / te / 1e9:>11.2f} "
              f"{moved / tt / 1e9:>11.2f}")
    if args.stream:
        print(f"numpy copy bandwidth: {stream_bandwidth() / 1e9:.2f} GB/s (read + write)")


if __name__ == "__main__":
    main()
