// Kernel family "scatter": gather, scatter with reductions (and, through expanded index
// views built in Python, index_add / index_copy / index_fill), masked_scatter.
//
// Gather and scatter walk "rows": the index shape with `dim` removed is the outer
// problem (shared strided machinery, parallel over runs of whole rows), and one thread
// walks a run's rows along `dim` (rows innermost when `dim` is not the innermost dim, for
// locality). Two index positions can only hit the same output element when they share a
// row, so scattering reductions accumulate exactly without atomics. Every index value is
// checked against the dim size before the element it addresses is touched.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../common/dtype.h"
#include "elementwise.h"
#include "rows.h"

namespace py = pybind11;

namespace ember {

namespace {

enum class Reduce : int { Assign = 0, Sum = 1, Prod = 2, Mean = 3, Amax = 4, Amin = 5 };

// After a parallel loop saw a bad index: find the first one in row-major order and raise.
template <typename I>
void raise_first_bad(const TensorArg& index, int64_t dim, int64_t size) {
  auto p = coalesce<1>(index.shape, {index.data}, {byte_strides(index.strides, sizeof(I))});
  int64_t value = 0;
  bool found = false;
  run_strided<1>(p, INT64_MAX, [&](std::array<char*, 1>& ptrs, const std::array<int64_t, 1>& s, int64_t n) {
    for (int64_t i = 0; i < n && !found; ++i) {
      int64_t v = static_cast<int64_t>(*reinterpret_cast<const I*>(ptrs[0] + i * s[0]));
      if (v < 0 || v >= size) value = v, found = true;
    }
  });
  throw std::runtime_error("index " + std::to_string(value) + " is out of bounds for dimension " +
                           std::to_string(dim) + " with size " + std::to_string(size));
}

void raise_first_bad(const TensorArg& index, int64_t dim, int64_t size) {
  if (index.dtype == DType::Int64)
    raise_first_bad<int64_t>(index, dim, size);
  else
    raise_first_bad<int32_t>(index, dim, size);
}

// Random accesses along one long row stall on memory: fetch the element kPrefetch steps ahead
// when the addressed span is too large for the caches (below that the prefetch only costs).
constexpr int64_t kPrefetch = 16;
constexpr int64_t kPrefetchBytes = 1 << 19;

template <typename T, typename I>
inline void prefetch_at(const T* base, I v, int64_t stride, int64_t limit, int write) {
  if (static_cast<uint64_t>(v) < static_cast<uint64_t>(limit)) {
    if (write)
      __builtin_prefetch(base + static_cast<int64_t>(v) * stride, 1);
    else
      __builtin_prefetch(base + static_cast<int64_t>(v) * stride, 0);
  }
}

// out[p] = self[p with p[dim] := index[p]]; out has index's shape.
void gather(py::handle out_obj, py::handle self_obj, py::handle index_obj, int64_t dim) {
  TensorArg out = unpack(out_obj), self = unpack(self_obj), index = unpack(index_obj);
  if (out.dtype != self.dtype || out.shape != index.shape || self.ndim() != index.ndim() || dim < 0 ||
      dim >= std::max<int64_t>(self.ndim(), 1))
    throw std::invalid_argument("gather: mismatched operands");
  if (index.dtype != DType::Int64 && index.dtype != DType::Int32)
    throw std::invalid_argument("gather: index must be int64 or int32");
  if (self.ndim() == 0) {  // a 0-d gather is a 1-element one
    self.shape = out.shape = index.shape = {1};
    self.strides = out.strides = index.strides = {1};
    dim = 0;
  }
  for (int64_t d = 0; d < self.ndim(); ++d)
    if (d != dim && index.shape[d] > self.shape[d]) throw std::invalid_argument("gather: index larger than self");
  if (out.numel() == 0) return;
  const int64_t item = out.elem_size(), isz = index.elem_size();
  const int64_t size = self.shape[dim], len = index.shape[dim];
  const int64_t os = out.strides[dim], is = index.strides[dim], ss = self.strides[dim];  // in elements
  std::atomic<bool> bad{false};
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL_AND_COMPLEX(out.dtype, "gather", [&] {
    auto run = [&](auto index_tag) {
      using I = decltype(index_tag);
      for_each_row_run<3>(
          index.shape, dim, {out.data, self.data, index.data},
          {byte_strides(out.strides, item), byte_strides(self.strides, item), byte_strides(index.strides, isz)},
          [&](std::array<char*, 3>& ptrs, const std::array<int64_t, 3>& s, int64_t n) {
            // Locals, not captured references: stores through scalar_t* may alias those.
            const int64_t steps = len, limit = size, os_e = os, is_e = is, ss_e = ss;
            const int64_t ro = s[0] / item, rx = s[1] / item, ri = s[2] / isz;  // between rows
            auto* o = reinterpret_cast<scalar_t*>(ptrs[0]);
            const auto* x = reinterpret_cast<const scalar_t*>(ptrs[1]);
            const auto* ip = reinterpret_cast<const I*>(ptrs[2]);
            bool ok = true;
            const bool rows_inner = n > 1 && std::abs(is_e) > std::abs(ri);
            const bool prefetch = !rows_inner && limit * std::abs(ss_e) * item > kPrefetchBytes;
            visit_run(n, steps, rows_inner, [&](int64_t r, int64_t j) {
              if (prefetch && j + kPrefetch < steps) prefetch_at(x + r * rx, ip[r * ri + (j + kPrefetch) * is_e], ss_e, limit, 0);
              const int64_t v = static_cast<int64_t>(ip[r * ri + j * is_e]);
              if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(limit)) {
                ok = false;
                return;
              }
              o[r * ro + j * os_e] = x[r * rx + v * ss_e];
            });
            if (!ok) bad = true;
          });
    };
    if (index.dtype == DType::Int64)
      run(int64_t{});
    else
      run(int32_t{});
  });
  if (bad) raise_first_bad(index, dim, size);
}

template <typename T>
struct Ops {
  static T add(T a, T b) {
    if constexpr (std::is_same_v<T, bool>)
      return a || b;
    else
      return wrapping_add(a, b);
  }
  static T mul(T a, T b) {
    if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else
      return wrapping_mul(a, b);
  }
  static bool isnan(T v) {
    if constexpr (std::is_floating_point_v<T>)
      return std::isnan(v);
    else
      return false;
  }
  static T max(T a, T b) { return isnan(b) || a < b ? b : a; }  // NaN propagates
  static T min(T a, T b) { return isnan(b) || b < a ? b : a; }
  static T identity(Reduce r) {
    switch (r) {
      case Reduce::Prod:
        return T(1);
      case Reduce::Amax:
        if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
        return std::numeric_limits<T>::lowest();
      case Reduce::Amin:
        if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
        return std::numeric_limits<T>::max();
      default:
        return T(0);
    }
  }
};

// self[p with p[dim] := index[p]] (op)= src[p] over index's shape. `counts` (int64, self's
// shape) tallies contributions for the mean; `include_self` false first resets every
// addressed element to the reduction's identity. src and counts may be None-like (numel 0).
void scatter(py::handle self_obj, int64_t dim, py::handle index_obj, py::handle src_obj, int reduce_code,
             bool include_self, py::handle counts_obj) {
  TensorArg self = unpack(self_obj), index = unpack(index_obj), src = unpack(src_obj);
  const Reduce reduce = static_cast<Reduce>(reduce_code);
  if (reduce_code < 0 || reduce_code > 5) throw std::invalid_argument("scatter: bad reduction");
  if (self.dtype != src.dtype || self.ndim() != index.ndim() || src.ndim() != index.ndim() || dim < 0 ||
      dim >= std::max<int64_t>(self.ndim(), 1))
    throw std::invalid_argument("scatter: mismatched operands");
  if (index.dtype != DType::Int64 && index.dtype != DType::Int32)
    throw std::invalid_argument("scatter: index must be int64 or int32");
  TensorArg counts;
  const bool mean = reduce == Reduce::Mean;
  if (mean) {
    counts = unpack(counts_obj);
    if (counts.dtype != DType::Int64 || counts.shape != self.shape)
      throw std::invalid_argument("scatter: bad counts tensor");
  } else {
    counts = self;  // an unused operand with valid strides
  }
  if (self.ndim() == 0) {
    self.shape = index.shape = src.shape = counts.shape = {1};
    self.strides = index.strides = src.strides = counts.strides = {1};
    dim = 0;
  }
  for (int64_t d = 0; d < self.ndim(); ++d)
    if ((d != dim && index.shape[d] > self.shape[d]) || index.shape[d] > src.shape[d])
      throw std::invalid_argument("scatter: index larger than self or src");
  if (index.numel() == 0) return;
  const int64_t item = self.elem_size(), isz = index.elem_size();
  const int64_t size = self.shape[dim], len = index.shape[dim];
  // strides along dim, in elements
  const int64_t ds = self.strides[dim], is = index.strides[dim], ss = src.strides[dim], cs = counts.strides[dim];
  std::atomic<bool> bad{false};
  py::gil_scoped_release release;
  EMBER_DISPATCH_COMPUTE(self.dtype, "scatter", [&] {
    using O = Ops<scalar_t>;
    auto run = [&](auto index_tag) {
      using I = decltype(index_tag);
      const int64_t csz = mean ? 8 : item;
      for_each_row_run<4>(
          index.shape, dim, {self.data, index.data, src.data, counts.data},
          {byte_strides(self.strides, item), byte_strides(index.strides, isz), byte_strides(src.strides, item),
           byte_strides(counts.strides, csz)},
          [&](std::array<char*, 4>& ptrs, const std::array<int64_t, 4>& s, int64_t n) {
            // Locals, not captured references: stores through scalar_t* may alias those.
            const int64_t steps = len, limit = size, ds_e = ds, is_e = is, ss_e = ss, cs_e = cs;
            const int64_t rd = s[0] / item, ri = s[1] / isz, rs = s[2] / item, rc = s[3] / csz;  // between rows
            auto* d = reinterpret_cast<scalar_t*>(ptrs[0]);
            const auto* ip = reinterpret_cast<const I*>(ptrs[1]);
            const auto* x = reinterpret_cast<const scalar_t*>(ptrs[2]);
            auto* c = reinterpret_cast<int64_t*>(ptrs[3]);
            const bool rows_inner = n > 1 && std::abs(is_e) > std::abs(ri);
            const bool prefetch = !rows_inner && limit * std::abs(ds_e) * item > kPrefetchBytes;
            bool ok = true;  // validate the whole run before writing any of it
            visit_run(n, steps, rows_inner, [&](int64_t r, int64_t j) {
              ok &= static_cast<uint64_t>(ip[r * ri + j * is_e]) < static_cast<uint64_t>(limit);
            });
            if (!ok) {
              bad = true;
              return;
            }
            if (!include_self && reduce != Reduce::Assign) {
              const scalar_t id = O::identity(reduce);
              visit_run(n, steps, rows_inner, [&](int64_t r, int64_t j) {
                const int64_t v = static_cast<int64_t>(ip[r * ri + j * is_e]);
                d[r * rd + v * ds_e] = id;
                if (mean) c[r * rc + v * cs_e] = 0;
              });
            }
            auto body = [&](auto tag) {
              constexpr Reduce R = decltype(tag)::value;
              visit_run(n, steps, rows_inner, [&](int64_t r, int64_t j) {
                if (prefetch && j + kPrefetch < steps) prefetch_at(d + r * rd, ip[r * ri + (j + kPrefetch) * is_e], ds_e, limit, 1);
                const int64_t v = static_cast<int64_t>(ip[r * ri + j * is_e]);
                scalar_t& dst = d[r * rd + v * ds_e];
                const scalar_t val = x[r * rs + j * ss_e];
                if constexpr (R == Reduce::Assign) dst = val;
                if constexpr (R == Reduce::Sum || R == Reduce::Mean) dst = O::add(dst, val);
                if constexpr (R == Reduce::Mean) ++c[r * rc + v * cs_e];
                if constexpr (R == Reduce::Prod) dst = O::mul(dst, val);
                if constexpr (R == Reduce::Amax) dst = O::max(dst, val);
                if constexpr (R == Reduce::Amin) dst = O::min(dst, val);
              });
            };
            switch (reduce) {
              case Reduce::Assign: body(std::integral_constant<Reduce, Reduce::Assign>{}); break;
              case Reduce::Sum: body(std::integral_constant<Reduce, Reduce::Sum>{}); break;
              case Reduce::Prod: body(std::integral_constant<Reduce, Reduce::Prod>{}); break;
              case Reduce::Mean: body(std::integral_constant<Reduce, Reduce::Mean>{}); break;
              case Reduce::Amax: body(std::integral_constant<Reduce, Reduce::Amax>{}); break;
              case Reduce::Amin: body(std::integral_constant<Reduce, Reduce::Amin>{}); break;
            }
          });
    };
    if (index.dtype == DType::Int64)
      run(int64_t{});
    else
      run(int32_t{});
    if (mean && !bad) {  // divide the sums by their counts (floor division for integers)
      auto p = coalesce<2>(self.shape, {self.data, counts.data},
                           {byte_strides(self.strides, item), byte_strides(counts.strides, 8)});
      run_strided<2>(p, kGrainSize, [&](std::array<char*, 2>& ptrs, const std::array<int64_t, 2>& s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          auto* d = reinterpret_cast<scalar_t*>(ptrs[0] + i * s[0]);
          int64_t c = *reinterpret_cast<const int64_t*>(ptrs[1] + i * s[1]);
          if (c <= 0) continue;
          if constexpr (std::is_floating_point_v<scalar_t>) {
            *d = static_cast<scalar_t>(*d / static_cast<scalar_t>(c));
          } else if constexpr (std::is_same_v<scalar_t, bool>) {
            // bool sums are "or": dividing leaves them as they are
          } else {
            int64_t q = static_cast<int64_t>(*d) / c, rem = static_cast<int64_t>(*d) % c;
            if (rem != 0 && ((rem < 0) != (c < 0))) --q;
            *d = static_cast<scalar_t>(q);
          }
        }
      });
    }
  });
  if (bad) raise_first_bad(index, dim, size);
}

// dst[i] = src[k++] for each i (row-major) where mask[i]; mask broadcast to dst, src contiguous.
void masked_scatter(py::handle dst_obj, py::handle mask_obj, py::handle src_obj) {
  TensorArg dst = unpack(dst_obj), mask = unpack(mask_obj), src = unpack(src_obj);
  if (mask.dtype != DType::Bool || src.dtype != dst.dtype || !src.is_contiguous())
    throw std::invalid_argument("masked_scatter: bad operands");
  if (dst.numel() == 0) return;
  const int64_t item = dst.elem_size(), available = src.numel();
  auto p = coalesce<2>(dst.shape, {dst.data, mask.data},
                       {byte_strides(dst.strides, item), broadcast_strides(mask, dst.shape)});
  py::gil_scoped_release release;
  int64_t needed = 0;  // count first: no write happens when the source is too short
  run_strided<2>(p, INT64_MAX, [&](std::array<char*, 2>& ptrs, const std::array<int64_t, 2>& s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) needed += *reinterpret_cast<const bool*>(ptrs[1] + i * s[1]);
  });
  if (needed > available) throw std::runtime_error("Number of elements of source < number of ones in mask");
  int64_t k = 0;
  const char* from = src.data;
  run_strided<2>(p, INT64_MAX, [&](std::array<char*, 2>& ptrs, const std::array<int64_t, 2>& s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (*reinterpret_cast<const bool*>(ptrs[1] + i * s[1])) {
        std::memcpy(ptrs[0] + i * s[0], from + k * item, static_cast<size_t>(item));
        ++k;
      }
    }
  });
}

}  // namespace

void bind_scatter(py::module_& m) {
  m.def("gather", &gather, py::arg("out"), py::arg("self"), py::arg("index"), py::arg("dim"),
        "out = self gathered along dim at index (out has index's shape).");
  m.def("scatter", &scatter, py::arg("self"), py::arg("dim"), py::arg("index"), py::arg("src"),
        py::arg("reduce"), py::arg("include_self"), py::arg("counts"),
        "self[index along dim] (reduce)= src; reduce: 0 assign, 1 sum, 2 prod, 3 mean, 4 amax, 5 amin.");
  m.def("masked_scatter", &masked_scatter, py::arg("dst"), py::arg("mask"), py::arg("src"),
        "Copies src's leading elements into dst where mask is true, in row-major order.");
}

}  // namespace ember
