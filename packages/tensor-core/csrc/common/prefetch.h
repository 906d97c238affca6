// Software prefetch of the next row of a row-wise pass. Such a pass (layer_norm, rms_norm)
// reads a row from memory once, then makes further passes over the cached row; during those
// the hardware prefetcher runs only a little ahead, so the memory sits idle and the next row's
// read starts cold. Asking for the whole next row first keeps the read stream going
// (layer_norm on (4096, 1024) float32: ~1.05-1.2x -> 0.6-0.9x PyTorch, one thread, A/B in one
// hour). Softmax and cross-entropy rows measured slower with it (their exponential pass is
// compute-bound; the early read only competes with it); they prefetch the next row a line at a
// time inside that pass instead (reduce_simd.h's exp_shift_sum and add_exp_chunk).
#pragma once

#include <cstdint>

namespace ember {

// Rows above this many bytes stream well on their own, and would evict the current row.
constexpr int64_t kPrefetchRowBytes = 16 * 1024;

template <typename T>
inline void prefetch_row(const T* row, int64_t n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  if (bytes > kPrefetchRowBytes) return;
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

}  // namespace ember
