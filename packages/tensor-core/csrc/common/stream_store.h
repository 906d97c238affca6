// Streaming (non-temporal) stores for the last pass of a kernel that writes a large output.
// A plain store to a line that is not cached first reads the line from memory (read for
// ownership), so writing an output costs two transfers per byte; a streaming store skips that
// read and the caches. For outputs much larger than the caches, which the next op reads back from
// memory anyway, that is a third less traffic in a read-one-write-one row pass. (glibc's memcpy
// does the same above a size threshold: it is what `copy_`, the copy-bandwidth yardstick, runs.)
//
// Use: a loop over one contiguous output run calls stream_head() for the scalar elements before
// the first aligned vector, stores whole vectors with store_vec(..., stream), and the thread
// calls stream_fence() once after its last streaming store.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace ember {

// Outputs of at least this many bytes are written with streaming stores: well beyond one core's
// L2, and large enough that most of them would be evicted from the shared L3 before the next op.
constexpr int64_t kStreamOutputBytes = 8 << 20;

inline bool stream_output(int64_t bytes) { return bytes >= kStreamOutputBytes; }

// Whether a row pass that reads `in` while it streams `out` (both advancing together) is clear of
// 4K aliasing: where out sits less than kStoreShadow bytes after in modulo 4 KiB, each load of in
// follows, by a few vectors, a store to out at nearly the same 4 KiB offset and waits for it, which
// a streaming store makes long; such passes use plain stores. Typical case: in from NumPy
// (from_numpy: 16 bytes past a 64-byte boundary), out from ember's allocator (at 64): 48 bytes
// apart. Measured on the Zen 4 machine (NOTES.md, sessions 17 and 18): the dim-0 softmax's output
// pass 4.3 ms streamed vs 1.95 plain at 48 bytes (1.15-1.33 vs 1.37-1.57 at 1072); the (4096,
// 1024) layer_norm 2.11 ms on a NumPy input vs 1.60 on an ember-allocated one, rms_norm 2.09 vs
// 1.55 (before this check; with it, A/B in one process, four runs at load 18-20: rms_norm 3-24%
// faster, layer_norm 0-11%).
constexpr uintptr_t kStoreShadow = 640;

inline bool stream_clear_of(const void* out, const void* in) {
  const uintptr_t gap = (reinterpret_cast<uintptr_t>(out) - reinterpret_cast<uintptr_t>(in)) & 4095;
  return gap == 0 || gap >= kStoreShadow;
}

// Elements before the first 64-byte aligned one in p[0, n) (all n when none is aligned); 0 when
// not streaming, so callers use it unconditionally.
template <typename T>
inline int64_t stream_head(const T* p, int64_t n, bool stream) {
  if (!stream) return 0;
  const uintptr_t mis = reinterpret_cast<uintptr_t>(p) & 63;
  if (mis % sizeof(T)) return 0;  // never aligned: plain stores throughout
  const int64_t head = mis ? static_cast<int64_t>((64 - mis) / sizeof(T)) : 0;
  return head < n ? head : n;
}

// Stores one gcc vector (of 32 or 64 bytes) at dst, streaming when asked and dst is aligned to
// the vector's size.
template <typename V>
inline void store_vec(void* dst, const V& v, bool stream) {
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {
    if (stream && (reinterpret_cast<uintptr_t>(dst) & 63) == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), reinterpret_cast<const __m512i&>(v));
      return;
    }
  }
#endif
#if defined(__AVX__)
  if constexpr (sizeof(V) == 32) {
    if (stream && (reinterpret_cast<uintptr_t>(dst) & 31) == 0) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), reinterpret_cast<const __m256i&>(v));
      return;
    }
  }
#endif
  std::memcpy(dst, &v, sizeof(V));
}

// Orders this thread's streaming stores before what follows (another thread, or the caller after
// the parallel region, reading the output).
inline void stream_fence(bool stream) {
#if defined(__SSE__)
  if (stream) _mm_sfence();
#else
  (void)stream;
#endif
}

}  // namespace ember
