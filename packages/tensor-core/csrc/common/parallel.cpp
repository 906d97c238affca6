#include "parallel.h"

#include <atomic>

extern "C" void scipy_openblas_set_num_threads(int);

namespace ember {

namespace {
std::atomic<int> g_num_threads{0};
}

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
  scipy_openblas_set_num_threads(n);
}

BlasSingleThread::BlasSingleThread(bool active) : active_(active) {
  if (active_) scipy_openblas_set_num_threads(1);
}

BlasSingleThread::~BlasSingleThread() {
  if (active_) scipy_openblas_set_num_threads(get_num_threads());
}

}  // namespace ember
