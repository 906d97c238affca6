// Kernel family "optim": the fused optimizer updates behind ember._fused_adam_/_fused_adamw_/
// _fused_sgd_ (and so the foreach/fused paths of ember.optim.Adam/AdamW/SGD). One pass over
// every element of every parameter reads param, grad and state once and writes param and
// state once; the per-step scalars (bias corrections, step size) are computed per tensor in
// double, as PyTorch's optimizers compute them in Python floats.
//
// Work is split into chunks across all the tensors, so a list of many small parameters is
// spread over the threads as well as one large one.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

namespace ember {

namespace {

constexpr int64_t kChunk = 16384;

struct Chunk {
  int64_t tensor, begin, end;
};

std::vector<Chunk> chunks_of(const std::vector<int64_t>& sizes) {
  std::vector<Chunk> out;
  for (size_t t = 0; t < sizes.size(); ++t) {
    for (int64_t b = 0; b < sizes[t]; b += kChunk) out.push_back({int64_t(t), b, std::min(sizes[t], b + kChunk)});
  }
  return out;
}

// Data pointers of a list of tensors, each contiguous, of `dtype` and of numel sizes[i].
// An empty `sizes` is filled from the list (the params list sets the sizes).
std::vector<char*> list_data(py::handle seq, const char* what, DType* dtype, std::vector<int64_t>& sizes) {
  py::sequence items = py::reinterpret_borrow<py::sequence>(seq);
  const bool first = sizes.empty();
  if (!first && static_cast<size_t>(py::len(items)) != sizes.size())
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(sizes.size()) + " tensors, got " +
                                std::to_string(py::len(items)));
  std::vector<char*> out;
  out.reserve(py::len(items));
  size_t i = 0;
  for (py::handle item : items) {
    TensorArg a = unpack(item);
    if (!a.is_contiguous()) throw std::invalid_argument(std::string(what) + ": tensors must be contiguous");
    if (first && out.empty() && (a.dtype == DType::Float32 || a.dtype == DType::Float64)) *dtype = a.dtype;
    if (a.dtype != *dtype)
      throw std::invalid_argument(std::string(what) + ": expected float32 or float64 tensors of the params' dtype");
    if (first) {
      sizes.push_back(a.numel());
    } else if (a.numel() != sizes[i]) {
      throw std::invalid_argument(std::string(what) + ": tensor " + std::to_string(i) + " has " +
                                  std::to_string(a.numel()) + " elements, its param " + std::to_string(sizes[i]));
    }
    out.push_back(a.data);
    ++i;
  }
  return out;
}

// The value of a one-element float tensor (a step counter, grad_scale, found_inf).
double scalar_value(py::handle obj, const char* what) {
  TensorArg a = unpack(obj);
  if (a.numel() != 1) throw std::invalid_argument(std::string(what) + ": expected a one-element tensor");
  switch (a.dtype) {
    case DType::Float32:
      return *reinterpret_cast<float*>(a.data);
    case DType::Float64:
      return *reinterpret_cast<double*>(a.data);
    default:
      throw std::invalid_argument(std::string(what) + ": expected a float32 or float64 tensor");
  }
}

// grad_scale (divide grads by it) and found_inf (skip the update when nonzero), both optional.
bool scale_and_skip(py::handle grad_scale, py::handle found_inf, double* inv_scale) {
  *inv_scale = grad_scale.is_none() ? 1.0 : 1.0 / scalar_value(grad_scale, "grad_scale");
  return !found_inf.is_none() && scalar_value(found_inf, "found_inf") != 0.0;
}

// PyTorch's lerp: exact at both ends (weight < 0.5 measures from start, else from end).
template <typename T>
inline T lerp(T start, T end, T w) {
  return w < T(0.5) ? start + w * (end - start) : end - (end - start) * (T(1) - w);
}

struct AdamScalars {
  double step_size, bc2_sqrt;
};

// The element loop of one chunk. Flags are template parameters and every scalar a by-value
// argument, with restrict pointers: gcc then vectorizes it (scalars captured by reference may
// alias the float stores, which kept the first version scalar, 4x slower).
template <typename T, bool kMax, bool kMaximize, bool kCoupled, bool kDecoupled>
void adam_chunk(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
                int64_t n, T w1, T b2, T c2, T eps, T inv, T wd, T decay, T neg_step, T bc2) {
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i] * inv;
    if (kMaximize) gi = -gi;
    T pi = p[i];
    if (kCoupled) gi = gi + wd * pi;
    if (kDecoupled) pi = pi * decay;
    const T mi = lerp(m[i], gi, w1);
    const T vi = v[i] * b2 + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    T second = vi;
    if (kMax) {
      second = std::max(vmax[i], vi);
      vmax[i] = second;
    }
    const T denom = std::sqrt(second) / bc2 + eps;
    p[i] = pi + neg_step * (mi / denom);
  }
}

// Picks the instantiation of the four flags.
template <typename T>
auto adam_kernel(bool amsgrad, bool maximize, bool coupled, bool decoupled) {
  using F = decltype(&adam_chunk<T, false, false, false, false>);
  static const F table[16] = {
#define EMBER_ADAM_ROW(a, b) &adam_chunk<T, a, b, false, false>, &adam_chunk<T, a, b, false, true>, \
                             &adam_chunk<T, a, b, true, false>, &adam_chunk<T, a, b, true, true>
      EMBER_ADAM_ROW(false, false), EMBER_ADAM_ROW(false, true), EMBER_ADAM_ROW(true, false),
      EMBER_ADAM_ROW(true, true)
#undef EMBER_ADAM_ROW
  };
  return table[(amsgrad ? 8 : 0) + (maximize ? 4 : 0) + (coupled ? 2 : 0) + (decoupled ? 1 : 0)];
}

template <typename T>
void adam_pass(const std::vector<Chunk>& chunks, const std::vector<char*>& P, const std::vector<char*>& G,
               const std::vector<char*>& M, const std::vector<char*>& V, const std::vector<char*>& VMax,
               const std::vector<AdamScalars>& sc, double lr, double beta1, double beta2, double wd, double eps,
               bool amsgrad, bool maximize, bool decoupled, double inv_scale) {
  const auto kernel = adam_kernel<T>(amsgrad, maximize, !decoupled && wd != 0, decoupled && wd != 0);
  parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const Chunk& ch = chunks[c];
      const int64_t t = ch.tensor, b = ch.begin;
      T* vmax = amsgrad ? reinterpret_cast<T*>(VMax[t]) + b : nullptr;
      kernel(reinterpret_cast<T*>(P[t]) + b, reinterpret_cast<const T*>(G[t]) + b, reinterpret_cast<T*>(M[t]) + b,
             reinterpret_cast<T*>(V[t]) + b, vmax, ch.end - b, T(1 - beta1), T(beta2), T(1 - beta2), T(eps),
             T(inv_scale), T(wd), T(1 - lr * wd), T(-sc[t].step_size), T(sc[t].bc2_sqrt));
    }
  });
}

void fused_adam_impl(py::handle params, py::handle grads, py::handle exp_avgs, py::handle exp_avg_sqs,
                     py::handle max_exp_avg_sqs, py::handle steps, double lr, double beta1, double beta2,
                     double weight_decay, double eps, bool amsgrad, bool maximize, bool decoupled,
                     py::handle grad_scale, py::handle found_inf) {
  double inv_scale;
  if (scale_and_skip(grad_scale, found_inf, &inv_scale)) return;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  auto P = list_data(params, "_fused_adam_ params", &dtype, sizes);
  auto G = list_data(grads, "_fused_adam_ grads", &dtype, sizes);
  auto M = list_data(exp_avgs, "_fused_adam_ exp_avgs", &dtype, sizes);
  auto V = list_data(exp_avg_sqs, "_fused_adam_ exp_avg_sqs", &dtype, sizes);
  std::vector<char*> VMax;
  if (amsgrad) VMax = list_data(max_exp_avg_sqs, "_fused_adam_ max_exp_avg_sqs", &dtype, sizes);
  py::sequence step_list = py::reinterpret_borrow<py::sequence>(steps);
  if (static_cast<size_t>(py::len(step_list)) != sizes.size())
    throw std::invalid_argument("_fused_adam_: expected one step tensor per param");
  std::vector<AdamScalars> sc;
  sc.reserve(sizes.size());
  for (py::handle s : step_list) {
    const double t = scalar_value(s, "_fused_adam_ state_steps");
    sc.push_back({lr / (1 - std::pow(beta1, t)), std::sqrt(1 - std::pow(beta2, t))});
  }
  const auto chunks = chunks_of(sizes);
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(dtype, "_fused_adam_", [&] {
    adam_pass<scalar_t>(chunks, P, G, M, V, VMax, sc, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize,
                        decoupled, inv_scale);
  });
}

template <typename T, bool kMaximize, bool kDecay, int kMomentum>  // kMomentum: 0 none, 1 first step, 2 later
void sgd_chunk(T* __restrict p, const T* __restrict g, T* __restrict b, int64_t n, T lr, T mom, T keep, T wd, T inv,
               bool nesterov) {
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i] * inv;
    if (kMaximize) d = -d;
    if (kDecay) d = d + wd * p[i];
    if (kMomentum) {
      const T bi = kMomentum == 1 ? d : b[i] * mom + keep * d;
      b[i] = bi;
      d = nesterov ? d + mom * bi : bi;
    }
    p[i] = p[i] - lr * d;
  }
}

template <typename T>
auto sgd_kernel(bool maximize, bool decay, int momentum) {
  using F = decltype(&sgd_chunk<T, false, false, 0>);
  static const F table[12] = {
      &sgd_chunk<T, false, false, 0>, &sgd_chunk<T, false, false, 1>, &sgd_chunk<T, false, false, 2>,
      &sgd_chunk<T, false, true, 0>,  &sgd_chunk<T, false, true, 1>,  &sgd_chunk<T, false, true, 2>,
      &sgd_chunk<T, true, false, 0>,  &sgd_chunk<T, true, false, 1>,  &sgd_chunk<T, true, false, 2>,
      &sgd_chunk<T, true, true, 0>,   &sgd_chunk<T, true, true, 1>,   &sgd_chunk<T, true, true, 2>};
  return table[(maximize ? 6 : 0) + (decay ? 3 : 0) + momentum];
}

template <typename T>
void sgd_pass(const std::vector<Chunk>& chunks, const std::vector<char*>& P, const std::vector<char*>& G,
              const std::vector<char*>& B, double lr, double momentum, double dampening, double wd, bool nesterov,
              bool maximize, bool first_step, double inv_scale) {
  const int mode = momentum == 0 ? 0 : (first_step ? 1 : 2);
  const auto kernel = sgd_kernel<T>(maximize, wd != 0, mode);
  parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const Chunk& ch = chunks[c];
      const int64_t t = ch.tensor, b = ch.begin;
      T* buf = mode ? reinterpret_cast<T*>(B[t]) + b : nullptr;
      kernel(reinterpret_cast<T*>(P[t]) + b, reinterpret_cast<const T*>(G[t]) + b, buf, ch.end - b, T(lr),
             T(momentum), T(1 - dampening), T(wd), T(inv_scale), nesterov);
    }
  });
}

void fused_sgd_impl(py::handle params, py::handle grads, py::handle momentum_buffers, double weight_decay,
                    double momentum, double lr, double dampening, bool nesterov, bool maximize, bool first_step,
                    py::handle grad_scale, py::handle found_inf) {
  double inv_scale;
  if (scale_and_skip(grad_scale, found_inf, &inv_scale)) return;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  auto P = list_data(params, "_fused_sgd_ params", &dtype, sizes);
  auto G = list_data(grads, "_fused_sgd_ grads", &dtype, sizes);
  std::vector<char*> B;
  if (momentum != 0) B = list_data(momentum_buffers, "_fused_sgd_ momentum_buffer_list", &dtype, sizes);
  const auto chunks = chunks_of(sizes);
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(dtype, "_fused_sgd_", [&] {
    sgd_pass<scalar_t>(chunks, P, G, B, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step,
                       inv_scale);
  });
}

}  // namespace

void bind_optim(py::module_& m) {
  m.def("fused_adam", &fused_adam_impl, py::arg("params"), py::arg("grads"), py::arg("exp_avgs"),
        py::arg("exp_avg_sqs"), py::arg("max_exp_avg_sqs"), py::arg("state_steps"), py::arg("lr"), py::arg("beta1"),
        py::arg("beta2"), py::arg("weight_decay"), py::arg("eps"), py::arg("amsgrad"), py::arg("maximize"),
        py::arg("decoupled"), py::arg("grad_scale"), py::arg("found_inf"),
        "One Adam (decoupled: AdamW) update of every param, in place; steps are read, not bumped.");
  m.def("fused_sgd", &fused_sgd_impl, py::arg("params"), py::arg("grads"), py::arg("momentum_buffers"),
        py::arg("weight_decay"), py::arg("momentum"), py::arg("lr"), py::arg("dampening"), py::arg("nesterov"),
        py::arg("maximize"), py::arg("is_first_step"), py::arg("grad_scale"), py::arg("found_inf"),
        "One SGD update of every param (and momentum buffer), in place.");
}

}  // namespace ember
