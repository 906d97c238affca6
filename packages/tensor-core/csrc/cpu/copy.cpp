// copy_ (with dtype conversion and broadcasting) and fill_: the kernels behind .to(),
// .contiguous(), clone(), zeros/ones/full and every dtype cast.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
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

// PyTorch's linspace: the first half counts up from start, the second half down from end.
void linspace_impl(py::handle out_obj, double start, double end, double step) {
  TensorArg out = unpack(out_obj);
  if (out.dtype != DType::Float64 || out.ndim() != 1 || !out.is_contiguous())
    throw std::invalid_argument("linspace: out must be a contiguous float64 vector");
  int64_t n = out.numel();
  auto* p = reinterpret_cast<double*>(out.data);
  int64_t half = n / 2;
  for (int64_t i = 0; i < n; ++i)
    p[i] = i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(n - 1 - i);
}

}  // namespace

void bind_fill(py::module_& m) {
  m.def("iota", &iota_impl, py::arg("out"), py::arg("start"), py::arg("step"));
  m.def("linspace", &linspace_impl, py::arg("out"), py::arg("start"), py::arg("end"), py::arg("step"));
}

}  // namespace ember
