#include "storage.h"

#ifdef __linux__
#include <sys/sysinfo.h>
#endif

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "parallel.h"

namespace py = pybind11;

namespace ember {

Storage::~Storage() {
  if (owns) std::free(data);
  if (on_free) on_free();
  if (keepalive) {
    py::gil_scoped_acquire gil;
    keepalive = py::object();
  }
}

void check_allocation_fits(double nbytes) {
#ifdef __linux__
  struct sysinfo info;
  if (sysinfo(&info) != 0) return;
  double limit = (static_cast<double>(info.totalram) + static_cast<double>(info.totalswap)) * info.mem_unit;
  if (nbytes > limit) {
    char size[64];
    std::snprintf(size, sizeof size, "%.0f", nbytes);
    throw std::runtime_error(std::string("DefaultCPUAllocator: can't allocate memory: you tried to allocate ") +
                             size + " bytes, more than this machine's memory and swap.");
  }
#else
  (void)nbytes;
#endif
}

std::shared_ptr<Storage> Storage::allocate(int64_t nbytes, bool zero) {
  if (nbytes < 0) throw std::invalid_argument("storage size must be non-negative");
  check_allocation_fits(static_cast<double>(nbytes));
  auto s = std::make_shared<Storage>();
  // 64-byte alignment for vector loads; at least one line so data is never null on the CPU.
  // Blocks of 32 MiB and more are what glibc always serves with a fresh mmap (its dynamic
  // mmap threshold stops there), so every such output page-faults on first write: 16384
  // faults for 64 MiB, which cost more than an AVX-512 exp over the same memory (exp into a
  // fresh 64 MiB output: 45 ms; into a reused one: 15 ms). Those blocks are 2 MiB aligned
  // and marked for transparent huge pages. Smaller blocks are recycled by malloc's heap,
  // where huge pages measured slower (softmax on 16 MiB: 1.1x -> 1.3x PyTorch).
  constexpr size_t kHugePage = size_t(2) << 20;
  constexpr size_t kFreshMmapSize = size_t(32) << 20;
  size_t size = static_cast<size_t>(nbytes);
  size_t alignment = size >= kFreshMmapSize ? kHugePage : 64;
  size_t padded = ((size + alignment - 1) / alignment) * alignment;
  if (padded == 0) padded = 64;
  void* p = std::aligned_alloc(alignment, padded);
  // PyTorch's CPU allocator raises RuntimeError (not MemoryError) when memory runs out.
  if (!p)
    throw std::runtime_error("DefaultCPUAllocator: can't allocate memory: you tried to allocate " +
                             std::to_string(nbytes) + " bytes.");
#ifdef MADV_HUGEPAGE
  if (alignment == kHugePage) madvise(p, padded, MADV_HUGEPAGE);
#endif
  if (zero) {
    char* c = static_cast<char*>(p);
    parallel_for(static_cast<int64_t>(padded), 1 << 20,
                 [&](int64_t b, int64_t e) { std::memset(c + b, 0, static_cast<size_t>(e - b)); });
  }
  s->data = static_cast<char*>(p);
  s->nbytes = nbytes;
  s->owns = true;
  return s;
}

std::shared_ptr<Storage> Storage::meta(int64_t nbytes) {
  if (nbytes < 0) throw std::invalid_argument("storage size must be non-negative");
  auto s = std::make_shared<Storage>();
  s->nbytes = nbytes;
  s->device = "meta";
  return s;
}

void bind_storage(py::module_& m) {
  py::class_<Storage, std::shared_ptr<Storage>>(m, "Storage", py::buffer_protocol(), "A block of bytes viewed by tensors.")
      .def_static("allocate", &Storage::allocate, py::arg("nbytes"), py::arg("zero") = false,
                  "Allocates nbytes of CPU memory (64-byte aligned).")
      .def_static("meta", &Storage::meta, py::arg("nbytes"), "A storage on the meta device: a size, no memory.")
      .def_static(
          "borrow",
          [](uintptr_t address, int64_t nbytes, py::object owner) {
            if (nbytes < 0) throw std::invalid_argument("storage size must be non-negative");
            if (address == 0 && nbytes > 0) throw std::invalid_argument("null address for a non-empty storage");
            auto s = std::make_shared<Storage>();
            s->data = reinterpret_cast<char*>(address);
            s->nbytes = nbytes;
            s->keepalive = std::move(owner);
            return s;
          },
          py::arg("address"), py::arg("nbytes"), py::arg("owner"),
          "Wraps memory owned by another object (kept alive) without copying.")
      .def("data_ptr", &Storage::data_ptr)
      .def("nbytes", [](const Storage& s) { return s.nbytes; })
      .def("size", [](const Storage& s) { return s.nbytes; })
      .def_property_readonly("device_type", [](const Storage& s) { return s.device; })
      .def_readwrite("version", &Storage::version)
      .def("__len__", [](const Storage& s) { return s.nbytes; })
      .def(
          "copy_",
          [](Storage& self, const Storage& other) -> Storage& {
            if (self.nbytes != other.nbytes)
              throw std::invalid_argument("copy_ between storages of different sizes");
            if (self.nbytes && (!self.data || !other.data)) throw std::invalid_argument("copy_ on a meta storage");
            if (self.nbytes) std::memmove(self.data, other.data, static_cast<size_t>(self.nbytes));
            return self;
          },
          py::return_value_policy::reference_internal)
      .def("cpu", [](std::shared_ptr<Storage> self) { return self; })
      .def_buffer([](Storage& s) -> py::buffer_info {
        if (!s.data && s.nbytes) throw std::invalid_argument("a meta storage has no buffer");
        return py::buffer_info(s.data, 1, py::format_descriptor<uint8_t>::format(), 1, {s.nbytes}, {1});
      });
}

}  // namespace ember
