// Kernel family "index": advanced indexing (gather / index_put), nonzero and masked copies.
//
// Advanced indexing runs in two passes. index_offsets validates every index value against
// its dim size (negative values wrap) and turns the broadcast index tensors into one int64
// element offset per index position; no data is touched before all of them are checked.
// index_gather / index_put then walk the result shape with the shared strided machinery:
// the source (or destination) is viewed with size-1 dims where the index dims go and the
// offsets with size-1 dims everywhere else, so both broadcast over the result.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

#include "../common/dtype.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

constexpr int64_t kSerial = INT64_MAX;  // a grain that keeps run_strided on one thread

template <typename I>
void add_offsets(const TensorArg& off, const TensorArg& idx, int64_t size, int64_t stride, int64_t dim, bool wrap) {
  auto p = coalesce<2>(off.shape, {off.data, idx.data},
                       {byte_strides(off.strides, 8), byte_strides(broadcast_strides(idx, off.shape), sizeof(I))});
  // Serial so that the first bad index raises directly (no exception leaves an OpenMP region).
  run_strided<2>(p, kSerial, [&](std::array<char*, 2>& ptrs, const std::array<int64_t, 2>& s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = static_cast<int64_t>(*reinterpret_cast<const I*>(ptrs[1] + i * s[1]));
      if (size == 0) throw std::out_of_range("index is out of bounds for dimension with size 0");
      if (v < (wrap ? -size : 0) || v >= size)
        throw std::out_of_range("index " + std::to_string(v) + " is out of bounds for dimension " +
                                std::to_string(dim) + " with size " + std::to_string(size));
      if (v < 0) v += size;
      *reinterpret_cast<int64_t*>(ptrs[0] + i * s[0]) += v * stride;
    }
  });
}

// off (contiguous int64, the broadcast index shape) = sum_k wrap(indices[k]) * stride[dims[k]].
// Without `wrap`, negative indices are out of range (index_select).
void index_offsets(py::handle off_obj, py::handle src_obj, const py::list& indices, const std::vector<int64_t>& dims,
                   bool wrap) {
  TensorArg off = unpack(off_obj);
  TensorArg src = unpack(src_obj);
  if (off.dtype != DType::Int64 || (off.numel() > 0 && !off.is_contiguous()))
    throw std::invalid_argument("index: bad offsets tensor");
  if (indices.size() != dims.size())
    throw std::invalid_argument("index: indices and dims differ in length");
  std::vector<TensorArg> args;
  for (py::handle h : indices) args.push_back(unpack(h));
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 0 || dims[k] >= src.ndim()) throw std::out_of_range("index: dim out of range");
    if (args[k].dtype != DType::Int64 && args[k].dtype != DType::Int32)
      throw std::out_of_range("tensors used as indices must be long, int, byte or bool tensors");
    broadcast_strides(args[k], off.shape);  // validates the shape before any write
  }
  int64_t n = off.numel();
  py::gil_scoped_release release;
  if (n == 0) return;
  std::memset(off.data, 0, static_cast<size_t>(n) * 8);
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t size = src.shape[dims[k]], stride = src.strides[dims[k]];
    if (args[k].dtype == DType::Int64)
      add_offsets<int64_t>(off, args[k], size, stride, dims[k], wrap);
    else
      add_offsets<int32_t>(off, args[k], size, stride, dims[k], wrap);
  }
}

// The bytes [lo, hi) every element access must stay in.
struct Bounds {
  const char* lo;
  const char* hi;
  bool ok(const char* p, int64_t item) const { return p >= lo && p + item <= hi; }
};

Bounds bounds_of(const TensorArg& t) {
  const char* lo = t.storage->data;
  return {lo, lo ? lo + t.storage->nbytes : lo};
}

// out[i] = src[i + off[i]]: src and off broadcast to out's shape.
void index_gather(py::handle out_obj, py::handle src_obj, py::handle off_obj) {
  TensorArg out = unpack(out_obj);
  TensorArg src = unpack(src_obj);
  TensorArg off = unpack(off_obj);
  if (src.dtype != out.dtype || off.dtype != DType::Int64 || src.ndim() != out.ndim() || off.ndim() != out.ndim())
    throw std::invalid_argument("index_gather: mismatched operands");
  if (out.numel() == 0) return;
  const int64_t item = out.elem_size();
  auto p = coalesce<3>(out.shape, {out.data, src.data, off.data},
                       {byte_strides(out.strides, item), byte_strides(broadcast_strides(src, out.shape), item),
                        byte_strides(broadcast_strides(off, out.shape), 8)});
  const Bounds b = bounds_of(src);
  std::atomic<bool> bad{false};
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL_AND_COMPLEX(out.dtype, "index", [&] {
    run_strided<3>(p, kGrainSize, [&](std::array<char*, 3>& ptrs, const std::array<int64_t, 3>& s, int64_t n) {
      if (s[2] == 0) {  // one offset for the whole run (indexing outer dims): a strided row copy
        const char* q0 = ptrs[1] + *reinterpret_cast<const int64_t*>(ptrs[2]) * item;
        const char* q1 = q0 + (n - 1) * s[1];
        if (!b.ok(std::min(q0, q1), item) || !b.ok(std::max(q0, q1), item)) {
          bad = true;
          return;
        }
        if (s[0] == item && s[1] == item) {
          std::memcpy(ptrs[0], q0, static_cast<size_t>(n * item));
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<scalar_t*>(ptrs[0] + i * s[0]) = *reinterpret_cast<const scalar_t*>(q0 + i * s[1]);
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const char* q = ptrs[1] + i * s[1] + *reinterpret_cast<const int64_t*>(ptrs[2] + i * s[2]) * item;
        if (!b.ok(q, item)) {
          bad = true;
          continue;
        }
        *reinterpret_cast<scalar_t*>(ptrs[0] + i * s[0]) = *reinterpret_cast<const scalar_t*>(q);
      }
    });
  });
  if (bad) throw std::out_of_range("index: offset outside the source storage");
}

template <typename T>
T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else {
    using C = Compute<T>;
    return C::store(static_cast<typename C::type>(C::load(a) + C::load(b)));
  }
}

// dst[i + off[i]] = values[i] (or += with accumulate): dst and off broadcast to values' shape.
void index_put(py::handle dst_obj, py::handle values_obj, py::handle off_obj, bool accumulate) {
  TensorArg dst = unpack(dst_obj);
  TensorArg val = unpack(values_obj);
  TensorArg off = unpack(off_obj);
  if (dst.dtype != val.dtype || off.dtype != DType::Int64 || dst.ndim() != val.ndim() || off.ndim() != val.ndim())
    throw std::invalid_argument("index_put: mismatched operands");
  if (val.numel() == 0) return;
  const int64_t item = val.elem_size();
  auto p = coalesce<3>(val.shape, {dst.data, val.data, off.data},
                       {byte_strides(broadcast_strides(dst, val.shape), item), byte_strides(val.strides, item),
                        byte_strides(broadcast_strides(off, val.shape), 8)});
  const Bounds b = bounds_of(dst);
  std::atomic<bool> bad{false};
  // Duplicate indices make writes collide: accumulate runs on one thread so every sum counts.
  const int64_t grain = accumulate ? kSerial : kGrainSize;
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL_AND_COMPLEX(val.dtype, "index_put_", [&] {
    run_strided<3>(p, grain, [&](std::array<char*, 3>& ptrs, const std::array<int64_t, 3>& s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        char* q = ptrs[0] + i * s[0] + *reinterpret_cast<const int64_t*>(ptrs[2] + i * s[2]) * item;
        if (!b.ok(q, item)) {
          bad = true;
          continue;
        }
        scalar_t v = *reinterpret_cast<const scalar_t*>(ptrs[1] + i * s[1]);
        auto* d = reinterpret_cast<scalar_t*>(q);
        *d = accumulate ? add_values(*d, v) : v;
      }
    });
  });
  if (bad) throw std::out_of_range("index_put_: offset outside the destination storage");
}

// dst = mask ? src : dst, mask (bool) and src broadcast to dst's shape.
void masked_copy(py::handle dst_obj, py::handle mask_obj, py::handle src_obj) {
  TensorArg dst = unpack(dst_obj);
  TensorArg mask = unpack(mask_obj);
  TensorArg src = unpack(src_obj);
  if (mask.dtype != DType::Bool || src.dtype != dst.dtype) throw std::invalid_argument("masked_copy: bad dtypes");
  if (dst.numel() == 0) return;
  const int64_t item = dst.elem_size();
  auto p = coalesce<3>(dst.shape, {dst.data, mask.data, src.data},
                       {byte_strides(dst.strides, item), broadcast_strides(mask, dst.shape),
                        byte_strides(broadcast_strides(src, dst.shape), item)});
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL_AND_COMPLEX(dst.dtype, "masked_fill_", [&] {
    run_strided<3>(p, kGrainSize, [&](std::array<char*, 3>& ptrs, const std::array<int64_t, 3>& s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        if (*reinterpret_cast<const bool*>(ptrs[1] + i * s[1]))
          *reinterpret_cast<scalar_t*>(ptrs[0] + i * s[0]) = *reinterpret_cast<const scalar_t*>(ptrs[2] + i * s[2]);
      }
    });
  });
}

template <typename T>
bool is_nonzero(T v) {
  return Compute<T>::load(v) != typename Compute<T>::type(0);
}

// Visits the elements of `t` in row-major logical order: fn(pointer, multi-index).
template <typename F>
void visit(const TensorArg& t, const F& fn) {
  const int64_t nd = t.ndim(), item = t.elem_size();
  if (t.numel() == 0) return;
  std::vector<int64_t> idx(nd, 0);
  const char* ptr = t.data;
  while (true) {
    fn(ptr, idx);
    int64_t d = nd - 1;
    for (; d >= 0; --d) {
      ptr += t.strides[d] * item;
      if (++idx[d] < t.shape[d]) break;
      ptr -= t.shape[d] * t.strides[d] * item;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

int64_t count_nonzero_all(py::handle src_obj) {
  TensorArg src = unpack(src_obj);
  int64_t count = 0;
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL(src.dtype, "nonzero", [&] {
    auto p = coalesce<1>(src.shape, {src.data}, {byte_strides(src.strides, sizeof(scalar_t))});
    run_strided<1>(p, kSerial, [&](std::array<char*, 1>& ptrs, const std::array<int64_t, 1>& s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) count += is_nonzero(*reinterpret_cast<const scalar_t*>(ptrs[0] + i * s[0]));
    });
  });
  return count;
}

// out (contiguous int64 [count, ndim]) = coordinates of the nonzero elements, row-major.
void nonzero_fill(py::handle out_obj, py::handle src_obj) {
  TensorArg out = unpack(out_obj);
  TensorArg src = unpack(src_obj);
  const int64_t nd = src.ndim();
  if (out.dtype != DType::Int64 || out.ndim() != 2 || out.shape[1] != nd || (out.numel() > 0 && !out.is_contiguous()))
    throw std::invalid_argument("nonzero: bad output tensor");
  const int64_t rows = out.shape[0];
  auto* o = reinterpret_cast<int64_t*>(out.data);
  int64_t row = 0;
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL(src.dtype, "nonzero", [&] {
    visit(src, [&](const char* p, const std::vector<int64_t>& idx) {
      if (is_nonzero(*reinterpret_cast<const scalar_t*>(p))) {
        if (row < rows)
          for (int64_t d = 0; d < nd; ++d) o[row * nd + d] = idx[d];
        ++row;  // counts past `rows` too, so a wrong output size is reported
      }
    });
  });
  if (row != rows) throw std::runtime_error("nonzero: the tensor changed between count and fill");
}

}  // namespace

void bind_index(py::module_& m) {
  m.def("index_offsets", &index_offsets, py::arg("off"), py::arg("src"), py::arg("indices"), py::arg("dims"),
        py::arg("wrap") = true, "Validates index tensors and writes the element offset of each index position.");
  m.def("index_gather", &index_gather, py::arg("out"), py::arg("src"), py::arg("off"));
  m.def("index_put", &index_put, py::arg("dst"), py::arg("values"), py::arg("off"), py::arg("accumulate"));
  m.def("masked_copy", &masked_copy, py::arg("dst"), py::arg("mask"), py::arg("src"));
  m.def("count_nonzero_all", &count_nonzero_all, py::arg("src"));
  m.def("nonzero_fill", &nonzero_fill, py::arg("out"), py::arg("src"));
}

}  // namespace ember
