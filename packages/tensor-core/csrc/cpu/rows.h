// Row-wise iteration for ops that work along one dim (gather/scatter, sort, cumulative
// ops): the shape without `dim` is the outer problem, run on the shared strided machinery
// (coalesced, parallel over whole rows); each row is handed to the caller to walk serially.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "../common/loop.h"

namespace ember {

inline std::vector<int64_t> drop_dim(const std::vector<int64_t>& v, int64_t dim) {
  std::vector<int64_t> out(v);
  out.erase(out.begin() + dim);
  return out;
}

// fn(ptrs, row_strides, n) for runs of n rows (ptrs: the first row; byte strides between
// rows); each run is on one thread, so rows of a run may be walked in any order.
template <int N, typename F>
void for_each_row_run(const std::vector<int64_t>& shape, int64_t dim, const std::array<char*, N>& data,
                      const std::array<std::vector<int64_t>, N>& byte_strides_full, const F& fn) {
  std::array<std::vector<int64_t>, N> outer;
  for (int k = 0; k < N; ++k) outer[k] = drop_dim(byte_strides_full[k], dim);
  auto p = coalesce<N>(drop_dim(shape, dim), data, outer);
  const int64_t len = std::max<int64_t>(shape[dim], 1);
  run_strided<N>(p, std::max<int64_t>(1, kGrainSize / len), fn);
}

// fn(std::array<char*, N>& row) for each row; byte strides given for the full shape.
template <int N, typename F>
void for_each_row(const std::vector<int64_t>& shape, int64_t dim, const std::array<char*, N>& data,
                  const std::array<std::vector<int64_t>, N>& byte_strides_full, const F& fn) {
  for_each_row_run<N>(shape, dim, data, byte_strides_full,
                      [&](std::array<char*, N>& ptrs, const std::array<int64_t, N>& s, int64_t n) {
                        for (int64_t r = 0; r < n; ++r) {
                          std::array<char*, N> row;
                          for (int k = 0; k < N; ++k) row[k] = ptrs[k] + r * s[k];
                          fn(row);
                        }
                      });
}

// Visits fn(r, j) for n rows and len steps along dim: rows innermost when consecutive rows
// are closer in memory than consecutive steps (a dim that is not the innermost one).
template <typename F>
inline void visit_run(int64_t n, int64_t len, bool rows_inner, const F& fn) {
  if (rows_inner) {
    for (int64_t j = 0; j < len; ++j)
      for (int64_t r = 0; r < n; ++r) fn(r, j);
  } else {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < len; ++j) fn(r, j);
  }
}

}  // namespace ember
