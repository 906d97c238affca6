// copy_ (with dtype conversion and broadcasting) and fill_: the kernels behind .to(),
// .contiguous(), clone(), zeros/ones/full and every dtype cast.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <type_traits>

#include "../common/dtype.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

// Casts (Tensor.to, copy_ across dtypes). Float -> integer: NaN and out-of-range values are
// undefined behaviour in C++. PyTorch and NumPy get what x86's truncating conversions give:
// int64 targets convert through int64 and narrower ones through int32 (keeping the low bits),
// with the "integer indefinite" value (the most negative one) for NaN and anything out of that
// range. Written out here so every platform and compiler gives the same answer.
template <typename To, typename From>
inline To cast_value(From v) {
  using CF = typename Compute<From>::type;
  using CT = typename Compute<To>::type;
  if constexpr (std::is_floating_point_v<CF> && std::is_integral_v<CT> && !std::is_same_v<To, bool>) {
    CF c = Compute<From>::load(v);
    if constexpr (sizeof(CT) == 8) {
      if (!(c >= static_cast<CF>(-9.2233720368547758e18) && c < static_cast<CF>(9.2233720368547758e18)))
        return static_cast<To>(INT64_MIN);
      return static_cast<To>(static_cast<int64_t>(c));
    } else {
      int32_t w = INT32_MIN;
      if (c >= static_cast<CF>(-2147483648.0) && c < static_cast<CF>(2147483648.0)) w = static_cast<int32_t>(c);
      return static_cast<To>(static_cast<uint32_t>(w));
    }
  } else {
    return convert<To, From>(v);
  }
}

// A same-dtype copy into a contiguous dst from a src whose unit-stride dim p is not the last
// (permute(...).contiguous(), movedim, .t().contiguous()): a transpose of (shape[p], shape[last])
// planes. The generic loop walks src with the last dim's stride, touching a new cache line per
// element; tiles read and write whole lines (movedim(1, -1).contiguous() of (32, 100, 1024)
// float32: 10.6 -> 6.2 ms, where a plain copy takes 1.3 ms: there is more to gain here).
constexpr int64_t kTile = 16;
// Tile shape: kTileI src-contiguous elements by kTileJ strided ones (measured best of 16x16,
// 32x8 and 32x16 with either loop order).
constexpr int64_t kTileI = 32, kTileJ = 8;

template <typename E>
void transpose_copy(E* dst, const E* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& sst,
                    int p) {
  const int nd = static_cast<int>(shape.size()), last = nd - 1;
  std::vector<int64_t> dst_st(nd, 1);
  for (int d = nd - 2; d >= 0; --d) dst_st[d] = dst_st[d + 1] * shape[d + 1];
  std::vector<int> outer;  // every dim but p and the last, walked by a counter
  int64_t count = 1;
  for (int d = 0; d < last; ++d) {
    if (d == p) continue;
    outer.push_back(d);
    count *= shape[d];
  }
  const int64_t rows = shape[p], cols = shape[last], sc = sst[last], dp = dst_st[p];
  parallel_for(count, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t so = 0, dof = 0, rem = b;
      for (int k = static_cast<int>(outer.size()) - 1; k >= 0; --k) {
        const int d = outer[k];
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        so += i * sst[d];
        dof += i * dst_st[d];
      }
      for (int64_t i0 = 0; i0 < rows; i0 += kTileI) {
        const int64_t i1 = std::min(rows, i0 + kTileI);
        for (int64_t j0 = 0; j0 < cols; j0 += kTileJ) {
          const int64_t j1 = std::min(cols, j0 + kTileJ);
          for (int64_t i = i0; i < i1; ++i) {
            E* dr = dst + dof + i * dp;
            const E* sr = src + so + i;
            for (int64_t j = j0; j < j1; ++j) dr[j] = sr[j * sc];
          }
        }
      }
    }
  });
}

// The unit-stride dim of src when transpose_copy applies, else -1.
int transposed_dim(const TensorArg& dst, const TensorArg& src) {
  const int nd = static_cast<int>(src.ndim());
  if (nd < 2 || dst.dtype != src.dtype || dst.shape != src.shape || !dst.is_contiguous()) return -1;
  if (src.shape[nd - 1] < kTile || src.strides[nd - 1] == 1) return -1;
  for (int d = 0; d < nd - 1; ++d) {
    if (src.strides[d] == 1 && src.shape[d] >= kTile) return d;
  }
  return -1;
}

template <typename To>
void copy_from(const TensorArg& dst, const TensorArg& src) {
  EMBER_DISPATCH_ALL_AND_COMPLEX(src.dtype, "copy_", [&] {
    using From = scalar_t;
    unary_loop<To, From>(dst, src, [](From v) { return cast_value<To, From>(v); });
  });
}

void copy_impl(py::handle dst_obj, py::handle src_obj) {
  TensorArg dst = unpack(dst_obj);
  TensorArg src = unpack(src_obj);
  if (dst.numel() == 0) return;
  if (dst.dtype == src.dtype && dst.shape == src.shape && dst.is_contiguous() && src.is_contiguous()) {
    int64_t nbytes = dst.numel() * dst.elem_size();
    char* d = dst.data;
    const char* s = src.data;
    if (d == s) return;
    parallel_for(nbytes, 1 << 20, [&](int64_t b, int64_t e) { std::memmove(d + b, s + b, static_cast<size_t>(e - b)); });
    return;
  }
  py::gil_scoped_release release;
  const int p = transposed_dim(dst, src);
  if (p >= 0) {
    const std::vector<int64_t>& sh = src.shape;
    switch (src.elem_size()) {
      case 1: return transpose_copy((uint8_t*)dst.data, (const uint8_t*)src.data, sh, src.strides, p);
      case 2: return transpose_copy((uint16_t*)dst.data, (const uint16_t*)src.data, sh, src.strides, p);
      case 4: return transpose_copy((uint32_t*)dst.data, (const uint32_t*)src.data, sh, src.strides, p);
      case 8: return transpose_copy((uint64_t*)dst.data, (const uint64_t*)src.data, sh, src.strides, p);
      default: break;
    }
  }
  EMBER_DISPATCH_ALL_AND_COMPLEX(dst.dtype, "copy_", [&] { copy_from<scalar_t>(dst, src); });
}

template <typename T>
T scalar_as(py::handle value) {
  if (PyBool_Check(value.ptr())) return convert<T, bool>(value.cast<bool>());
  if (PyLong_Check(value.ptr())) {
    // Python ints beyond int64 wrap like PyTorch's integer overflow on the same path.
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow) {
      if constexpr (std::is_floating_point_v<typename Compute<T>::type> || is_complex_v<T>)
        return convert<T, double>(PyLong_AsDouble(value.ptr()));
      throw std::overflow_error("value cannot be converted to an integer type without overflow");
    }
    return convert<T, int64_t>(static_cast<int64_t>(v));
  }
  if (PyFloat_Check(value.ptr())) return convert<T, double>(value.cast<double>());
  if (PyComplex_Check(value.ptr())) {
    c128 c(PyComplex_RealAsDouble(value.ptr()), PyComplex_ImagAsDouble(value.ptr()));
    return convert<T, c128>(c);
  }
  // A NumPy scalar: PyTorch takes it as the number it holds (a NumPy bool as a float).
  const char* type_name = Py_TYPE(value.ptr())->tp_name;
  if (std::strncmp(type_name, "numpy.", 6) == 0) {
    if (PyIndex_Check(value.ptr()) && std::strcmp(type_name, "numpy.bool") != 0 &&
        std::strcmp(type_name, "numpy.bool_") != 0) {
      py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
      if (!index) throw py::error_already_set();
      return scalar_as<T>(index);
    }
    if (PyComplex_Check(value.ptr()) || std::strstr(type_name, "complex") != nullptr) {
      Py_complex c = PyComplex_AsCComplex(value.ptr());
      if (PyErr_Occurred()) throw py::error_already_set();
      return convert<T, c128>(c128(c.real, c.imag));
    }
    double v = PyFloat_AsDouble(value.ptr());
    if (PyErr_Occurred()) throw py::error_already_set();
    return convert<T, double>(v);
  }
  throw py::type_error("fill value must be a bool, int, float or complex");
}

void fill_impl(py::handle dst_obj, py::handle value) {
  TensorArg dst = unpack(dst_obj);
  EMBER_DISPATCH_ALL_AND_COMPLEX(dst.dtype, "fill_", [&] {
    scalar_t v = scalar_as<scalar_t>(value);
    // The value itself, broadcast, is the loop's input: reading dst instead (fresh, uninitialized
    // memory) loaded invalid bools, which is undefined behaviour (UBSan).
    TensorArg src;
    src.dtype = dst.dtype;
    src.data = reinterpret_cast<char*>(&v);
    py::gil_scoped_release release;
    unary_loop<scalar_t, scalar_t>(dst, src, [](scalar_t x) { return x; });
  });
}

}  // namespace

// Exposed for other kernel files.
void copy_tensor(py::handle dst, py::handle src) { copy_impl(dst, src); }

void bind_copy(py::module_& m) {
  m.def("copy_", &copy_impl, py::arg("dst"), py::arg("src"),
        "Copies src into dst, converting dtype and broadcasting src to dst's shape.");
  m.def("fill_", &fill_impl, py::arg("dst"), py::arg("value"), "Fills dst with a Python scalar.");
}

}  // namespace ember

namespace ember {

namespace {

// out[i] = start + i * step on a contiguous int64 or float64 vector (arange's exact pass).
void iota_impl(py::handle out_obj, py::handle start, py::handle step) {
  TensorArg out = unpack(out_obj);
  if (out.ndim() != 1 || !out.is_contiguous()) throw std::invalid_argument("iota: out must be a contiguous vector");
  int64_t n = out.numel();
  if (out.dtype == DType::Int64) {
    int64_t s = start.cast<int64_t>(), d = step.cast<int64_t>();
    auto* p = reinterpret_cast<int64_t*>(out.data);
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = s + i * d;
    });
  } else if (out.dtype == DType::Float64) {
    double s = start.cast<double>(), d = step.cast<double>();
    auto* p = reinterpret_cast<double*>(out.data);
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = s + static_cast<double>(i) * d;
    });
  } else {
    throw std::invalid_argument("iota: out must be int64 or float64");
  }
}

// PyTorch's linspace: the first half counts up from start, the second half down from end, each
// value one fused multiply-add in the result's dtype (float32 values computed in float64 and
// rounded differ in the last bit, and the middle of linspace(-1, 1, 7) would be +5.6e-17 where
// PyTorch has -3.0e-8: relu masks and signs there differ).
template <typename T>
void linspace_fill(T* p, int64_t n, T start, T end, T step) {
  int64_t half = n / 2;
  for (int64_t i = 0; i < n; ++i)
    p[i] = i < half ? std::fma(step, static_cast<T>(i), start) : std::fma(-step, static_cast<T>(n - 1 - i), end);
}

void linspace_impl(py::handle out_obj, double start, double end, double step) {
  TensorArg out = unpack(out_obj);
  if ((out.dtype != DType::Float64 && out.dtype != DType::Float32) || out.ndim() != 1 || !out.is_contiguous())
    throw std::invalid_argument("linspace: out must be a contiguous float32 or float64 vector");
  int64_t n = out.numel();
  if (out.dtype == DType::Float64) {
    linspace_fill(reinterpret_cast<double*>(out.data), n, start, end, step);
  } else {
    // The step too is float32 arithmetic: (end - start) / (steps - 1) over float32 operands.
    float s = static_cast<float>(start), e = static_cast<float>(end);
    float st = n > 1 ? (e - s) / static_cast<float>(n - 1) : 0.0f;
    linspace_fill(reinterpret_cast<float*>(out.data), n, s, e, st);
  }
}

}  // namespace

void bind_fill(py::module_& m) {
  m.def("iota", &iota_impl, py::arg("out"), py::arg("start"), py::arg("step"));
  m.def("linspace", &linspace_impl, py::arg("out"), py::arg("start"), py::arg("end"), py::arg("step"));
}

}  // namespace ember
