#include "parallel.h"

#include <atomic>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define EMBER_HAS_MXCSR 1
#endif

extern "C" void scipy_openblas_set_num_threads(int);

namespace ember {

namespace {
std::atomic<int> g_num_threads{0};
// OpenBLAS's thread count is process-wide, but several Python threads may each be inside a
// BlasSingleThread region at once: the count stays 1 until the last of them leaves, or one
// leaving would hand the others' OpenMP regions a multi-threaded BLAS (which may hang).
std::mutex g_blas_mutex;
int g_single_blas_regions = 0;
}  // namespace

int get_num_threads() {
  int n = g_num_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = omp_get_max_threads();
    g_num_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) {
  if (n < 1) n = 1;
  g_num_threads.store(n, std::memory_order_relaxed);
  omp_set_num_threads(n);
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (g_single_blas_regions == 0) scipy_openblas_set_num_threads(n);
}

bool set_flush_denormal(bool on) {
#ifdef EMBER_HAS_MXCSR
  // MXCSR is per thread: set it here and in each worker of the OpenMP team (its threads are
  // kept for later regions). Bit 15 flushes denormal results, bit 6 reads denormal inputs as 0.
  constexpr unsigned kFtzDaz = 0x8040;
  auto apply = [on] { _mm_setcsr(on ? (_mm_getcsr() | kFtzDaz) : (_mm_getcsr() & ~kFtzDaz)); };
  apply();
#pragma omp parallel num_threads(get_num_threads())
  apply();
  return true;
#else
  (void)on;
  return false;
#endif
}

BlasSingleThread::BlasSingleThread(bool active) : active_(active) {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (g_single_blas_regions++ == 0) scipy_openblas_set_num_threads(1);
}

BlasSingleThread::~BlasSingleThread() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (--g_single_blas_regions == 0) scipy_openblas_set_num_threads(get_num_threads());
}

}  // namespace ember
