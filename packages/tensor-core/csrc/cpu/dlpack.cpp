// Kernel family "dlpack": zero-copy exchange of tensors through DLPack capsules.
//
// The structs below follow the DLPack specification (dlpack.h, v1.0 ABI): the legacy
// DLManagedTensor travels in a capsule named "dltensor", the versioned
// DLManagedTensorVersioned in one named "dltensor_versioned". A consumer renames the
// capsule to "used_dltensor"/"used_dltensor_versioned" and becomes responsible for calling
// the deleter; a capsule that dies unconsumed calls the deleter itself.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/dtype.h"
#include "../common/storage.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

namespace ember {

namespace {

// ---- DLPack ABI ---------------------------------------------------------------------------
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL means compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

constexpr uint32_t kDLPackMajor = 1;
constexpr uint32_t kDLPackMinor = 0;
constexpr uint64_t kFlagReadOnly = 1ull << 0;
constexpr uint64_t kFlagIsCopied = 1ull << 1;

const char* const kLegacyName = "dltensor";
const char* const kLegacyUsed = "used_dltensor";
const char* const kVersionedName = "dltensor_versioned";
const char* const kVersionedUsed = "used_dltensor_versioned";

// ---- dtype mapping --------------------------------------------------------------------------
DLDataType to_dl(DType d) {
  switch (d) {
    case DType::Bool: return {kDLBool, 8, 1};
    case DType::UInt8: return {kDLUInt, 8, 1};
    case DType::Int8: return {kDLInt, 8, 1};
    case DType::Int16: return {kDLInt, 16, 1};
    case DType::Int32: return {kDLInt, 32, 1};
    case DType::Int64: return {kDLInt, 64, 1};
    case DType::Float16: return {kDLFloat, 16, 1};
    case DType::BFloat16: return {kDLBfloat, 16, 1};
    case DType::Float32: return {kDLFloat, 32, 1};
    case DType::Float64: return {kDLFloat, 64, 1};
    case DType::Complex64: return {kDLComplex, 64, 1};
    case DType::Complex128: return {kDLComplex, 128, 1};
  }
  throw std::invalid_argument("to_dlpack: unsupported dtype");
}

// Returns -1 for a type ember has no dtype for.
int from_dl(DLDataType t) {
  if (t.lanes != 1) return -1;
  switch (t.code) {
    case kDLBool: return t.bits == 8 ? static_cast<int>(DType::Bool) : -1;
    case kDLUInt: return t.bits == 8 ? static_cast<int>(DType::UInt8) : -1;
    case kDLInt:
      switch (t.bits) {
        case 8: return static_cast<int>(DType::Int8);
        case 16: return static_cast<int>(DType::Int16);
        case 32: return static_cast<int>(DType::Int32);
        case 64: return static_cast<int>(DType::Int64);
        default: return -1;
      }
    case kDLFloat:
      switch (t.bits) {
        case 16: return static_cast<int>(DType::Float16);
        case 32: return static_cast<int>(DType::Float32);
        case 64: return static_cast<int>(DType::Float64);
        default: return -1;
      }
    case kDLBfloat: return t.bits == 16 ? static_cast<int>(DType::BFloat16) : -1;
    case kDLComplex:
      return t.bits == 64 ? static_cast<int>(DType::Complex64) : (t.bits == 128 ? static_cast<int>(DType::Complex128) : -1);
    default: return -1;
  }
}

std::string describe(DLDataType t) {
  return "code " + std::to_string(t.code) + ", bits " + std::to_string(t.bits) + ", lanes " +
         std::to_string(t.lanes);
}

// ---- producer ---------------------------------------------------------------------------------
// Owns what the DLTensor points at: the storage (kept alive until the deleter runs) and
// the shape/stride arrays.
struct ExportContext {
  StoragePtr storage;
  std::vector<int64_t> shape, strides;
  DLManagedTensor legacy{};
  DLManagedTensorVersioned versioned{};
};

void fill_dl_tensor(DLTensor& t, ExportContext* ctx, const TensorArg& arg) {
  t.data = arg.data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(arg.ndim());
  t.dtype = to_dl(arg.dtype);
  t.shape = ctx->shape.empty() ? nullptr : ctx->shape.data();
  t.strides = ctx->strides.empty() ? nullptr : ctx->strides.data();
  t.byte_offset = 0;
}

void delete_legacy(DLManagedTensor* self) { delete static_cast<ExportContext*>(self->manager_ctx); }
void delete_versioned(DLManagedTensorVersioned* self) { delete static_cast<ExportContext*>(self->manager_ctx); }

// Capsule destructors: only an unconsumed capsule still owns its tensor.
void legacy_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kLegacyName)) return;  // consumed (renamed)
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
  if (m && m->deleter) m->deleter(m);
}

void versioned_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kVersionedName)) return;
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
  if (m && m->deleter) m->deleter(m);
}

py::object to_dlpack(py::handle tensor, bool versioned, bool copied) {
  TensorArg arg = unpack(tensor);
  if (arg.storage->device != "cpu") throw std::runtime_error("to_dlpack: only CPU tensors can be exported");
  auto ctx = std::make_unique<ExportContext>();
  ctx->storage = tensor.attr("_storage").cast<StoragePtr>();
  ctx->shape = arg.shape;
  ctx->strides = arg.strides;
  PyObject* capsule;
  if (versioned) {
    DLManagedTensorVersioned& m = ctx->versioned;
    m.version = {kDLPackMajor, kDLPackMinor};
    m.manager_ctx = ctx.get();
    m.deleter = &delete_versioned;
    m.flags = copied ? kFlagIsCopied : 0;
    fill_dl_tensor(m.dl_tensor, ctx.get(), arg);
    capsule = PyCapsule_New(&m, kVersionedName, &versioned_capsule_destructor);
  } else {
    DLManagedTensor& m = ctx->legacy;
    m.manager_ctx = ctx.get();
    m.deleter = &delete_legacy;
    fill_dl_tensor(m.dl_tensor, ctx.get(), arg);
    capsule = PyCapsule_New(&m, kLegacyName, &legacy_capsule_destructor);
  }
  if (!capsule) throw py::error_already_set();
  ctx.release();  // owned by the capsule (then by its consumer)
  return py::reinterpret_steal<py::object>(capsule);
}

// ---- consumer ---------------------------------------------------------------------------------
// Wraps a capsule's memory in a Storage whose release calls the producer's deleter.
// Everything is validated before the capsule is renamed, so on error the capsule still
// owns the tensor and frees it when it dies.
py::tuple from_dlpack(py::object capsule) {
  PyObject* cap = capsule.ptr();
  if (!PyCapsule_CheckExact(cap)) throw std::runtime_error("from_dlpack: expected a DLPack capsule");
  const char* name = PyCapsule_GetName(cap);
  if (!name) throw py::error_already_set();
  bool versioned;
  if (std::strcmp(name, kVersionedName) == 0) {
    versioned = true;
  } else if (std::strcmp(name, kLegacyName) == 0) {
    versioned = false;
  } else if (std::strcmp(name, kLegacyUsed) == 0 || std::strcmp(name, kVersionedUsed) == 0) {
    throw std::runtime_error(
        "from_dlpack received an invalid capsule: DLPack capsules can be consumed only once, and this one was "
        "already used");
  } else {
    throw std::runtime_error(std::string("from_dlpack: not a DLPack capsule (name '") + name + "')");
  }
  void* managed = PyCapsule_GetPointer(cap, name);
  if (!managed) throw py::error_already_set();
  DLTensor* t;
  uint64_t flags = 0;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(managed);
    if (m->version.major > kDLPackMajor)
      throw py::buffer_error("from_dlpack: DLPack version " + std::to_string(m->version.major) + "." +
                             std::to_string(m->version.minor) + " is newer than the supported 1.x");
    t = &m->dl_tensor;
    flags = m->flags;
  } else {
    t = &static_cast<DLManagedTensor*>(managed)->dl_tensor;
  }
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
    throw py::buffer_error("from_dlpack: only CPU tensors can be imported (device type " +
                           std::to_string(t->device.device_type) + ")");
  int code = from_dl(t->dtype);
  if (code < 0) throw py::type_error("from_dlpack: unsupported DLPack data type (" + describe(t->dtype) + ")");
  if (t->ndim < 0 || t->ndim > kMaxDims) throw std::invalid_argument("from_dlpack: invalid number of dimensions");
  if (t->ndim > 0 && !t->shape) throw std::invalid_argument("from_dlpack: missing shape");
  const int64_t item = itemsize(static_cast<DType>(code));
  std::vector<int64_t> shape(t->shape, t->shape + t->ndim), strides(static_cast<size_t>(t->ndim));
  int64_t numel = checked_numel(shape);
  if (t->strides) {
    for (int32_t d = 0; d < t->ndim; ++d) strides[d] = t->strides[d];
  } else {
    int64_t st = 1;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
      strides[d] = st;
      st *= shape[d];
    }
  }
  int64_t last = 0;  // highest element index reached
  for (int32_t d = 0; d < t->ndim; ++d) {
    if (shape[d] > 1 && strides[d] < 0)
      throw std::runtime_error("from_dlpack: tensors with negative strides are not supported (copy first)");
    if (shape[d] > 0) last += (shape[d] - 1) * std::max<int64_t>(strides[d], 0);
  }
  if (numel > 0 && !t->data) throw std::invalid_argument("from_dlpack: null data pointer");
  char* data = static_cast<char*>(t->data) + t->byte_offset;

  // Take ownership: from here the storage calls the deleter.
  if (PyCapsule_SetName(cap, versioned ? kVersionedUsed : kLegacyUsed) != 0) throw py::error_already_set();
  auto storage = std::make_shared<Storage>();
  storage->data = data;
  storage->nbytes = numel ? (last + 1) * item : 0;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(managed);
    storage->on_free = [m]() {
      if (!m->deleter || !Py_IsInitialized()) return;
      py::gil_scoped_acquire gil;  // producers (NumPy) may run Python code
      m->deleter(m);
    };
  } else {
    auto* m = static_cast<DLManagedTensor*>(managed);
    storage->on_free = [m]() {
      if (!m->deleter || !Py_IsInitialized()) return;
      py::gil_scoped_acquire gil;
      m->deleter(m);
    };
  }
  py::tuple py_shape(shape.size()), py_strides(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    py_shape[d] = py::int_(shape[d]);
    // A size-0/1 dimension's stride is irrelevant; producers may send anything there.
    py_strides[d] = py::int_(shape[d] > 1 ? strides[d] : std::max<int64_t>(strides[d], 0));
  }
  bool read_only = (flags & kFlagReadOnly) != 0;
  return py::make_tuple(storage, py_shape, py_strides, code, read_only);
}

}  // namespace

void bind_dlpack(py::module_& m) {
  m.def("to_dlpack", &to_dlpack, py::arg("tensor"), py::arg("versioned"), py::arg("copied") = false,
        "A DLPack capsule viewing the tensor's memory (versioned: DLManagedTensorVersioned).");
  m.def("from_dlpack", &from_dlpack, py::arg("capsule"),
        "Consumes a DLPack capsule: (storage, shape, strides, dtype code, read_only), sharing memory.");
  m.attr("dlpack_version") = py::make_tuple(kDLPackMajor, kDLPackMinor);
  m.attr("dlpack_cpu") = py::int_(static_cast<int>(kDLCPU));
}

}  // namespace ember
