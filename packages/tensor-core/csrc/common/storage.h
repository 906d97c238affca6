// A reference-counted block of bytes that tensors view. CPU storages own an aligned
// allocation or borrow memory from another object (NumPy array, DLPack producer) which
// they keep alive; meta storages have a size and no memory.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ember {

struct Storage {
  char* data = nullptr;
  int64_t nbytes = 0;
  std::string device = "cpu";
  bool owns = false;
  pybind11::object keepalive;          // borrowed memory: the owner object
  std::function<void()> on_free;       // borrowed memory: a release callback (DLPack deleter)
  int64_t version = 0;                 // shared by every view; bumped by in-place ops
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
};

using StoragePtr = std::shared_ptr<Storage>;

// Throws PyTorch's out-of-memory RuntimeError when `nbytes` exceeds the machine's RAM plus swap.
// Linux refuses such a malloc by default, but overcommitting systems (some sandboxes) grant it
// and then kill the process when the pages are touched: checking first keeps it an exception.
void check_allocation_fits(double nbytes);

void bind_storage(pybind11::module_& m);

}  // namespace ember
