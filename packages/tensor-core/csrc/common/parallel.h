// Intra-op parallelism: one thread-count setting drives OpenMP and OpenBLAS together,
// and BLAS is never called from inside an OpenMP region with more than one BLAS thread
// (build-facts: that combination hangs or runs ~30x slower).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>

namespace ember {

int get_num_threads();
void set_num_threads(int n);
// Flush-to-zero and denormals-are-zero on the calling thread and the OpenMP workers;
// false where the CPU has no such control (not x86).
bool set_flush_denormal(bool on);

// While alive, OpenBLAS runs on one thread, for BLAS calls made from inside an OpenMP region;
// the destructor restores the intra-op thread count (also when the region throws). With
// `active` false it does nothing.
class BlasSingleThread {
 public:
  explicit BlasSingleThread(bool active = true);
  ~BlasSingleThread();
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;

 private:
  bool active_;
};

// Below this many elements a loop runs on the calling thread: thread wake-up costs more.
constexpr int64_t kGrainSize = 32768;

// Calls fn(begin, end) on disjoint chunks covering [0, total), in parallel when worth it.
// An exception thrown by a chunk (a scratch allocation failing, say) must not leave the OpenMP
// region, which would terminate the process: the first one is kept and rethrown after it.
template <typename F>
void parallel_for(int64_t total, int64_t grain, const F& fn) {
  if (total <= 0) return;
  int threads = get_num_threads();
  if (threads <= 1 || total <= grain || omp_in_parallel()) {
    fn(int64_t(0), total);
    return;
  }
  int64_t max_chunks = (total + grain - 1) / grain;
  int nthreads = static_cast<int>(std::min<int64_t>(threads, max_chunks));
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(nthreads)
  {
    int tid = omp_get_thread_num();
    int nt = omp_get_num_threads();
    int64_t chunk = (total + nt - 1) / nt;
    int64_t begin = tid * chunk;
    int64_t end = std::min(total, begin + chunk);
    if (begin < end) {
      try {
        fn(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace ember
