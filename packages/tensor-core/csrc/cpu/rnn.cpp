// Kernel family "rnn": the pointwise part of one LSTM or GRU time step and its backward, each
// one pass over the step's gate rows (the matmuls stay in BLAS). The gate pre-activations come
// in two halves, input side (precomputed for all steps) and hidden side, summed here. Row b of a gates tensor
// holds the gate blocks side by side: LSTM (i, f, g, o), GRU (r, z, n), each `hidden` wide.
// All tensors are contiguous, of one floating dtype, with `rows` rows (checked here).
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"
#include "../common/vecmath.h"

namespace py = pybind11;

namespace ember {

namespace {

// tanh on float32, branch-free so the loops below vectorize: Cephes tanhf's odd polynomial
// below |x| = 0.625 (where 1 - 2/(e^2x + 1) would lose relative accuracy), that form above.
inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) *
                     z - 3.33332819422e-1f) * z * x + x;
  float large = 1.0f - 2.0f / (exp_f32(2.0f * ax) + 1.0f);
  large = x < 0 ? -large : large;
  return ax < 0.625f ? small : large;
}

__attribute__((noinline, target("prefer-vector-width=512"))) void tanh_f32_n(float* o, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = tanh_f32(x[i]);
}

template <typename T>
void sigmoid_n(T* o, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    sigmoid_f32_n(o, x, n);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = T(1) / (T(1) + std::exp(-x[i]));
  }
}

template <typename T>
void tanh_n(T* o, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    tanh_f32_n(o, x, n);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = std::tanh(x[i]);
  }
}

// Validates a contiguous (rows, width) tensor of `dtype` and returns its data.
char* rows_of(py::handle obj, DType dtype, int64_t rows, int64_t width, const char* what) {
  TensorArg a = unpack(obj);
  if (a.dtype != dtype || !a.is_contiguous() || a.ndim() != 2 || a.shape[0] != rows || a.shape[1] != width)
    throw std::invalid_argument(std::string(what) + ": expected a contiguous (" + std::to_string(rows) + ", " +
                                std::to_string(width) + ") tensor of the gates' dtype");
  return a.data;
}

// (rows, width) of the gates tensor, which fixes dtype, rows and hidden for the others.
TensorArg gates_of(py::handle obj, int64_t blocks, const char* what) {
  TensorArg g = unpack(obj);
  if (!g.is_contiguous() || g.ndim() != 2 || g.shape[1] % blocks != 0)
    throw std::invalid_argument(std::string(what) + ": gates must be a contiguous 2-d tensor of " +
                                std::to_string(blocks) + " equal blocks");
  if (g.dtype != DType::Float32 && g.dtype != DType::Float64)
    throw std::invalid_argument(std::string(what) + ": gates must be float32 or float64");
  return g;
}

template <typename F>
void over_rows(int64_t rows, int64_t width, const F& fn) {
  parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(width, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(r);
  });
}

// gates = input_gates + hidden_gates; acts = (sigmoid i, sigmoid f, tanh g, sigmoid o);
// c = f c_prev + i g; tanh_c; h = o tanh_c.
void lstm_forward_impl(py::handle acts_o, py::handle c_o, py::handle tanh_c_o, py::handle h_o, py::handle gates_o,
                       py::handle hidden_gates_o, py::handle c_prev_o) {
  TensorArg gates = gates_of(gates_o, 4, "lstm_cell_forward");
  int64_t rows = gates.shape[0], hidden = gates.shape[1] / 4;
  DType dt = gates.dtype;
  char* hidden_gates = rows_of(hidden_gates_o, dt, rows, 4 * hidden, "lstm_cell_forward hidden_gates");
  char* acts = rows_of(acts_o, dt, rows, 4 * hidden, "lstm_cell_forward acts");
  char* c = rows_of(c_o, dt, rows, hidden, "lstm_cell_forward c");
  char* tanh_c = rows_of(tanh_c_o, dt, rows, hidden, "lstm_cell_forward tanh_c");
  char* h = rows_of(h_o, dt, rows, hidden, "lstm_cell_forward h");
  char* c_prev = rows_of(c_prev_o, dt, rows, hidden, "lstm_cell_forward c_prev");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(dt, "lstm_cell_forward", [&] {
    using T = scalar_t;
    over_rows(rows, 4 * hidden, [&](int64_t r) {
      const T* x = reinterpret_cast<const T*>(gates.data) + r * 4 * hidden;
      const T* hh = reinterpret_cast<const T*>(hidden_gates) + r * 4 * hidden;
      T* a = reinterpret_cast<T*>(acts) + r * 4 * hidden;
      const T* cp = reinterpret_cast<const T*>(c_prev) + r * hidden;
      T* cn = reinterpret_cast<T*>(c) + r * hidden;
      T* tc = reinterpret_cast<T*>(tanh_c) + r * hidden;
      T* hn = reinterpret_cast<T*>(h) + r * hidden;
      for (int64_t j = 0; j < 4 * hidden; ++j) a[j] = x[j] + hh[j];
      sigmoid_n(a, a, 2 * hidden);
      tanh_n(a + 2 * hidden, a + 2 * hidden, hidden);
      sigmoid_n(a + 3 * hidden, a + 3 * hidden, hidden);
      const T *i = a, *f = a + hidden, *gg = a + 2 * hidden, *o = a + 3 * hidden;
      for (int64_t j = 0; j < hidden; ++j) cn[j] = f[j] * cp[j] + i[j] * gg[j];
      tanh_n(tc, cn, hidden);
      for (int64_t j = 0; j < hidden; ++j) hn[j] = o[j] * tc[j];
    });
  });
}

// Gradients of the gate pre-activations and of c_prev, from those of h and c (c's may be None).
void lstm_backward_impl(py::handle d_gates_o, py::handle d_c_prev_o, py::handle d_h_o, py::handle d_c_o,
                        py::handle acts_o, py::handle c_prev_o, py::handle tanh_c_o) {
  TensorArg acts = gates_of(acts_o, 4, "lstm_cell_backward");
  int64_t rows = acts.shape[0], hidden = acts.shape[1] / 4;
  DType dt = acts.dtype;
  char* d_gates = rows_of(d_gates_o, dt, rows, 4 * hidden, "lstm_cell_backward grad_gates");
  char* d_c_prev = rows_of(d_c_prev_o, dt, rows, hidden, "lstm_cell_backward grad_c_prev");
  char* d_h = rows_of(d_h_o, dt, rows, hidden, "lstm_cell_backward grad_h");
  char* d_c = d_c_o.is_none() ? nullptr : rows_of(d_c_o, dt, rows, hidden, "lstm_cell_backward grad_c");
  char* c_prev = rows_of(c_prev_o, dt, rows, hidden, "lstm_cell_backward c_prev");
  char* tanh_c = rows_of(tanh_c_o, dt, rows, hidden, "lstm_cell_backward tanh_c");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(dt, "lstm_cell_backward", [&] {
    using T = scalar_t;
    over_rows(rows, 4 * hidden, [&](int64_t r) {
      const T* a = reinterpret_cast<const T*>(acts.data) + r * 4 * hidden;
      const T *i = a, *f = a + hidden, *g = a + 2 * hidden, *o = a + 3 * hidden;
      const T* cp = reinterpret_cast<const T*>(c_prev) + r * hidden;
      const T* tc = reinterpret_cast<const T*>(tanh_c) + r * hidden;
      const T* dh = reinterpret_cast<const T*>(d_h) + r * hidden;
      const T* dc = d_c ? reinterpret_cast<const T*>(d_c) + r * hidden : nullptr;
      T* dg = reinterpret_cast<T*>(d_gates) + r * 4 * hidden;
      T* dcp = reinterpret_cast<T*>(d_c_prev) + r * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        T dct = (dc ? dc[j] : T(0)) + dh[j] * o[j] * (T(1) - tc[j] * tc[j]);
        dg[j] = dct * g[j] * i[j] * (T(1) - i[j]);
        dg[hidden + j] = dct * cp[j] * f[j] * (T(1) - f[j]);
        dg[2 * hidden + j] = dct * i[j] * (T(1) - g[j] * g[j]);
        dg[3 * hidden + j] = dh[j] * tc[j] * o[j] * (T(1) - o[j]);
        dcp[j] = dct * f[j];
      }
    });
  });
}

// rzn = (r, z, n) with r, z = sigmoid(x_rz + h_rz), n = tanh(x_n + r h_n); h = n + z (h_prev - n).
void gru_forward_impl(py::handle h_o, py::handle rzn_o, py::handle x_gates_o, py::handle h_gates_o,
                      py::handle h_prev_o) {
  TensorArg xg = gates_of(x_gates_o, 3, "gru_cell_forward");
  int64_t rows = xg.shape[0], hidden = xg.shape[1] / 3;
  DType dt = xg.dtype;
  char* h = rows_of(h_o, dt, rows, hidden, "gru_cell_forward h");
  char* rzn = rows_of(rzn_o, dt, rows, 3 * hidden, "gru_cell_forward rzn");
  char* hg = rows_of(h_gates_o, dt, rows, 3 * hidden, "gru_cell_forward hidden_gates");
  char* h_prev = rows_of(h_prev_o, dt, rows, hidden, "gru_cell_forward h_prev");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(dt, "gru_cell_forward", [&] {
    using T = scalar_t;
    over_rows(rows, 3 * hidden, [&](int64_t r) {
      const T* x = reinterpret_cast<const T*>(xg.data) + r * 3 * hidden;
      const T* hh = reinterpret_cast<const T*>(hg) + r * 3 * hidden;
      const T* hp = reinterpret_cast<const T*>(h_prev) + r * hidden;
      T* s = reinterpret_cast<T*>(rzn) + r * 3 * hidden;
      T* hn = reinterpret_cast<T*>(h) + r * hidden;
      for (int64_t j = 0; j < 2 * hidden; ++j) s[j] = x[j] + hh[j];
      sigmoid_n(s, s, 2 * hidden);
      for (int64_t j = 0; j < hidden; ++j) s[2 * hidden + j] = x[2 * hidden + j] + s[j] * hh[2 * hidden + j];
      tanh_n(s + 2 * hidden, s + 2 * hidden, hidden);
      const T *z = s + hidden, *n = s + 2 * hidden;
      for (int64_t j = 0; j < hidden; ++j) hn[j] = n[j] + z[j] * (hp[j] - n[j]);
    });
  });
}

// Gradients of the input-side and hidden-side gate pre-activations and the direct part of
// h_prev's (the part through W_hh comes from the caller's matmul with d_h_gates).
void gru_backward_impl(py::handle d_x_gates_o, py::handle d_h_gates_o, py::handle d_h_prev_o, py::handle d_h_o,
                       py::handle rzn_o, py::handle h_gates_o, py::handle h_prev_o) {
  TensorArg rzn = gates_of(rzn_o, 3, "gru_cell_backward");
  int64_t rows = rzn.shape[0], hidden = rzn.shape[1] / 3;
  DType dt = rzn.dtype;
  char* dxg = rows_of(d_x_gates_o, dt, rows, 3 * hidden, "gru_cell_backward grad_input_gates");
  char* dhg = rows_of(d_h_gates_o, dt, rows, 3 * hidden, "gru_cell_backward grad_hidden_gates");
  char* dhp = rows_of(d_h_prev_o, dt, rows, hidden, "gru_cell_backward grad_h_prev");
  char* dh = rows_of(d_h_o, dt, rows, hidden, "gru_cell_backward grad_h");
  char* hg = rows_of(h_gates_o, dt, rows, 3 * hidden, "gru_cell_backward hidden_gates");
  char* h_prev = rows_of(h_prev_o, dt, rows, hidden, "gru_cell_backward h_prev");
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(dt, "gru_cell_backward", [&] {
    using T = scalar_t;
    over_rows(rows, 3 * hidden, [&](int64_t r) {
      const T* s = reinterpret_cast<const T*>(rzn.data) + r * 3 * hidden;
      const T *rr = s, *z = s + hidden, *n = s + 2 * hidden;
      const T* hn = reinterpret_cast<const T*>(hg) + r * 3 * hidden + 2 * hidden;
      const T* hp = reinterpret_cast<const T*>(h_prev) + r * hidden;
      const T* d = reinterpret_cast<const T*>(dh) + r * hidden;
      T* dx = reinterpret_cast<T*>(dxg) + r * 3 * hidden;
      T* dhh = reinterpret_cast<T*>(dhg) + r * 3 * hidden;
      T* dp = reinterpret_cast<T*>(dhp) + r * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        T dn = d[j] * (T(1) - z[j]) * (T(1) - n[j] * n[j]);
        T dr = dn * hn[j] * rr[j] * (T(1) - rr[j]);
        T dz = d[j] * (hp[j] - n[j]) * z[j] * (T(1) - z[j]);
        dx[j] = dr;
        dx[hidden + j] = dz;
        dx[2 * hidden + j] = dn;
        dhh[j] = dr;
        dhh[hidden + j] = dz;
        dhh[2 * hidden + j] = dn * rr[j];
        dp[j] = d[j] * z[j];
      }
    });
  });
}

}  // namespace

void bind_rnn(py::module_& m) {
  m.def("lstm_cell_forward", &lstm_forward_impl, py::arg("acts"), py::arg("c"), py::arg("tanh_c"), py::arg("h"),
        py::arg("input_gates"), py::arg("hidden_gates"), py::arg("c_prev"),
        "One LSTM step from the two halves of the gate pre-activations (rows, 4H) and c_prev (rows, H): writes "
        "the gate activations (i, f, g, o), c, tanh(c) and h.");
  m.def("lstm_cell_backward", &lstm_backward_impl, py::arg("grad_gates"), py::arg("grad_c_prev"),
        py::arg("grad_h"), py::arg("grad_c"), py::arg("acts"), py::arg("c_prev"), py::arg("tanh_c"),
        "Backward of lstm_cell_forward: gradients of the gate pre-activations and of c_prev (grad_c may be None).");
  m.def("gru_cell_forward", &gru_forward_impl, py::arg("h"), py::arg("rzn"), py::arg("input_gates"),
        py::arg("hidden_gates"), py::arg("h_prev"),
        "One GRU step from input-side and hidden-side gate pre-activations (rows, 3H) and h_prev: writes h and "
        "the activations (r, z, n).");
  m.def("gru_cell_backward", &gru_backward_impl, py::arg("grad_input_gates"), py::arg("grad_hidden_gates"),
        py::arg("grad_h_prev"), py::arg("grad_h"), py::arg("rzn"), py::arg("hidden_gates"), py::arg("h_prev"),
        "Backward of gru_cell_forward: gradients of both gate pre-activations and h_prev's direct part.");
}

}  // namespace ember
