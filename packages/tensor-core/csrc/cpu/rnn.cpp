// Kernel family "rnn": the pointwise part of one LSTM or GRU time step and its backward, each
// one pass over the step's gate rows (the matmuls stay in BLAS), and a whole LSTM layer
// direction and GRU layer direction whose time loops (a gemm and the fused step per time
// step) run here. Row b of a
// gates tensor holds the gate blocks side by side: LSTM (i, f, g, o), GRU (r, z, n), each
// `hidden` wide; the step ops take the pre-activations in two halves (input side, precomputed
// for all steps, and hidden side). All tensors are contiguous, of one floating
// dtype, with `rows` rows (checked here).
#include <cblas.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

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

// ---- whole LSTM layer (one direction): the time loop in C++ -----------------------------

// C (m, n) = op(A) op(B) + beta * C, row-major (k == 0 leaves beta * C).
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c,
                      (int)ldc);
  else
    scipy_cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c,
                      (int)ldc);
}

// The step schedule: batch sizes in time order (non-increasing, >= 1), their row offsets, and
// the processing order (reversed for the backward direction of a bidirectional layer).
struct Schedule {
  std::vector<int64_t> sizes, offsets, order;
  int64_t rows = 0;
  // The time step processed just before the k-th processed one (-1 for the first).
  int64_t prev(int64_t k) const { return k == 0 ? -1 : order[k - 1]; }
};

Schedule make_schedule(const std::vector<int64_t>& sizes, bool reverse, int64_t total_rows, int64_t batch) {
  Schedule s;
  s.sizes = sizes;
  int64_t steps = static_cast<int64_t>(sizes.size());
  s.offsets.resize(steps);
  for (int64_t t = 0; t < steps; ++t) {
    if (sizes[t] < 1 || sizes[t] > batch || (t > 0 && sizes[t] > sizes[t - 1]))
      throw std::invalid_argument("lstm_layer: batch sizes must be non-increasing, within [1, batch]");
    s.offsets[t] = s.rows;
    s.rows += sizes[t];
  }
  if (s.rows != total_rows) throw std::invalid_argument("lstm_layer: batch sizes do not add up to the input rows");
  s.order.resize(steps);
  for (int64_t k = 0; k < steps; ++k) s.order[k] = reverse ? steps - 1 - k : k;
  return s;
}

// Per-step products below 256^3 multiply-adds run BLAS on one thread (the batched matmul's
// line): splitting them gains little, and each threaded call must wake the BLAS workers, which
// on a loaded machine waits for a scheduler slice (a 2-layer LSTM step measured 5x slower).
bool serial_steps(int64_t batch, int64_t hidden, int64_t proj) {
  return get_num_threads() > 1 && static_cast<double>(batch) * 4.0 * hidden * proj < 256.0 * 256.0 * 256.0;
}

// out (N, P), h_n (B, P), c_n (B, H), acts (N, 4H), cs (N, H), tanh_cs (N, H), ms (N, H) or None
// from xp (N, 4H), h0 (B, P), c0 (B, H), w_hh_t (P, 4H), w_hr_t (H, P) or None.
void lstm_layer_forward_impl(py::handle out_o, py::handle h_n_o, py::handle c_n_o, py::handle acts_o,
                             py::handle cs_o, py::handle tanh_cs_o, py::handle ms_o, py::handle xp_o,
                             py::handle h0_o, py::handle c0_o, py::handle w_hh_t_o, py::handle w_hr_t_o,
                             const std::vector<int64_t>& batch_sizes, bool reverse) {
  TensorArg xp = gates_of(xp_o, 4, "lstm_layer_forward");
  TensorArg h0 = unpack(h0_o), c0 = unpack(c0_o);
  int64_t rows = xp.shape[0], hidden = xp.shape[1] / 4;
  DType dt = xp.dtype;
  if (h0.ndim() != 2 || c0.ndim() != 2) throw std::invalid_argument("lstm_layer_forward: states must be 2-d");
  int64_t batch = h0.shape[0], proj = h0.shape[1];
  bool projected = !w_hr_t_o.is_none();
  if (!projected && proj != hidden) throw std::invalid_argument("lstm_layer_forward: h0 width must be hidden");
  rows_of(h0_o, dt, batch, proj, "lstm_layer_forward h0");
  char* c0p = rows_of(c0_o, dt, batch, hidden, "lstm_layer_forward c0");
  char* out = rows_of(out_o, dt, rows, proj, "lstm_layer_forward out");
  char* h_n = rows_of(h_n_o, dt, batch, proj, "lstm_layer_forward h_n");
  char* c_n = rows_of(c_n_o, dt, batch, hidden, "lstm_layer_forward c_n");
  char* acts = rows_of(acts_o, dt, rows, 4 * hidden, "lstm_layer_forward acts");
  char* cs = rows_of(cs_o, dt, rows, hidden, "lstm_layer_forward cs");
  char* tcs = rows_of(tanh_cs_o, dt, rows, hidden, "lstm_layer_forward tanh_cs");
  char* w_hh_t = rows_of(w_hh_t_o, dt, proj, 4 * hidden, "lstm_layer_forward w_hh_t");
  char* ms = projected ? rows_of(ms_o, dt, rows, hidden, "lstm_layer_forward ms") : nullptr;
  char* w_hr_t = projected ? rows_of(w_hr_t_o, dt, hidden, proj, "lstm_layer_forward w_hr_t") : nullptr;
  Schedule sched = make_schedule(batch_sizes, reverse, rows, batch);
  py::gil_scoped_release release;
  BlasSingleThread one_thread(serial_steps(batch, hidden, proj));
  EMBER_DISPATCH_FLOATING(dt, "lstm_layer_forward", [&] {
    using T = scalar_t;
    const int64_t G = 4 * hidden, H = hidden, P = proj;
    T* h = reinterpret_cast<T*>(h_n);
    T* c = reinterpret_cast<T*>(c_n);
    std::memcpy(h, h0.data, sizeof(T) * batch * P);
    std::memcpy(c, c0p, sizeof(T) * batch * H);
    for (int64_t t : sched.order) {
      int64_t b = sched.sizes[t], off = sched.offsets[t];
      T* a = reinterpret_cast<T*>(acts) + off * G;
      const T* x = reinterpret_cast<const T*>(xp.data) + off * G;
      gemm<T>(false, false, b, G, P, h, P, reinterpret_cast<const T*>(w_hh_t), G, T(0), a, G);
      T* m_blk = projected ? reinterpret_cast<T*>(ms) + off * H : reinterpret_cast<T*>(out) + off * P;
      over_rows(b, G, [&](int64_t r) {
        T* ar = a + r * G;
        const T* xr = x + r * G;
        for (int64_t j = 0; j < G; ++j) ar[j] += xr[j];
        sigmoid_n(ar, ar, 2 * H);
        tanh_n(ar + 2 * H, ar + 2 * H, H);
        sigmoid_n(ar + 3 * H, ar + 3 * H, H);
        T* cr = c + r * H;
        T* csr = reinterpret_cast<T*>(cs) + (off + r) * H;
        T* tcr = reinterpret_cast<T*>(tcs) + (off + r) * H;
        for (int64_t j = 0; j < H; ++j) {
          csr[j] = ar[H + j] * cr[j] + ar[j] * ar[2 * H + j];
          cr[j] = csr[j];
        }
        tanh_n(tcr, csr, H);
        T* mr = m_blk + r * H;
        for (int64_t j = 0; j < H; ++j) mr[j] = ar[3 * H + j] * tcr[j];
      });
      T* o = reinterpret_cast<T*>(out) + off * P;
      if (projected) gemm<T>(false, false, b, P, H, m_blk, H, reinterpret_cast<const T*>(w_hr_t), P, T(0), o, P);
      std::memcpy(h, o, sizeof(T) * b * P);
    }
  });
}

// Back-propagation through the layer: d_xp (N, 4H), d_h0 (B, P), d_c0 (B, H), d_w_hh (4H, P),
// d_w_hr (P, H) or None, from the gradients of out / h_n / c_n (each may be None) and what the
// forward saved. The previous step's h and c rows are read back from out / cs, or h0 / c0.
void lstm_layer_backward_impl(py::handle d_xp_o, py::handle d_h0_o, py::handle d_c0_o, py::handle d_w_hh_o,
                              py::handle d_w_hr_o, py::handle g_out_o, py::handle g_hn_o, py::handle g_cn_o,
                              py::handle acts_o, py::handle cs_o, py::handle tanh_cs_o, py::handle ms_o,
                              py::handle out_o, py::handle h0_o, py::handle c0_o, py::handle w_hh_o,
                              py::handle w_hr_o, const std::vector<int64_t>& batch_sizes, bool reverse) {
  TensorArg acts_a = gates_of(acts_o, 4, "lstm_layer_backward");
  int64_t rows = acts_a.shape[0], hidden = acts_a.shape[1] / 4;
  DType dt = acts_a.dtype;
  TensorArg h0 = unpack(h0_o);
  if (h0.ndim() != 2) throw std::invalid_argument("lstm_layer_backward: h0 must be 2-d");
  int64_t batch = h0.shape[0], proj = h0.shape[1];
  bool projected = !w_hr_o.is_none();
  const char* name = "lstm_layer_backward";
  char* d_xp = rows_of(d_xp_o, dt, rows, 4 * hidden, name);
  char* d_h = rows_of(d_h0_o, dt, batch, proj, name);
  char* d_c = rows_of(d_c0_o, dt, batch, hidden, name);
  char* d_w_hh = rows_of(d_w_hh_o, dt, 4 * hidden, proj, name);
  char* d_w_hr = projected ? rows_of(d_w_hr_o, dt, proj, hidden, name) : nullptr;
  char* g_out = g_out_o.is_none() ? nullptr : rows_of(g_out_o, dt, rows, proj, name);
  char* g_hn = g_hn_o.is_none() ? nullptr : rows_of(g_hn_o, dt, batch, proj, name);
  char* g_cn = g_cn_o.is_none() ? nullptr : rows_of(g_cn_o, dt, batch, hidden, name);
  char* cs = rows_of(cs_o, dt, rows, hidden, name);
  char* tcs = rows_of(tanh_cs_o, dt, rows, hidden, name);
  char* ms = projected ? rows_of(ms_o, dt, rows, hidden, name) : nullptr;
  char* out = rows_of(out_o, dt, rows, proj, name);
  char* h0p = rows_of(h0_o, dt, batch, proj, name);
  char* c0p = rows_of(c0_o, dt, batch, hidden, name);
  char* w_hh = rows_of(w_hh_o, dt, 4 * hidden, proj, name);
  char* w_hr = projected ? rows_of(w_hr_o, dt, proj, hidden, name) : nullptr;
  Schedule sched = make_schedule(batch_sizes, reverse, rows, batch);
  py::gil_scoped_release release;
  BlasSingleThread one_thread(serial_steps(batch, hidden, proj));
  EMBER_DISPATCH_FLOATING(dt, "lstm_layer_backward", [&] {
    using T = scalar_t;
    const int64_t G = 4 * hidden, H = hidden, P = proj;
    T* dh = reinterpret_cast<T*>(d_h);
    T* dc = reinterpret_cast<T*>(d_c);
    T* dwhh = reinterpret_cast<T*>(d_w_hh);
    T* dwhr = reinterpret_cast<T*>(d_w_hr);
    const T* h0t = reinterpret_cast<const T*>(h0p);
    const T* c0t = reinterpret_cast<const T*>(c0p);
    if (g_hn) std::memcpy(dh, g_hn, sizeof(T) * batch * P);
    else std::fill(dh, dh + batch * P, T(0));
    if (g_cn) std::memcpy(dc, g_cn, sizeof(T) * batch * H);
    else std::fill(dc, dc + batch * H, T(0));
    std::fill(dwhh, dwhh + G * P, T(0));
    if (dwhr) std::fill(dwhr, dwhr + P * H, T(0));
    std::vector<T> dm_buf(projected ? batch * H : 0);
    int64_t steps = static_cast<int64_t>(sched.order.size());
    bool uniform = std::all_of(sched.sizes.begin(), sched.sizes.end(), [&](int64_t v) { return v == sched.sizes[0]; });
    for (int64_t k = steps - 1; k >= 0; --k) {
      int64_t t = sched.order[k], b = sched.sizes[t], off = sched.offsets[t];
      int64_t pt = sched.prev(k);
      int64_t pb = pt < 0 ? 0 : std::min(b, sched.sizes[pt]), poff = pt < 0 ? 0 : sched.offsets[pt];
      if (g_out) {
        const T* go = reinterpret_cast<const T*>(g_out) + off * P;
        for (int64_t i = 0; i < b * P; ++i) dh[i] += go[i];
      }
      const T* dm = dh;
      if (projected) {
        const T* m_blk = reinterpret_cast<const T*>(ms) + off * H;
        gemm<T>(true, false, P, H, b, dh, P, m_blk, H, T(1), dwhr, H);
        gemm<T>(false, false, b, H, P, dh, P, reinterpret_cast<const T*>(w_hr), H, T(0), dm_buf.data(), H);
        dm = dm_buf.data();
      }
      T* dg_blk = reinterpret_cast<T*>(d_xp) + off * G;
      over_rows(b, G, [&](int64_t r) {
        const T* a = reinterpret_cast<const T*>(acts_a.data) + (off + r) * G;
        const T *i = a, *f = a + H, *g = a + 2 * H, *o = a + 3 * H;
        const T* cp = r < pb ? reinterpret_cast<const T*>(cs) + (poff + r) * H : c0t + r * H;
        const T* tc = reinterpret_cast<const T*>(tcs) + (off + r) * H;
        const T* dmr = dm + r * H;
        T* dcr = dc + r * H;
        T* dg = dg_blk + r * G;
        for (int64_t j = 0; j < H; ++j) {
          T dct = dcr[j] + dmr[j] * o[j] * (T(1) - tc[j] * tc[j]);
          dg[j] = dct * g[j] * i[j] * (T(1) - i[j]);
          dg[H + j] = dct * cp[j] * f[j] * (T(1) - f[j]);
          dg[2 * H + j] = dct * i[j] * (T(1) - g[j] * g[j]);
          dg[3 * H + j] = dmr[j] * tc[j] * o[j] * (T(1) - o[j]);
          dcr[j] = dct * f[j];
        }
      });
      if (!uniform) {
        // dW_hh += dG^T h_prev, h_prev rows from the previous step's output, then from h0
        const T* hp = reinterpret_cast<const T*>(out) + poff * P;
        gemm<T>(true, false, G, P, pb, dg_blk, G, hp, P, T(1), dwhh, P);
        gemm<T>(true, false, G, P, b - pb, dg_blk + pb * G, G, h0t + pb * P, P, T(1), dwhh, P);
      }
      gemm<T>(false, false, b, P, G, dg_blk, G, reinterpret_cast<const T*>(w_hh), P, T(0), dh, P);
    }
    if (uniform && steps > 0) {
      // Equal batches: h_prev of every step is the output one step earlier (h0 for the first), so
      // dW_hh is two products over all steps instead of a rank-b update per step.
      int64_t b = sched.sizes[0], n = rows;
      const T* dg = reinterpret_cast<const T*>(d_xp);
      const T* o = reinterpret_cast<const T*>(out);
      if (!reverse) {
        gemm<T>(true, false, G, P, n - b, dg + b * G, G, o, P, T(1), dwhh, P);
        gemm<T>(true, false, G, P, b, dg, G, h0t, P, T(1), dwhh, P);
      } else {
        gemm<T>(true, false, G, P, n - b, dg, G, o + b * P, P, T(1), dwhh, P);
        gemm<T>(true, false, G, P, b, dg + (n - b) * G, G, h0t, P, T(1), dwhh, P);
      }
    }
  });
}

// ---- whole GRU layer (one direction) ----------------------------------------------------

// out (N, H), h_n (B, H), rzn (N, 3H), ghn (N, H: W_hn h + b_hn, kept for the backward) from
// xp (N, 3H: x W_ih^T + b_ih), h0 (B, H), w_hh_t (H, 3H), b_hh (3H) or None.
void gru_layer_forward_impl(py::handle out_o, py::handle h_n_o, py::handle rzn_o, py::handle ghn_o, py::handle xp_o,
                            py::handle h0_o, py::handle w_hh_t_o, py::handle b_hh_o,
                            const std::vector<int64_t>& batch_sizes, bool reverse) {
  TensorArg xp = gates_of(xp_o, 3, "gru_layer_forward");
  int64_t rows = xp.shape[0], hidden = xp.shape[1] / 3;
  DType dt = xp.dtype;
  TensorArg h0 = unpack(h0_o);
  if (h0.ndim() != 2) throw std::invalid_argument("gru_layer_forward: h0 must be 2-d");
  int64_t batch = h0.shape[0];
  const char* name = "gru_layer_forward";
  char* h0p = rows_of(h0_o, dt, batch, hidden, name);
  char* out = rows_of(out_o, dt, rows, hidden, name);
  char* h_n = rows_of(h_n_o, dt, batch, hidden, name);
  char* rzn = rows_of(rzn_o, dt, rows, 3 * hidden, name);
  char* ghn = rows_of(ghn_o, dt, rows, hidden, name);
  char* w_hh_t = rows_of(w_hh_t_o, dt, hidden, 3 * hidden, name);
  char* b_hh = b_hh_o.is_none() ? nullptr : rows_of(b_hh_o, dt, 1, 3 * hidden, name);
  Schedule sched = make_schedule(batch_sizes, reverse, rows, batch);
  py::gil_scoped_release release;
  BlasSingleThread one_thread(serial_steps(batch, hidden, hidden));
  EMBER_DISPATCH_FLOATING(dt, "gru_layer_forward", [&] {
    using T = scalar_t;
    const int64_t G = 3 * hidden, H = hidden;
    T* h = reinterpret_cast<T*>(h_n);
    std::memcpy(h, h0p, sizeof(T) * batch * H);
    std::vector<T> gh(batch * G);
    const T* bias = reinterpret_cast<const T*>(b_hh);
    for (int64_t t : sched.order) {
      int64_t b = sched.sizes[t], off = sched.offsets[t];
      gemm<T>(false, false, b, G, H, h, H, reinterpret_cast<const T*>(w_hh_t), G, T(0), gh.data(), G);
      T* o = reinterpret_cast<T*>(out) + off * H;
      over_rows(b, G, [&](int64_t r) {
        T* g = gh.data() + r * G;
        if (bias)
          for (int64_t j = 0; j < G; ++j) g[j] += bias[j];
        const T* x = reinterpret_cast<const T*>(xp.data) + (off + r) * G;
        T* s = reinterpret_cast<T*>(rzn) + (off + r) * G;
        for (int64_t j = 0; j < 2 * H; ++j) s[j] = x[j] + g[j];
        sigmoid_n(s, s, 2 * H);
        for (int64_t j = 0; j < H; ++j) s[2 * H + j] = x[2 * H + j] + s[j] * g[2 * H + j];
        tanh_n(s + 2 * H, s + 2 * H, H);
        std::memcpy(reinterpret_cast<T*>(ghn) + (off + r) * H, g + 2 * H, sizeof(T) * H);
        const T *z = s + H, *n = s + 2 * H, *hp = h + r * H;
        T* orow = o + r * H;
        for (int64_t j = 0; j < H; ++j) orow[j] = n[j] + z[j] * (hp[j] - n[j]);
      });
      std::memcpy(h, o, sizeof(T) * b * H);
    }
  });
}

// d_xp (N, 3H), d_h0 (B, H), d_w_hh (3H, H), d_b_hh (3H, or 0 without a bias) from the
// gradients of out / h_n (each may be None) and what the forward saved.
void gru_layer_backward_impl(py::handle d_xp_o, py::handle d_h0_o, py::handle d_w_hh_o, py::handle d_b_hh_o,
                             py::handle g_out_o, py::handle g_hn_o, py::handle rzn_o, py::handle ghn_o,
                             py::handle out_o, py::handle h0_o, py::handle w_hh_o,
                             const std::vector<int64_t>& batch_sizes, bool reverse) {
  TensorArg rzn_a = gates_of(rzn_o, 3, "gru_layer_backward");
  int64_t rows = rzn_a.shape[0], hidden = rzn_a.shape[1] / 3;
  DType dt = rzn_a.dtype;
  TensorArg h0 = unpack(h0_o);
  if (h0.ndim() != 2) throw std::invalid_argument("gru_layer_backward: h0 must be 2-d");
  int64_t batch = h0.shape[0];
  const char* name = "gru_layer_backward";
  char* d_xp = rows_of(d_xp_o, dt, rows, 3 * hidden, name);
  char* d_h = rows_of(d_h0_o, dt, batch, hidden, name);
  char* d_w_hh = rows_of(d_w_hh_o, dt, 3 * hidden, hidden, name);
  char* d_b_hh = d_b_hh_o.is_none() ? nullptr : rows_of(d_b_hh_o, dt, 1, 3 * hidden, name);
  char* g_out = g_out_o.is_none() ? nullptr : rows_of(g_out_o, dt, rows, hidden, name);
  char* g_hn = g_hn_o.is_none() ? nullptr : rows_of(g_hn_o, dt, batch, hidden, name);
  char* ghn = rows_of(ghn_o, dt, rows, hidden, name);
  char* out = rows_of(out_o, dt, rows, hidden, name);
  char* h0p = rows_of(h0_o, dt, batch, hidden, name);
  char* w_hh = rows_of(w_hh_o, dt, 3 * hidden, hidden, name);
  Schedule sched = make_schedule(batch_sizes, reverse, rows, batch);
  py::gil_scoped_release release;
  BlasSingleThread one_thread(serial_steps(batch, hidden, hidden));
  EMBER_DISPATCH_FLOATING(dt, "gru_layer_backward", [&] {
    using T = scalar_t;
    const int64_t G = 3 * hidden, H = hidden;
    T* dh = reinterpret_cast<T*>(d_h);
    T* dwhh = reinterpret_cast<T*>(d_w_hh);
    const T* h0t = reinterpret_cast<const T*>(h0p);
    const T* o = reinterpret_cast<const T*>(out);
    if (g_hn) std::memcpy(dh, g_hn, sizeof(T) * batch * H);
    else std::fill(dh, dh + batch * H, T(0));
    std::fill(dwhh, dwhh + G * H, T(0));
    std::vector<T> d_gh(rows * G);  // gradient of each step's hidden-side gates, for dW_hh and db_hh
    bool uniform = std::all_of(sched.sizes.begin(), sched.sizes.end(), [&](int64_t v) { return v == sched.sizes[0]; });
    int64_t steps = static_cast<int64_t>(sched.order.size());
    for (int64_t k = steps - 1; k >= 0; --k) {
      int64_t t = sched.order[k], b = sched.sizes[t], off = sched.offsets[t];
      int64_t pt = sched.prev(k);
      int64_t pb = pt < 0 ? 0 : std::min(b, sched.sizes[pt]), poff = pt < 0 ? 0 : sched.offsets[pt];
      if (g_out) {
        const T* go = reinterpret_cast<const T*>(g_out) + off * H;
        for (int64_t i = 0; i < b * H; ++i) dh[i] += go[i];
      }
      T* dgh_blk = d_gh.data() + off * G;
      over_rows(b, G, [&](int64_t r) {
        const T* s = reinterpret_cast<const T*>(rzn_a.data) + (off + r) * G;
        const T *rr = s, *z = s + H, *n = s + 2 * H;
        const T* hn = reinterpret_cast<const T*>(ghn) + (off + r) * H;
        const T* hp = r < pb ? o + (poff + r) * H : h0t + r * H;
        T* d = dh + r * H;
        T* dx = reinterpret_cast<T*>(d_xp) + (off + r) * G;
        T* dg = dgh_blk + r * G;
        for (int64_t j = 0; j < H; ++j) {
          T dn = d[j] * (T(1) - z[j]) * (T(1) - n[j] * n[j]);
          T dr = dn * hn[j] * rr[j] * (T(1) - rr[j]);
          T dz = d[j] * (hp[j] - n[j]) * z[j] * (T(1) - z[j]);
          dx[j] = dg[j] = dr;
          dx[H + j] = dg[H + j] = dz;
          dx[2 * H + j] = dn;
          dg[2 * H + j] = dn * rr[j];
          d[j] = d[j] * z[j];  // the direct part of dh_prev; the part through W_hh is added below
        }
      });
      if (!uniform) {
        gemm<T>(true, false, G, H, pb, dgh_blk, G, o + poff * H, H, T(1), dwhh, H);
        gemm<T>(true, false, G, H, b - pb, dgh_blk + pb * G, G, h0t + pb * H, H, T(1), dwhh, H);
      }
      gemm<T>(false, false, b, H, G, dgh_blk, G, reinterpret_cast<const T*>(w_hh), H, T(1), dh, H);
    }
    if (uniform && steps > 0) {
      int64_t b = sched.sizes[0];
      const T* dg = d_gh.data();
      if (!reverse) {
        gemm<T>(true, false, G, H, rows - b, dg + b * G, G, o, H, T(1), dwhh, H);
        gemm<T>(true, false, G, H, b, dg, G, h0t, H, T(1), dwhh, H);
      } else {
        gemm<T>(true, false, G, H, rows - b, dg, G, o + b * H, H, T(1), dwhh, H);
        gemm<T>(true, false, G, H, b, dg + (rows - b) * G, G, h0t, H, T(1), dwhh, H);
      }
    }
    if (d_b_hh) {
      T* db = reinterpret_cast<T*>(d_b_hh);
      std::fill(db, db + G, T(0));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < G; ++j) db[j] += d_gh[r * G + j];
    }
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
  m.def("lstm_layer_forward", &lstm_layer_forward_impl, py::arg("out"), py::arg("h_n"), py::arg("c_n"),
        py::arg("acts"), py::arg("cs"), py::arg("tanh_cs"), py::arg("ms"), py::arg("xp"), py::arg("h0"),
        py::arg("c0"), py::arg("w_hh_t"), py::arg("w_hr_t"), py::arg("batch_sizes"), py::arg("reverse"),
        "The time loop of one LSTM layer direction over precomputed input projections xp (N, 4H), steps of "
        "batch_sizes rows in time order (processed backwards when reverse).");
  m.def("lstm_layer_backward", &lstm_layer_backward_impl, py::arg("grad_xp"), py::arg("grad_h0"),
        py::arg("grad_c0"), py::arg("grad_w_hh"), py::arg("grad_w_hr"), py::arg("grad_out"), py::arg("grad_h_n"),
        py::arg("grad_c_n"), py::arg("acts"), py::arg("cs"), py::arg("tanh_cs"), py::arg("ms"), py::arg("out"),
        py::arg("h0"), py::arg("c0"), py::arg("w_hh"), py::arg("w_hr"), py::arg("batch_sizes"), py::arg("reverse"),
        "Back-propagation through time of lstm_layer_forward.");
  m.def("gru_layer_forward", &gru_layer_forward_impl, py::arg("out"), py::arg("h_n"), py::arg("rzn"),
        py::arg("ghn"), py::arg("xp"), py::arg("h0"), py::arg("w_hh_t"), py::arg("b_hh"), py::arg("batch_sizes"),
        py::arg("reverse"), "The time loop of one GRU layer direction (as lstm_layer_forward).");
  m.def("gru_layer_backward", &gru_layer_backward_impl, py::arg("grad_xp"), py::arg("grad_h0"),
        py::arg("grad_w_hh"), py::arg("grad_b_hh"), py::arg("grad_out"), py::arg("grad_h_n"), py::arg("rzn"),
        py::arg("ghn"), py::arg("out"), py::arg("h0"), py::arg("w_hh"), py::arg("batch_sizes"), py::arg("reverse"),
        "Back-propagation through time of gru_layer_forward.");
}

}  // namespace ember
