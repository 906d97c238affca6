#include "storage.h"

#ifdef __linux__
#include <sys/sysinfo.h>
#endif

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <tuple>
#include <utility>
#include <vector>

#include "parallel.h"

namespace py = pybind11;

namespace ember {

namespace {

// Freed blocks from 256 KiB to just under 32 MiB, kept by size for the next allocation of that
// size. glibc serves these from its heap and gives the top of the heap back to the system when
// a large block at the top is freed (its trim threshold follows the largest block seen), so a
// loop that allocates and frees the same buffers every call (an LSTM's per-layer projections and
// gate activations, a training step's activations) paid a brk shrink, a brk grow and a page
// fault per 4 KiB page every call: 15% of an LSTM forward in the kernel, 50 -> 33 ms with the
// churn gone. The cache keeps at most EMBER_CPU_CACHE_MB (default 64) MiB; a block freed into
// a full cache first evicts the blocks of other sizes, so a program whose sizes change does not
// keep stale ones. Larger blocks take the huge-page path below, smaller ones malloc's bins.
constexpr size_t kCacheMin = size_t(256) << 10;
constexpr size_t kFreshMmapSize = size_t(32) << 20;

struct BlockCache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> blocks;
  size_t held = 0;
  size_t limit = 0;

  BlockCache() {
    const char* env = std::getenv("EMBER_CPU_CACHE_MB");
    long mb = env ? std::strtol(env, nullptr, 10) : 64;
    limit = mb > 0 ? static_cast<size_t>(mb) << 20 : 0;
    // A fork while another thread holds the lock (DataLoader workers) must not leave the
    // child's copy locked forever.
    pthread_atfork([] { instance().mu.lock(); }, [] { instance().mu.unlock(); }, [] { instance().mu.unlock(); });
  }

  static BlockCache& instance() {
    static BlockCache* cache = new BlockCache();  // never destroyed: storages may die during exit
    return *cache;
  }

  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = blocks.find(size);
    if (it == blocks.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    held -= size;
    return p;
  }

  void give(void* p, size_t size) {
    std::vector<void*> evicted;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (size > limit) {
        evicted.push_back(p);
      } else {
        if (held + size > limit) {
          for (auto& [other, list] : blocks) {
            if (other == size) continue;
            for (void* q : list) evicted.push_back(q);
            held -= other * list.size();
            list.clear();
          }
        }
        if (held + size > limit) {
          evicted.push_back(p);  // blocks of this size alone fill the cache
        } else {
          blocks[size].push_back(p);
          held += size;
        }
      }
    }
    for (void* q : evicted) std::free(q);
  }
};

bool cacheable(size_t padded) { return padded >= kCacheMin && padded < kFreshMmapSize; }

}  // namespace

Storage::~Storage() {
  version_counter_unref(vc);
  if (owns) {
    if (cached_size)
      BlockCache::instance().give(data, cached_size);
    else
      std::free(data);
  }
  if (on_free) on_free();
  if (keepalive) {
    py::gil_scoped_acquire gil;
    keepalive = py::object();
  }
}

void check_allocation_fits(double nbytes) {
#ifdef __linux__
  // Every allocation passes here: below 1 GiB, skip the system call (no machine this runs on has
  // less memory and swap than that).
  if (nbytes < static_cast<double>(int64_t(1) << 30)) return;
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
  // Blocks between 256 KiB and 32 MiB come from (and go back to) BlockCache above.
  constexpr size_t kHugePage = size_t(2) << 20;
  size_t size = static_cast<size_t>(nbytes);
  size_t alignment = size >= kFreshMmapSize ? kHugePage : 64;
  size_t padded = ((size + alignment - 1) / alignment) * alignment;
  if (padded == 0) padded = 64;
  bool cache = cacheable(padded);
  void* p = cache ? BlockCache::instance().take(padded) : nullptr;
  if (!p) p = std::aligned_alloc(alignment, padded);
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
  s->cached_size = cache ? padded : 0;
  return s;
}

std::shared_ptr<Storage> Storage::meta(int64_t nbytes) {
  if (nbytes < 0) throw std::invalid_argument("storage size must be non-negative");
  auto s = std::make_shared<Storage>();
  s->nbytes = nbytes;
  s->device = "meta";
  return s;
}

namespace {

// mmap refuses zero-length mappings: an empty storage still maps one byte.
size_t mapped_len(int64_t nbytes) { return nbytes > 0 ? static_cast<size_t>(nbytes) : 1; }

std::runtime_error sys_error(const char* what) {
  return std::runtime_error(std::string("share_memory_: ") + what + " failed: " + std::strerror(errno));
}

// Maps fd read-write and shared; takes ownership of fd (closed on failure and when freed).
void map_fd_into(Storage& s, int fd, int64_t nbytes) {
  size_t len = mapped_len(nbytes);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    auto err = sys_error("mmap");
    close(fd);
    throw err;
  }
  s.data = static_cast<char*>(p);
  s.owns = false;
  s.shm_fd = fd;
  s.on_free = [p, len, fd]() {
    munmap(p, len);
    close(fd);
  };
}

// The memory a storage left when it moved into shared memory, freed with the storage when
// something outside may still point into it.
struct Retired {
  char* data = nullptr;
  bool owns = false;
  std::function<void()> on_free;
  ~Retired() {
    if (owns) std::free(data);
    if (on_free) on_free();
  }
};

// retain_old: keep the old memory until the storage dies instead of freeing it now; for a
// storage that C++ code still holds (a DLPack consumer, a kernel running without the GIL),
// which may read through the old pointer.
void share_storage(Storage& s, bool retain_old) {
  if (s.device != "cpu") throw std::runtime_error("_share_fd_: only available on CPU");
  if (s.shm_fd >= 0) return;  // already shared: a no-op, as in PyTorch
  // A memfd rather than a named /dev/shm file: nothing is left behind if the process dies,
  // and it is not bounded by the size of a container's /dev/shm mount.
  int fd = memfd_create("ember-storage", MFD_CLOEXEC);
  if (fd < 0) throw sys_error("memfd_create");
  if (ftruncate(fd, static_cast<off_t>(mapped_len(s.nbytes))) != 0) {
    auto err = sys_error("ftruncate");
    close(fd);
    throw err;
  }
  auto old = std::make_shared<Retired>();
  old->data = s.data;
  old->owns = s.owns;
  s.cached_size = 0;  // the storage now maps shared memory; its old block is freed, not cached
  old->on_free = std::move(s.on_free);
  s.on_free = nullptr;
  try {
    map_fd_into(s, fd, s.nbytes);
  } catch (...) {
    s.on_free = std::move(old->on_free);  // the storage keeps its old memory
    old->owns = false;
    throw;
  }
  if (s.nbytes) std::memcpy(s.data, old->data, static_cast<size_t>(s.nbytes));
  if (retain_old) {
    // The mapping's release also drops the old block; a borrowed block's Python owner stays
    // in keepalive, released by the destructor under the GIL.
    auto unmap = std::move(s.on_free);
    s.on_free = [unmap, old]() mutable {
      unmap();
      old.reset();
    };
    return;
  }
  old.reset();              // frees the old block now (called from Python: the GIL is held)
  s.keepalive = py::object();
}

}  // namespace

void Storage::share_memory() { share_storage(*this, false); }

void Storage::resize(int64_t new_nbytes, bool retain_old) {
  if (new_nbytes < 0) throw std::runtime_error("resize_: the new size must be non-negative, got " + std::to_string(new_nbytes));
  if (shm_fd >= 0 || (device != "meta" && !owns))
    throw std::runtime_error("Trying to resize storage that is not resizable");
  if (exports > 0)
    throw std::runtime_error(
        "resize_: the storage's memory is exported (a memoryview, a NumPy array or a slice of the storage views "
        "it); release those first");
  if (new_nbytes < nbytes) shrunk = true;
  if (device == "meta") {
    nbytes = new_nbytes;
    return;
  }
  auto fresh = Storage::allocate(new_nbytes, true);
  int64_t keep = new_nbytes < nbytes ? new_nbytes : nbytes;
  if (keep > 0) std::memcpy(fresh->data, data, static_cast<size_t>(keep));
  auto old = std::make_shared<Retired>();
  old->data = data;
  old->owns = true;
  size_t old_cached = cached_size;
  data = fresh->data;
  nbytes = new_nbytes;
  cached_size = fresh->cached_size;
  fresh->owns = false;  // this storage owns the block now
  if (old_cached) {
    old->owns = false;
    char* block = old->data;
    old->on_free = [block, old_cached]() { BlockCache::instance().give(block, old_cached); };
  }
  if (retain_old) {
    auto previous = std::move(on_free);
    on_free = [previous, old]() mutable {
      if (previous) previous();
      old.reset();
    };
  }
}

std::shared_ptr<Storage> Storage::from_shm_fd(int fd, int64_t nbytes) {
  if (nbytes < 0) throw std::invalid_argument("storage size must be non-negative");
  struct stat st;
  if (fstat(fd, &st) != 0) throw sys_error("fstat");
  if (static_cast<int64_t>(st.st_size) < static_cast<int64_t>(mapped_len(nbytes)))
    throw std::invalid_argument("from_shm_fd: the shared memory object is smaller than nbytes");
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) throw sys_error("dup");
  auto s = std::make_shared<Storage>();
  map_fd_into(*s, own, nbytes);
  s->nbytes = nbytes;
  return s;
}

namespace {

// The buffer protocol, counting exports so that resize_ cannot free memory a memoryview or a
// NumPy array still points into.
int storage_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  Storage* s = nullptr;
  try {
    s = py::handle(obj).cast<Storage*>();
  } catch (...) {
    PyErr_SetString(PyExc_TypeError, "not an ember storage");
    view->obj = nullptr;
    return -1;
  }
  if (!s->data && s->nbytes) {
    PyErr_SetString(PyExc_BufferError, "a meta storage has no buffer");
    view->obj = nullptr;
    return -1;
  }
  static char empty[1];
  if (PyBuffer_FillInfo(view, obj, s->data ? s->data : empty, static_cast<Py_ssize_t>(s->nbytes), 0, flags) < 0)
    return -1;
  s->exports += 1;
  return 0;
}

void storage_releasebuffer(PyObject* obj, Py_buffer*) {
  try {
    py::handle(obj).cast<Storage*>()->exports -= 1;
  } catch (...) {
  }
}

void check_has_memory(const Storage& s, const char* what) {
  if (!s.data && s.nbytes) throw std::runtime_error(std::string(what) + ": a meta storage has no data");
}

int64_t byte_index(const Storage& s, int64_t i) {
  int64_t j = i < 0 ? i + s.nbytes : i;
  if (j < 0 || j >= s.nbytes)
    throw py::index_error("index " + std::to_string(i) + " out of range for storage of size " + std::to_string(s.nbytes));
  return j;
}

uint8_t byte_value(py::handle value) {
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True ? 1 : 0;
  if (!PyLong_Check(value.ptr()))
    throw std::runtime_error(std::string("can only set storage content with a int types, but got ") +
                             Py_TYPE(value.ptr())->tp_name + " instead");
  // Wraps modulo 256, as PyTorch's byte storage does.
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow) {
    py::object low = py::reinterpret_steal<py::object>(PyNumber_And(value.ptr(), py::int_(255).ptr()));
    if (!low) throw py::error_already_set();
    v = low.cast<long long>();
  }
  return static_cast<uint8_t>(v & 0xff);
}

// [start, stop) of a step-1 slice over the storage's bytes.
std::pair<int64_t, int64_t> byte_range(const Storage& s, const py::slice& sl) {
  Py_ssize_t start, stop, step;
  if (PySlice_Unpack(sl.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
  if (step != 1)
    throw std::runtime_error("Trying to slice with a step of " + std::to_string(step) +
                             ", but only a step of 1 is supported");
  PySlice_AdjustIndices(static_cast<Py_ssize_t>(s.nbytes), &start, &stop, step);
  if (stop < start) stop = start;
  return {start, stop};
}

std::shared_ptr<Storage> new_storage(int64_t nbytes, const std::string& device) {
  if (device == "meta") return Storage::meta(nbytes);
  if (device != "cpu")
    throw std::runtime_error("UntypedStorage: ember's CPU storages are created on 'cpu' or 'meta', got '" + device + "'");
  return Storage::allocate(nbytes, true);
}

std::string device_name(py::handle device) {
  if (device.is_none()) return "cpu";
  std::string name = py::str(device).cast<std::string>();
  if (name == "cpu" || name == "meta") return name;
  auto colon = name.find(':');
  return colon == std::string::npos ? name : name.substr(0, colon);
}

}  // namespace

void bind_storage(py::module_& m) {
  py::class_<Storage, std::shared_ptr<Storage>> cls(m, "Storage", py::buffer_protocol(), "A block of bytes viewed by tensors (ember.UntypedStorage).");
  cls
      .def(py::init([](py::object arg, py::object device) {
             std::string dev = device_name(device);
             if (PyLong_Check(arg.ptr()) && !PyBool_Check(arg.ptr())) {
               int64_t n = arg.cast<int64_t>();
               if (n < 0) throw std::runtime_error("UntypedStorage: the size must be non-negative, got " + std::to_string(n));
               return new_storage(n, dev);
             }
             if (!PySequence_Check(arg.ptr()) || PyUnicode_Check(arg.ptr()))
               throw py::type_error(std::string("UntypedStorage() takes a size or a sequence of ints, got ") +
                                    Py_TYPE(arg.ptr())->tp_name);
             py::sequence seq = py::reinterpret_borrow<py::sequence>(arg);
             auto n = static_cast<int64_t>(py::len(seq));
             std::vector<uint8_t> bytes(static_cast<size_t>(n));
             for (int64_t i = 0; i < n; ++i) bytes[static_cast<size_t>(i)] = byte_value(seq[static_cast<size_t>(i)]);
             auto s = new_storage(n, dev);
             if (s->data && n) std::memcpy(s->data, bytes.data(), static_cast<size_t>(n));
             return s;
           }),
           py::arg("size") = 0, py::kw_only(), py::arg("device") = py::none(),
           "UntypedStorage(size=0, *, device=None) or UntypedStorage(sequence of ints): zero-filled bytes.")
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
      .def_property(
          "version", [](const Storage& s) { return s.version(); },
          [](Storage& s, int64_t v) { s.counter()->value = v; },
          "The default version counter's value (tensors given a counter of their own do not read it).")
      .def_readwrite("inference", &Storage::inference)
      .def(
          "share_memory_",
          [](std::shared_ptr<Storage> self) {
            // Beyond pybind's holder and this argument, a reference means C++ code holds the
            // storage and may read the old memory: keep it alive (PyTorch frees it at once).
            share_storage(*self, self.use_count() > 2);
            return self;
          },
          "Moves the data into shared memory in place (a no-op when it is there already).")
      .def("is_shared", [](const Storage& s) { return s.shm_fd >= 0; })
      .def_property_readonly("shm_fd", [](const Storage& s) { return s.shm_fd; },
                             "The memfd backing a shared storage (-1 if not shared), to send to another process.")
      .def_static("from_shm_fd", &Storage::from_shm_fd, py::arg("fd"), py::arg("nbytes"),
                  "Maps a shared storage from a memfd (duplicated; the caller keeps its fd).")
      .def_static(
          "_wrap_buffer",
          [](py::object obj) {
            // A memoryview holds the buffer export for as long as the storage lives.
            PyObject* mv = PyMemoryView_FromObject(obj.ptr());
            if (!mv) throw py::error_already_set();
            py::object view = py::reinterpret_steal<py::object>(mv);
            Py_buffer* b = PyMemoryView_GET_BUFFER(mv);
            if (!PyBuffer_IsContiguous(b, 'C')) throw std::invalid_argument("frombuffer: the buffer is not contiguous");
            auto s = std::make_shared<Storage>();
            s->data = static_cast<char*>(b->buf);
            s->nbytes = static_cast<int64_t>(b->len);
            bool readonly = b->readonly != 0;
            s->keepalive = std::move(view);
            return py::make_tuple(s, readonly);
          },
          py::arg("obj"), "Wraps an object's buffer (Python buffer protocol) without copying: (storage, readonly).")
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
      .def(
          "resize_",
          [](std::shared_ptr<Storage> self, int64_t nbytes) {
            // Beyond pybind's holder and this argument, a reference means C++ code (a DLPack
            // consumer) holds the storage and may read the old memory: keep it alive.
            self->resize(nbytes, self.use_count() > 2);
            return self;
          },
          py::arg("size"), "Resizes the storage to `size` bytes in place (kept bytes copied, new ones zero).")
      .def(
          "__getitem__",
          [](std::shared_ptr<Storage> self, py::object index) -> py::object {
            if (PySlice_Check(index.ptr())) {
              auto [start, stop] = byte_range(*self, py::reinterpret_borrow<py::slice>(index));
              if (self->device == "meta") return py::cast(Storage::meta(stop - start));
              // A storage over the same bytes, as PyTorch's: the parent counts it as an export.
              auto view = std::make_shared<Storage>();
              view->data = self->data + start;
              view->nbytes = stop - start;
              view->keepalive = py::cast(self);
              self->exports += 1;
              view->on_free = [self]() { self->exports -= 1; };
              return py::cast(view);
            }
            if (!PyLong_Check(index.ptr()) || PyBool_Check(index.ptr()))
              throw py::type_error(std::string("can't index a ember.UntypedStorage with ") + Py_TYPE(index.ptr())->tp_name);
            int64_t j = byte_index(*self, index.cast<int64_t>());
            check_has_memory(*self, "__getitem__");
            return py::int_(static_cast<uint8_t>(self->data[j]));
          })
      .def("__setitem__",
           [](Storage& self, py::object index, py::object value) {
             int64_t start, stop;
             if (PySlice_Check(index.ptr())) {
               std::tie(start, stop) = byte_range(self, py::reinterpret_borrow<py::slice>(index));
             } else if (PyLong_Check(index.ptr()) && !PyBool_Check(index.ptr())) {
               start = byte_index(self, index.cast<int64_t>());
               stop = start + 1;
             } else {
               throw py::type_error(std::string("can't index a ember.UntypedStorage with ") + Py_TYPE(index.ptr())->tp_name);
             }
             uint8_t v = byte_value(value);
             check_has_memory(self, "__setitem__");
             if (stop > start) std::memset(self.data + start, v, static_cast<size_t>(stop - start));
           })
      .def("tolist",
           [](const Storage& self) {
             check_has_memory(self, "tolist");
             py::list out(static_cast<size_t>(self.nbytes));
             for (int64_t i = 0; i < self.nbytes; ++i)
               out[static_cast<size_t>(i)] = py::int_(static_cast<uint8_t>(self.data[i]));
             return out;
           })
      .def(
          "fill_",
          [](std::shared_ptr<Storage> self, py::object value) {
            uint8_t v = byte_value(value);
            check_has_memory(*self, "fill_");
            if (self->nbytes) std::memset(self->data, v, static_cast<size_t>(self->nbytes));
            return self;
          },
          py::arg("value"))
      .def("clone",
           [](const Storage& self) {
             if (self.device == "meta") return Storage::meta(self.nbytes);
             auto s = Storage::allocate(self.nbytes, false);
             if (self.nbytes) std::memcpy(s->data, self.data, static_cast<size_t>(self.nbytes));
             return s;
           })
      .def("__deepcopy__", [](py::object self, py::object) { return self.attr("clone")(); })
      .def("__copy__", [](py::object self) { return self; })
      .def(py::pickle(
          [](const Storage& self) -> py::tuple {
            if (self.device == "meta") return py::make_tuple(py::none(), self.nbytes);
            return py::make_tuple(py::bytes(self.data ? self.data : "", static_cast<size_t>(self.nbytes)), self.nbytes);
          },
          [](py::tuple state) {
            if (state.size() != 2) throw std::runtime_error("UntypedStorage: invalid pickled state");
            int64_t n = state[1].cast<int64_t>();
            if (state[0].is_none()) return Storage::meta(n);
            std::string bytes = state[0].cast<std::string>();
            if (static_cast<int64_t>(bytes.size()) != n) throw std::runtime_error("UntypedStorage: invalid pickled state");
            auto s = Storage::allocate(n, false);
            if (n) std::memcpy(s->data, bytes.data(), static_cast<size_t>(n));
            return s;
          }))
      .def("element_size", [](const Storage&) { return 1; })
      .def("untyped", [](std::shared_ptr<Storage> self) { return self; })
      .def_property_readonly("device", [](const Storage& s) { return py::module_::import("ember").attr("device")(s.device); })
      .def_property_readonly("is_cuda", [](const Storage&) { return false; })
      .def_property_readonly("is_meta", [](const Storage& s) { return s.device == "meta"; })
      .def_property_readonly("is_sparse", [](const Storage&) { return false; })
      .def("is_pinned", [](const Storage&, py::object) { return false; }, py::arg("device") = "cuda")
      .def("get_device", [](const Storage&) { return -1; })
      .def("resizable", [](const Storage& s) { return s.shm_fd < 0 && (s.owns || s.device == "meta"); })
      .def_property_readonly("_cdata", [](const Storage& s) { return reinterpret_cast<uintptr_t>(&s); },
                             "An id of the storage object (PyTorch's StorageImpl address).")
      .def("__repr__",
           [](const Storage& s) {
             std::string out;
             if (s.device != "meta") {
               for (int64_t i = 0; i < s.nbytes; ++i) out += " " + std::to_string(static_cast<uint8_t>(s.data[i])) + "\n";
             } else {
               out = "...\n";
             }
             return out + "[ember.storage.UntypedStorage(device=" + s.device + ") of size " + std::to_string(s.nbytes) + "]";
           });
  // The buffer protocol by hand (not def_buffer): exports are counted for resize_.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_buffer.bf_getbuffer = storage_getbuffer;
  heap->as_buffer.bf_releasebuffer = storage_releasebuffer;
  heap->ht_type.tp_as_buffer = &heap->as_buffer;
}

}  // namespace ember
