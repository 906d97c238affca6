// Kernel family "fft": complex-to-complex, real-to-complex and complex-to-real discrete
// Fourier transforms over any set of strided dims, through FFTW3's guru64 interface (every
// other dim is a "howmany" loop, so no transposes or copies are needed). Plans are made with
// FFTW_ESTIMATE and cached by layout; execution uses FFTW's new-array functions. The Python
// layer (ember/_src/ops/fft.py) pads/trims to n, picks the dtype and the normalization scale.
// Built without FFTW (no libfftw3-dev), every entry point raises a RuntimeError saying so.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <complex>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"

#ifdef EMBER_HAVE_FFTW
#include <fftw3.h>
#endif

namespace py = pybind11;

namespace ember {

namespace {

constexpr const char* kMissing =
    "ember.fft needs the FFTW3 library, which was not found when ember-tensor-core was built: install "
    "libfftw3-dev (ci/install_system_deps.sh) and rebuild";

enum class Kind : int { C2C = 0, R2C = 1, C2R = 2 };

// Checks shared by every transform: dims valid and distinct, and the shapes agree outside the
// last transformed dim (whose sizes are n and n/2+1 for r2c/c2r).
std::vector<int64_t> check_dims(const TensorArg& in, const TensorArg& out, const std::vector<int64_t>& dims,
                                Kind kind, int64_t last_n) {
  if (in.ndim() != out.ndim()) throw std::invalid_argument("fft: input and output ranks differ");
  if (dims.empty()) throw std::invalid_argument("fft: no dims to transform");
  std::vector<bool> seen(static_cast<size_t>(in.ndim()), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= in.ndim() || seen[d]) throw std::invalid_argument("fft: bad or repeated dim");
    seen[d] = true;
  }
  int64_t last = dims.back();
  for (int64_t d = 0; d < in.ndim(); ++d) {
    if (kind != Kind::C2C && d == last) continue;
    if (in.shape[d] != out.shape[d]) throw std::invalid_argument("fft: input and output shapes differ");
  }
  if (kind == Kind::R2C && out.shape[last] != in.shape[last] / 2 + 1)
    throw std::invalid_argument("fft: r2c output must have n/2+1 entries along the last dim");
  if (kind == Kind::C2R && (in.shape[last] != last_n / 2 + 1 || out.shape[last] != last_n))
    throw std::invalid_argument("fft: c2r sizes do not match n");
  return dims;
}

void check_dtypes(const TensorArg& in, const TensorArg& out, Kind kind) {
  bool in_c = in.dtype == DType::Complex64 || in.dtype == DType::Complex128;
  bool out_c = out.dtype == DType::Complex64 || out.dtype == DType::Complex128;
  bool in_r = in.dtype == DType::Float32 || in.dtype == DType::Float64;
  bool out_r = out.dtype == DType::Float32 || out.dtype == DType::Float64;
  bool single = in.dtype == DType::Complex64 || in.dtype == DType::Float32;
  bool out_single = out.dtype == DType::Complex64 || out.dtype == DType::Float32;
  bool ok = (kind == Kind::C2C && in_c && out_c) || (kind == Kind::R2C && in_r && out_c) ||
            (kind == Kind::C2R && in_c && out_r);
  if (!ok || single != out_single) throw std::invalid_argument("fft: unsupported input/output dtypes");
}

#ifdef EMBER_HAVE_FFTW

// FFTW's single- and double-precision APIs behind one interface.
template <typename R>
struct Fftw;

#define EMBER_FFTW_TRAITS(R, P)                                                                                  \
  template <>                                                                                                    \
  struct Fftw<R> {                                                                                               \
    using plan = P##_plan;                                                                                       \
    using cpx = P##_complex;                                                                                     \
    static plan c2c(int rank, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, cpx* in, cpx* out, int sign, \
                    unsigned flags) {                                                                            \
      return P##_plan_guru64_dft(rank, d, hr, hd, in, out, sign, flags);                                         \
    }                                                                                                            \
    static plan r2c(int rank, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, R* in, cpx* out,            \
                    unsigned flags) {                                                                            \
      return P##_plan_guru64_dft_r2c(rank, d, hr, hd, in, out, flags);                                           \
    }                                                                                                            \
    static plan c2r(int rank, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, cpx* in, R* out,            \
                    unsigned flags) {                                                                            \
      return P##_plan_guru64_dft_c2r(rank, d, hr, hd, in, out, flags);                                           \
    }                                                                                                            \
    static void exec_c2c(plan p, cpx* in, cpx* out) { P##_execute_dft(p, in, out); }                            \
    static void exec_r2c(plan p, R* in, cpx* out) { P##_execute_dft_r2c(p, in, out); }                          \
    static void exec_c2r(plan p, cpx* in, R* out) { P##_execute_dft_c2r(p, in, out); }                          \
    static void destroy(plan p) { P##_destroy_plan(p); }                                                         \
    static int alignment(const void* p) { return P##_alignment_of(reinterpret_cast<R*>(const_cast<void*>(p))); } \
  };
EMBER_FFTW_TRAITS(float, fftwf)
EMBER_FFTW_TRAITS(double, fftw)
#undef EMBER_FFTW_TRAITS

// The planner is not thread-safe; execution of a finished plan is. Plans are kept per layout
// (sizes, strides, direction, alignment, in-place or not) and reused with new arrays.
std::mutex g_plan_mutex;

template <typename R>
struct PlanCache {
  std::map<std::vector<int64_t>, typename Fftw<R>::plan> plans;
  ~PlanCache() = default;  // plans are process-lifetime; FFTW frees them at exit
};

template <typename R>
PlanCache<R>& cache() {
  static PlanCache<R> c;
  return c;
}

constexpr size_t kMaxCachedPlans = 512;

template <typename R>
void scale_contiguous(R* data, int64_t count, R scale) {
  if (scale == R(1)) return;
  parallel_for(count, kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) data[i] *= scale;
  });
}

template <typename R>
void run(Kind kind, const TensorArg& in, const TensorArg& out, const std::vector<int64_t>& dims, int sign,
         double scale) {
  using F = Fftw<R>;
  std::vector<bool> is_dim(static_cast<size_t>(in.ndim()), false);
  for (int64_t d : dims) is_dim[d] = true;
  // Transform dims carry the logical size n: the real side's size for r2c/c2r.
  std::vector<fftw_iodim64> tdims, hdims;
  for (int64_t d : dims) {
    int64_t n = kind == Kind::C2R ? out.shape[d] : in.shape[d];
    tdims.push_back({n, in.strides[d], out.strides[d]});
  }
  for (int64_t d = 0; d < in.ndim(); ++d)
    if (!is_dim[d] && in.shape[d] != 1) hdims.push_back({in.shape[d], in.strides[d], out.strides[d]});
  std::vector<int64_t> key = {static_cast<int64_t>(kind), sign, F::alignment(in.data), F::alignment(out.data),
                              in.data == out.data, static_cast<int64_t>(tdims.size())};
  for (auto& v : tdims) key.insert(key.end(), {v.n, v.is, v.os});
  for (auto& v : hdims) key.insert(key.end(), {v.n, v.is, v.os});
  typename F::plan plan;
  {
    std::lock_guard<std::mutex> lock(g_plan_mutex);
    auto& plans = cache<R>().plans;
    auto it = plans.find(key);
    if (it != plans.end()) {
      plan = it->second;
    } else {
      if (plans.size() >= kMaxCachedPlans) {
        for (auto& kv : plans) F::destroy(kv.second);
        plans.clear();
      }
      // FFTW_ESTIMATE never touches the arrays while planning; c2r may overwrite its input,
      // which the caller hands over as a scratch copy.
      unsigned flags = FFTW_ESTIMATE | (kind == Kind::C2R ? FFTW_DESTROY_INPUT : FFTW_PRESERVE_INPUT);
      int rank = static_cast<int>(tdims.size()), hr = static_cast<int>(hdims.size());
      auto* ci = reinterpret_cast<typename F::cpx*>(in.data);
      auto* co = reinterpret_cast<typename F::cpx*>(out.data);
      if (kind == Kind::C2C) plan = F::c2c(rank, tdims.data(), hr, hdims.data(), ci, co, sign, flags);
      else if (kind == Kind::R2C) plan = F::r2c(rank, tdims.data(), hr, hdims.data(), reinterpret_cast<R*>(in.data), co, flags);
      else plan = F::c2r(rank, tdims.data(), hr, hdims.data(), ci, reinterpret_cast<R*>(out.data), flags);
      if (plan == nullptr) throw std::runtime_error("fft: FFTW could not plan this transform");
      plans.emplace(key, plan);
    }
  }
  {
    py::gil_scoped_release release;
    if (kind == Kind::C2C)
      F::exec_c2c(plan, reinterpret_cast<typename F::cpx*>(in.data), reinterpret_cast<typename F::cpx*>(out.data));
    else if (kind == Kind::R2C)
      F::exec_r2c(plan, reinterpret_cast<R*>(in.data), reinterpret_cast<typename F::cpx*>(out.data));
    else
      F::exec_c2r(plan, reinterpret_cast<typename F::cpx*>(in.data), reinterpret_cast<R*>(out.data));
    int64_t count = out.numel() * (kind == Kind::C2R ? 1 : 2);
    scale_contiguous<R>(reinterpret_cast<R*>(out.data), count, static_cast<R>(scale));
  }
}

#endif  // EMBER_HAVE_FFTW

void fft_impl(int kind_code, py::handle out_obj, py::handle in_obj, py::handle dims_obj, bool forward, double scale,
              int64_t last_n) {
  if (kind_code < 0 || kind_code > 2) throw std::invalid_argument("fft: bad transform kind");
  Kind kind = static_cast<Kind>(kind_code);
  TensorArg in = unpack(in_obj), out = unpack(out_obj);
  std::vector<int64_t> dims = check_dims(in, out, to_int64_vector(dims_obj, "dims"), kind, last_n);
  check_dtypes(in, out, kind);
  if (!out.is_contiguous()) throw std::invalid_argument("fft: output must be contiguous");
  if (kind == Kind::C2R && !in.is_contiguous()) throw std::invalid_argument("fft: c2r input must be a contiguous scratch copy");
  for (int64_t d = 0; d < in.ndim(); ++d)
    if (in.shape[d] > 1 && in.strides[d] <= 0) throw std::invalid_argument("fft: input strides must be positive");
  for (int64_t d : dims)
    if (out.shape[d] < 1 || in.shape[d] < 1) throw std::invalid_argument("fft: transform sizes must be positive");
  if (out.numel() == 0) return;
#ifdef EMBER_HAVE_FFTW
  int sign = forward ? FFTW_FORWARD : FFTW_BACKWARD;
  bool single = out.dtype == DType::Complex64 || out.dtype == DType::Float32;
  if (single) run<float>(kind, in, out, dims, sign, scale);
  else run<double>(kind, in, out, dims, sign, scale);
#else
  (void)forward;
  (void)scale;
  throw std::runtime_error(kMissing);
#endif
}

}  // namespace

void bind_fft(py::module_& m) {
#ifdef EMBER_HAVE_FFTW
  m.attr("fft_available") = true;
#else
  m.attr("fft_available") = false;
#endif
  m.attr("fft_missing_message") = kMissing;
  m.def("fft_", &fft_impl, py::arg("kind"), py::arg("out"), py::arg("input"), py::arg("dims"), py::arg("forward"),
        py::arg("scale"), py::arg("last_n") = 0,
        "out = scale * DFT(input) over dims (kind 0: c2c, 1: r2c onesided, 2: c2r with last size last_n; "
        "c2r overwrites its input). out must be a fresh contiguous tensor.");
}

}  // namespace ember
