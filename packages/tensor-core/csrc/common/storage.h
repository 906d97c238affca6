// A reference-counted block of bytes that tensors view. CPU storages own an aligned
// allocation or borrow memory from another object (NumPy array, DLPack producer) which
// they keep alive; meta storages have a size and no memory.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ember {

// A version counter (PyTorch's VersionCounter): bumped by every in-place write through a tensor
// that holds it. A tensor, its views, its detach() results and its saved aliases share one; `.data`
// gets a fresh one over the same memory. A CPU storage holds the default counter of the tensors over
// it that were never given one of their own (TensorObject::vc is null), allocated on first use.
// Refcounted by hand (atomically: a storage may die in a C++ thread without the GIL), so a tensor moved to another storage by set_ or
// `.data =` keeps the counter its views and detached copies share.
struct VersionCounter {
  int64_t value = 0;
  std::atomic<int64_t> refs{1};
};

inline VersionCounter* version_counter_new(int64_t value) {
  auto* c = new VersionCounter;
  c->value = value;
  return c;
}
inline VersionCounter* version_counter_ref(VersionCounter* c) {
  c->refs.fetch_add(1, std::memory_order_relaxed);
  return c;
}
inline void version_counter_unref(VersionCounter* c) {
  if (c != nullptr && c->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete c;
}

struct Storage {
  char* data = nullptr;
  int64_t nbytes = 0;
  std::string device = "cpu";
  bool owns = false;
  pybind11::object keepalive;          // borrowed memory: the owner object
  std::function<void()> on_free;       // borrowed memory: a release callback (DLPack deleter)
  VersionCounter* vc = nullptr;        // the default counter of the tensors over it (null: 0 so far)
  int shm_fd = -1;                     // shared memory: the memfd the data is mapped from
  bool inference = false;              // allocated under inference_mode (Tensor.is_inference)
  size_t cached_size = 0;              // an owned block of this padded size, returned to the block cache
  int64_t exports = 0;                 // live buffer exports (memoryviews, NumPy arrays) and slice storages
  bool shrunk = false;                 // resize_ made it smaller once: tensors may view past its end

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  static std::shared_ptr<Storage> allocate(int64_t nbytes, bool zero);
  static std::shared_ptr<Storage> meta(int64_t nbytes);
  // Moves the bytes into a shared-memory mapping (a memfd, MAP_SHARED) in place, so every
  // tensor viewing this storage, and any process mapping the fd, sees the same memory.
  void share_memory();
  // Maps nbytes of a shared-memory fd received from another process (the fd is duplicated).
  static std::shared_ptr<Storage> from_shm_fd(int fd, int64_t nbytes);
  // Resizes in place (PyTorch's UntypedStorage.resize_): the bytes kept are copied to a fresh
  // block, new bytes are zero. `retain_old` keeps the old block until the storage dies (C++ code
  // may still read it). Refused for borrowed, shared or exported memory.
  void resize(int64_t new_nbytes, bool retain_old);
  uintptr_t data_ptr() const { return reinterpret_cast<uintptr_t>(data); }
  int64_t version() const { return vc != nullptr ? vc->value : 0; }
  VersionCounter* counter() {  // the default counter, made on first use (borrowed)
    if (vc == nullptr) vc = version_counter_new(0);
    return vc;
  }
};

using StoragePtr = std::shared_ptr<Storage>;

// Throws PyTorch's out-of-memory RuntimeError when `nbytes` exceeds the machine's RAM plus swap.
// Linux refuses such a malloc by default, but overcommitting systems (some sandboxes) grant it
// and then kill the process when the pages are touched: checking first keeps it an exception.
void check_allocation_fits(double nbytes);

void bind_storage(pybind11::module_& m);

}  // namespace ember
