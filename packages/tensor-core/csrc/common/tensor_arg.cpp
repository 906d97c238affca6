#include "tensor_arg.h"

#include "tensor_impl.h"

#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace ember {

int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) throw std::invalid_argument("negative dimension " + std::to_string(s));
    if (s != 0 && n > INT64_MAX / s) throw std::overflow_error("tensor size overflows int64");
    n *= s;
  }
  return n;
}

int64_t TensorArg::numel() const { return checked_numel(shape); }

bool TensorArg::is_contiguous() const {
  // An empty tensor is contiguous whatever its strides (as in PyTorch and Tensor.is_contiguous):
  // Tensor.contiguous() returns it as it is, so kernels must accept it.
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = ndim() - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::vector<int64_t> to_int64_vector(py::handle seq, const char* what) {
  std::vector<int64_t> out;
  if (!PyTuple_Check(seq.ptr()) && !PyList_Check(seq.ptr()))
    throw py::type_error(std::string(what) + " must be a tuple or list of ints");
  py::sequence s = py::reinterpret_borrow<py::sequence>(seq);
  out.reserve(s.size());
  for (py::handle item : s) {
    if (!PyLong_Check(item.ptr())) throw py::type_error(std::string(what) + " must contain ints");
    out.push_back(item.cast<int64_t>());
  }
  return out;
}

namespace {
void unpack_attributes(py::handle tensor, TensorArg& arg, int64_t& offset);
void check_view(TensorArg& arg, int64_t offset);
}  // namespace

TensorArg unpack(py::handle tensor) {
  TensorArg arg;
  int64_t offset;
  auto* t = reinterpret_cast<TensorObject*>(tensor.ptr());
  if (is_tensor_base(tensor.ptr()) && t->storage_ptr != nullptr && t->shape != nullptr && t->stride != nullptr &&
      t->ndim >= 0 && t->stride_ndim == t->ndim && t->offset_ok && t->dtype != nullptr && t->dtype_code >= 0) {
    // The C struct's mirrors (tensor_impl.h): no attribute lookups.
    arg.storage = t->storage_ptr;
    arg.dtype = static_cast<DType>(t->dtype_code);
    arg.shape.assign(t->sizes, t->sizes + t->ndim);
    arg.strides.assign(t->strides, t->strides + t->ndim);
    offset = t->offset_value;
  } else {
    unpack_attributes(tensor, arg, offset);
  }
  check_view(arg, offset);
  return arg;
}

namespace {
void unpack_attributes(py::handle tensor, TensorArg& arg, int64_t& offset) {
  // Interned once and never released: a static py::str would be decref'd by a C++ static
  // destructor after the interpreter has finalized (a crash at exit).
  static const py::handle s_storage = PyUnicode_InternFromString("_storage"),
                          s_offset = PyUnicode_InternFromString("_offset"),
                          s_shape = PyUnicode_InternFromString("_shape"),
                          s_stride = PyUnicode_InternFromString("_stride"),
                          s_dtype = PyUnicode_InternFromString("dtype"), s_code = PyUnicode_InternFromString("_code");
  py::object storage_obj = tensor.attr(s_storage);
  if (storage_obj.is_none()) throw py::type_error("expected an ember.Tensor with storage");
  auto* storage = storage_obj.cast<Storage*>();
  arg.storage = storage;
  arg.dtype = dtype_from_code(tensor.attr(s_dtype).attr(s_code).cast<int>());
  arg.shape = to_int64_vector(tensor.attr(s_shape), "shape");
  arg.strides = to_int64_vector(tensor.attr(s_stride), "stride");
  offset = tensor.attr(s_offset).cast<int64_t>();
}

void check_view(TensorArg& arg, int64_t offset) {
  Storage* storage = arg.storage;
  if (arg.shape.size() != arg.strides.size()) throw std::invalid_argument("shape and stride ranks differ");
  // A sanity bound only (PyTorch has no dimension limit on the CPU); kMaxDims bounds DLPack imports.
  constexpr size_t kMaxTensorDims = 4096;
  if (arg.shape.size() > kMaxTensorDims) throw std::invalid_argument("too many dimensions");
  int64_t numel = checked_numel(arg.shape);
  int64_t item = itemsize(arg.dtype);
  if (numel > 0) {
    // The lowest and highest element addresses must lie in [0, nbytes). Every step is checked
    // for int64 overflow: a huge stride must not wrap around into a "valid" address.
    int64_t lo = offset, hi = offset, end = 0;
    bool overflow = false;
    for (size_t d = 0; d < arg.shape.size(); ++d) {
      int64_t extent = 0;
      overflow |= __builtin_mul_overflow(arg.strides[d], arg.shape[d] - 1, &extent);
      overflow |= extent >= 0 ? __builtin_add_overflow(hi, extent, &hi) : __builtin_add_overflow(lo, extent, &lo);
    }
    overflow |= __builtin_add_overflow(hi, int64_t{1}, &end) || __builtin_mul_overflow(end, item, &end);
    if (overflow || lo < 0 || end > storage->nbytes)
      throw std::out_of_range("tensor view exceeds its storage (offset " + std::to_string(offset) +
                              ", storage of " + std::to_string(storage->nbytes) + " bytes)");
    if (storage->data == nullptr) throw std::invalid_argument("tensor has no data (meta device?)");
  }
  arg.data = storage->data ? storage->data + offset * item : nullptr;
}
}  // namespace

std::vector<int64_t> broadcast_strides(const TensorArg& arg, const std::vector<int64_t>& shape) {
  int64_t nd = static_cast<int64_t>(shape.size());
  int64_t ad = arg.ndim();
  if (ad > nd) throw std::invalid_argument("cannot broadcast a tensor to fewer dimensions");
  std::vector<int64_t> strides(nd, 0);
  for (int64_t i = 0; i < ad; ++i) {
    int64_t d = nd - ad + i;
    if (arg.shape[i] == shape[d]) {
      strides[d] = arg.strides[i];
    } else if (arg.shape[i] == 1) {
      strides[d] = 0;
    } else {
      throw std::invalid_argument("shape mismatch: size " + std::to_string(arg.shape[i]) +
                                  " cannot broadcast to size " + std::to_string(shape[d]));
    }
  }
  return strides;
}

}  // namespace ember
