#include "parallel.h"

#include <atomic>
#include <mutex>

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
