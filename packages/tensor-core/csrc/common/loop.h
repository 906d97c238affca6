// The one strided-iteration machinery every elementwise kernel shares.
//
// Operands share one iteration shape; each has its own byte strides (0 where it is
// broadcast). Dimensions of size 1 are dropped and neighbouring dimensions that are
// contiguous for every operand are merged, so a contiguous or simply broadcast problem
// becomes a single inner loop. The inner function receives pointers and byte strides for
// one run of the innermost dimension and decides itself whether it can take a fast path.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "parallel.h"

namespace ember {

template <int N>
struct StridedProblem {
  std::vector<int64_t> shape;                       // innermost last
  std::array<std::vector<int64_t>, N> strides;      // bytes
  std::array<char*, N> data;
};

template <int N>
StridedProblem<N> coalesce(const std::vector<int64_t>& shape, const std::array<char*, N>& data,
                           const std::array<std::vector<int64_t>, N>& strides) {
  StridedProblem<N> p;
  p.data = data;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !p.shape.empty();
    if (merge) {
      for (int k = 0; k < N; ++k) {
        if (p.strides[k].back() != strides[k][d] * shape[d]) {
          merge = false;
          break;
        }
      }
    }
    if (merge) {
      p.shape.back() *= shape[d];
      for (int k = 0; k < N; ++k) p.strides[k].back() = strides[k][d];
    } else {
      p.shape.push_back(shape[d]);
      for (int k = 0; k < N; ++k) p.strides[k].push_back(strides[k][d]);
    }
  }
  if (p.shape.empty()) {
    p.shape.push_back(1);
    for (int k = 0; k < N; ++k) p.strides[k].push_back(0);
  }
  return p;
}

// inner(std::array<char*, N>& ptrs, const std::array<int64_t, N>& strides, int64_t n)
template <int N, typename Inner>
void run_strided(const StridedProblem<N>& p, int64_t grain, const Inner& inner) {
  const int64_t nd = static_cast<int64_t>(p.shape.size());
  int64_t total = 1;
  for (int64_t s : p.shape) total *= s;
  if (total == 0) return;
  const int64_t inner_size = p.shape[nd - 1];
  std::array<int64_t, N> inner_strides;
  for (int k = 0; k < N; ++k) inner_strides[k] = p.strides[k][nd - 1];

  parallel_for(total, grain, [&](int64_t begin, int64_t end) {
    // Decompose `begin` into a multi-index and the matching pointers.
    std::vector<int64_t> index(nd, 0);
    int64_t rem = begin;
    for (int64_t d = nd - 1; d >= 0; --d) {
      index[d] = rem % p.shape[d];
      rem /= p.shape[d];
    }
    std::array<char*, N> ptrs;
    for (int k = 0; k < N; ++k) {
      char* ptr = p.data[k];
      for (int64_t d = 0; d < nd; ++d) ptr += index[d] * p.strides[k][d];
      ptrs[k] = ptr;
    }
    int64_t pos = begin;
    while (pos < end) {
      int64_t n = std::min(inner_size - index[nd - 1], end - pos);
      inner(ptrs, inner_strides, n);
      pos += n;
      if (pos >= end) break;
      // Advance: finish this inner run, then carry into outer dimensions.
      for (int k = 0; k < N; ++k) ptrs[k] += (inner_size - index[nd - 1]) * inner_strides[k];
      index[nd - 1] = 0;
      for (int k = 0; k < N; ++k) ptrs[k] -= inner_size * inner_strides[k];
      for (int64_t d = nd - 2; d >= 0; --d) {
        index[d]++;
        for (int k = 0; k < N; ++k) ptrs[k] += p.strides[k][d];
        if (index[d] < p.shape[d]) break;
        index[d] = 0;
        for (int k = 0; k < N; ++k) ptrs[k] -= p.shape[d] * p.strides[k][d];
      }
    }
  });
}

}  // namespace ember
