// Per-column scratch arrays of the column-block kernels (softmax over a non-last dim,
// cross-entropy with the classes on dim 1), placed away from the input rows modulo 4 KiB.
//
// Those kernels walk rows of a block that are often a multiple of 4 KiB apart (1024 floats),
// and per vector of columns load x[k][j] and a running max or sum acc[j], then store acc[j].
// A load whose address matches an older, still pending store in its low 12 bits is predicted
// to depend on it (4K aliasing) and waits: with 4 KiB arrays placed back to back on the stack,
// or at the input's offset, every vector of a row pays that. Measured on the Zen 4 machine of
// session 16, softmax over dim 0 of (4096, 1024) float32, one thread, with the one-read column
// statistics (reduce.cpp's softmax_col_stats_f32): a stand-alone copy of the kernel 3.3 ms with
// its arrays at the input's offset vs 1.6-1.7 ms staggered; in ember, alternated in one process
// at load 15, 2.46 vs 2.24 ms (softmax) and 2.16 vs 1.88 ms (log_softmax).
#pragma once

#include <cstdint>

namespace ember {

// Room for `slots` arrays of `len` floats each placed by alias_free_slot.
constexpr int64_t alias_free_pool_floats(int64_t slots, int64_t len) { return slots * (len + 48) + 1024 + 16; }

// Array `slot` (0, 1, ...) of `len` floats in `pool` (alias_free_pool_floats(slots, len) floats,
// 64-byte aligned): 64-byte aligned, at 2 KiB + 192 bytes x slot from `ref` modulo 4 KiB (to the
// 64 bytes below), so no two slots and no row that starts at ref's offset share a 4 KiB offset.
inline float* alias_free_slot(float* pool, const void* ref, int64_t slot, int64_t len) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(pool);
  const uintptr_t want = (reinterpret_cast<uintptr_t>(ref) + 2048) & 4095 & ~uintptr_t(63);
  const uintptr_t first = base + ((want - base) & 4095);
  return reinterpret_cast<float*>(first) + slot * (len + 48);
}

}  // namespace ember
