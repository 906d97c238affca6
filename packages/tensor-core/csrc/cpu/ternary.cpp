// Three-operand elementwise ops: where(cond, a, b). (lerp is in fused_pointwise.cpp.)
#include <pybind11/pybind11.h>

#include <cstring>
#include <type_traits>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

// where() with a contiguous result and operands that are each either contiguous of its shape or a
// single element (where(cond, 0, grad) in backward formulas): one branch-free loop per combination,
// which the compiler vectorizes; the strided loop mispredicts on a random condition.
// c ? x : y as bit masking for 4- and 8-byte types: GCC vectorizes this form, not a select on bool.
template <typename T>
inline T select(unsigned char c, T x, T y) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
    const I m = -static_cast<I>(c != 0);
    I xb, yb;
    std::memcpy(&xb, &x, sizeof(T));
    std::memcpy(&yb, &y, sizeof(T));
    const I r = (xb & m) | (yb & ~m);
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
  } else {
    return c ? x : y;
  }
}

template <typename T>
bool where_dense(const TensorArg& out, const TensorArg& cond, const TensorArg& a, const TensorArg& b) {
  if (!out.is_contiguous()) return false;
  auto kind = [&](const TensorArg& t) {  // 0: dense like out, 1: one element, -1: other
    if (t.numel() == 1) return 1;
    return t.shape == out.shape && t.is_contiguous() ? 0 : -1;
  };
  const int kc = kind(cond), ka = kind(a), kb = kind(b);
  if (kc < 0 || ka < 0 || kb < 0) return false;
  T* o = reinterpret_cast<T*>(out.data);
  const unsigned char* c = reinterpret_cast<const unsigned char*>(cond.data);
  const T* x = reinterpret_cast<const T*>(a.data);
  const T* y = reinterpret_cast<const T*>(b.data);
  auto run = [&](auto c1, auto a1, auto b1) {
    constexpr bool C1 = decltype(c1)::value, A1 = decltype(a1)::value, B1 = decltype(b1)::value;
    parallel_for(out.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = select<T>(c[C1 ? 0 : i], x[A1 ? 0 : i], y[B1 ? 0 : i]);
    });
  };
  using F = std::false_type;
  using U = std::true_type;
  switch (kc * 4 + ka * 2 + kb) {
    case 0: run(F{}, F{}, F{}); break;
    case 1: run(F{}, F{}, U{}); break;
    case 2: run(F{}, U{}, F{}); break;
    case 3: run(F{}, U{}, U{}); break;
    case 4: run(U{}, F{}, F{}); break;
    case 5: run(U{}, F{}, U{}); break;
    case 6: run(U{}, U{}, F{}); break;
    default: run(U{}, U{}, U{}); break;
  }
  return true;
}

void where_impl(py::handle out_obj, py::handle cond_obj, py::handle a_obj, py::handle b_obj) {
  TensorArg out = unpack(out_obj), cond = unpack(cond_obj), a = unpack(a_obj), b = unpack(b_obj);
  if (cond.dtype != DType::Bool) throw std::invalid_argument("where expected condition to be a boolean tensor");
  check_same_dtype(a, b, "where");
  check_same_dtype(out, a, "where");
  if (out.numel() == 0) return;
  py::gil_scoped_release release;
  EMBER_DISPATCH_ALL_AND_COMPLEX(out.dtype, "where", [&] {
    if (where_dense<scalar_t>(out, cond, a, b)) return;
    ternary_loop<scalar_t, bool, scalar_t, scalar_t>(out, cond, a, b,
                                                   [](bool c, scalar_t x, scalar_t y) { return c ? x : y; });
  });
}

}  // namespace

// Entry point for the dispatcher's native fast path (common/fast_where.cpp).
void run_where_kernel(py::handle out, py::handle cond, py::handle a, py::handle b) { where_impl(out, cond, a, b); }

void bind_ternary(py::module_& m) {
  m.def("where", &where_impl, py::arg("out"), py::arg("cond"), py::arg("a"), py::arg("b"),
        "out = cond ? a : b, all broadcast to out.");
}

}  // namespace ember
