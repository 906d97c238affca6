// Kernel family "activation_backward": the input gradients of activations in one pass over
// (grad, x), where the composite formula ran ~10 elementwise ops, each a full trip through memory.
//
//   gelu_backward (exact):  grad * (Phi(x) + x * phi(x)),  Phi = 0.5 (1 + erf(x / sqrt 2)),
//                           phi = exp(-x^2 / 2) / sqrt(2 pi)
//   gelu_backward (tanh):   grad * (0.5 (1 + t) + 0.5 x (1 - t^2) k0 (1 + 3 k1 x^2)),
//                           t = tanh(k0 (x + k1 x^3)), k0 = sqrt(2 / pi), k1 = 0.044715
//
// Operands are contiguous and of one dtype (float32 or float64; the Python side converts and
// broadcasts). float32 runs whole machine vectors with the vecmath.h polynomials; the exact form
// shares one exp between erf and phi (erf's tail needs exp(-x^2 / 2) too).
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"
#include "../common/vecmath.h"

namespace py = pybind11;

namespace ember {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluKappa = 0.044715;

__attribute__((always_inline)) inline VecF gelu_grad_vec(VecF g, VecF x) {
  const VecF z = x * float(kInvSqrt2);
  const VecF e = exp_vec(-(z * z));  // exp(-x^2 / 2)
  const VecF cdf = 0.5f * (1.0f + erf_with_exp(z, e));
  return g * (cdf + x * (e * float(kInvSqrt2Pi)));
}

__attribute__((always_inline)) inline VecF gelu_tanh_grad_vec(VecF g, VecF x) {
  const VecF x2 = x * x;
  const VecF t = tanh_vec(float(kSqrt2OverPi) * (x + float(kGeluKappa) * x2 * x));
  const VecF d_inner = float(kSqrt2OverPi) * (1.0f + float(3.0 * kGeluKappa) * x2);
  return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner);
}

template <typename T>
inline T gelu_grad_scalar(T g, T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2)));
  const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
  return g * (cdf + x * pdf);
}

template <typename T>
inline T gelu_tanh_grad_scalar(T g, T x) {
  const T x2 = x * x;
  const T t = std::tanh(T(kSqrt2OverPi) * (x + T(kGeluKappa) * x2 * x));
  const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3.0 * kGeluKappa) * x2);
  return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * d_inner);
}

// out[i] = vf(g[i], x[i]) over whole vectors, sf on the tail.
template <typename V, typename S>
void map2_f32(float* o, const float* g, const float* x, int64_t n, V vf, S sf) {
  int64_t i = 0;
  for (; i + kVecFloats <= n; i += kVecFloats) {
    VecF vg, vx;
    std::memcpy(&vg, g + i, sizeof(VecF));
    std::memcpy(&vx, x + i, sizeof(VecF));
    VecF r = vf(vg, vx);
    std::memcpy(o + i, &r, sizeof(VecF));
  }
  for (; i < n; ++i) o[i] = sf(g[i], x[i]);
}

void gelu_backward_impl(py::handle out_obj, py::handle grad_obj, py::handle x_obj, bool tanh_form) {
  TensorArg out = unpack(out_obj), g = unpack(grad_obj), x = unpack(x_obj);
  if (out.dtype != x.dtype || g.dtype != x.dtype)
    throw std::invalid_argument("gelu_backward: operands must have one dtype");
  if (!out.is_contiguous() || !g.is_contiguous() || !x.is_contiguous() || out.shape != x.shape ||
      g.shape != x.shape)
    throw std::invalid_argument("gelu_backward: operands must be contiguous and of one shape");
  const int64_t n = x.numel();
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(x.dtype, "gelu_backward", [&] {
    using T = scalar_t;
    T* o = reinterpret_cast<T*>(out.data);
    const T* gp = reinterpret_cast<const T*>(g.data);
    const T* xp = reinterpret_cast<const T*>(x.data);
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        // (Casts: this branch is compiled for double too, outside any template.)
        float* of = reinterpret_cast<float*>(o) + b;
        const float* gf = reinterpret_cast<const float*>(gp) + b;
        const float* xf = reinterpret_cast<const float*>(xp) + b;
        if (tanh_form)
          map2_f32(of, gf, xf, e - b, [](VecF u, VecF v) { return gelu_tanh_grad_vec(u, v); },
                   [](float u, float v) { return gelu_tanh_grad_scalar<float>(u, v); });
        else
          map2_f32(of, gf, xf, e - b, [](VecF u, VecF v) { return gelu_grad_vec(u, v); },
                   [](float u, float v) { return gelu_grad_scalar<float>(u, v); });
      } else {
        for (int64_t i = b; i < e; ++i)
          o[i] = tanh_form ? gelu_tanh_grad_scalar<T>(gp[i], xp[i]) : gelu_grad_scalar<T>(gp[i], xp[i]);
      }
    });
  });
}

}  // namespace

void bind_activation_backward(py::module_& m) {
  m.def("gelu_backward", &gelu_backward_impl, py::arg("out"), py::arg("grad"), py::arg("x"), py::arg("tanh"),
        "out = d gelu(x)/dx * grad over contiguous operands of one float dtype and shape.");
}

}  // namespace ember
