// Kernel family "lapack_extra": the LAPACK routines behind linalg.eig/eigvals (geev),
// ldl_factor/ldl_solve (sytrf/sytrs), geqrf (its raw output) and ormqr, each a batched loop
// over LAPACK from scipy-openblas32 as in lapack.cpp: every matrix is copied into a
// column-major workspace (any input strides work) and results are copied back. Inputs are
// (B, m, n) float32/float64 tensors, shapes validated by the Python caller and re-checked
// here; each kernel returns LAPACK's `info` per batch element.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <climits>
#include <complex>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/dtype.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

extern "C" {
#define EMBER_LAPACK_EXTRA_DECL(T, p)                                                                                 \
  void scipy_##p##geev_(const char* jobvl, const char* jobvr, const int* n, T* a, const int* lda, T* wr, T* wi,      \
                        T* vl, const int* ldvl, T* vr, const int* ldvr, T* work, const int* lwork, int* info, size_t, \
                        size_t);                                                                                      \
  void scipy_##p##sytrf_(const char* uplo, const int* n, T* a, const int* lda, int* ipiv, T* work, const int* lwork,  \
                         int* info, size_t);                                                                          \
  void scipy_##p##sytrs_(const char* uplo, const int* n, const int* nrhs, const T* a, const int* lda, const int* ipiv, \
                         T* b, const int* ldb, int* info, size_t);                                                    \
  void scipy_##p##ormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k, const T* a,   \
                         const int* lda, const T* tau, T* c, const int* ldc, T* work, const int* lwork, int* info,    \
                         size_t, size_t);                                                                             \
  void scipy_##p##geqrf_(const int* m, const int* n, T* a, const int* lda, T* tau, T* work, const int* lwork,         \
                         int* info);
EMBER_LAPACK_EXTRA_DECL(float, s)
EMBER_LAPACK_EXTRA_DECL(double, d)
#undef EMBER_LAPACK_EXTRA_DECL
}

namespace ember {

namespace {

template <typename T>
struct Lx;

#define EMBER_LAPACK_EXTRA_TRAITS(T, p)                                                             \
  template <>                                                                                       \
  struct Lx<T> {                                                                                    \
    template <typename... A>                                                                        \
    static void geev(A... a) { scipy_##p##geev_(a..., size_t{1}, size_t{1}); }                      \
    template <typename... A>                                                                        \
    static void sytrf(A... a) { scipy_##p##sytrf_(a..., size_t{1}); }                               \
    template <typename... A>                                                                        \
    static void sytrs(A... a) { scipy_##p##sytrs_(a..., size_t{1}); }                               \
    template <typename... A>                                                                        \
    static void ormqr(A... a) { scipy_##p##ormqr_(a..., size_t{1}, size_t{1}); }                    \
    template <typename... A>                                                                        \
    static void geqrf(A... a) { scipy_##p##geqrf_(a...); }                                          \
  };
EMBER_LAPACK_EXTRA_TRAITS(float, s)
EMBER_LAPACK_EXTRA_TRAITS(double, d)
#undef EMBER_LAPACK_EXTRA_TRAITS

// Matrix b of a (B, rows, cols) tensor; strides in elements of the tensor's dtype.
struct Mat {
  char* data;
  int64_t rows, cols, srow, scol, sbatch;
};

Mat as_mat(const TensorArg& t, const char* what) {
  if (t.ndim() != 3) throw std::invalid_argument(std::string(what) + ": kernel expects 3-D tensors");
  for (int64_t s : {t.shape[1], t.shape[2]})
    if (s > INT_MAX / 4) throw std::runtime_error(std::string(what) + ": matrix dimension exceeds LAPACK's int32 limit");
  return Mat{t.data, t.shape[1], t.shape[2], t.strides[1], t.strides[2], t.strides[0]};
}

template <typename T>
void load(const Mat& m, int64_t b, T* dst, int64_t ld) {
  const T* src = reinterpret_cast<const T*>(m.data) + b * m.sbatch;
  for (int64_t j = 0; j < m.cols; ++j)
    for (int64_t i = 0; i < m.rows; ++i) dst[i + j * ld] = src[i * m.srow + j * m.scol];
}

template <typename T, typename S>
void store(const Mat& m, int64_t b, const S* src, int64_t ld) {
  T* dst = reinterpret_cast<T*>(m.data) + b * m.sbatch;
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j) dst[i * m.srow + j * m.scol] = static_cast<T>(src[i + j * ld]);
}

int to_int(int64_t v) { return static_cast<int>(v); }

template <typename T>
int lwork_of(T w) {
  return std::max(1, static_cast<int>(w));
}

void same_batch(std::initializer_list<const TensorArg*> ts, const char* what) {
  for (const TensorArg* t : ts)
    if (t->shape[0] != (*ts.begin())->shape[0]) throw std::runtime_error(std::string(what) + ": batch sizes differ");
}

// -- geev: eigenvalues (B,n,1) and right eigenvectors (B,n,n or 0 columns), complex ------------

template <typename T>
std::vector<int> geev_run(const Mat& w, const Mat& v, const Mat& a, int64_t batch) {
  int64_t n = a.rows;
  bool vectors = v.cols > 0;
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  py::gil_scoped_release release;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t ld = std::max<int64_t>(1, n);
    std::vector<T> work_a(static_cast<size_t>(ld * n)), wr(static_cast<size_t>(ld)), wi(static_cast<size_t>(ld));
    std::vector<T> vr(static_cast<size_t>(vectors ? ld * n : 1));
    load(a, b, work_a.data(), ld);
    int ni = to_int(n), ldi = to_int(ld), one = 1, info = 0, lwork = -1;
    char jobvl = 'N', jobvr = vectors ? 'V' : 'N';
    if (n > 0) {
      T wq = 0, dummy = 0;
      Lx<T>::geev(&jobvl, &jobvr, &ni, work_a.data(), &ldi, wr.data(), wi.data(), &dummy, &one, vr.data(),
                  vectors ? &ldi : &one, &wq, &lwork, &info);
      lwork = lwork_of(wq);
      std::vector<T> work(static_cast<size_t>(lwork));
      Lx<T>::geev(&jobvl, &jobvr, &ni, work_a.data(), &ldi, wr.data(), wi.data(), &dummy, &one, vr.data(),
                  vectors ? &ldi : &one, work.data(), &lwork, &info);
    }
    infos[b] = info;
    auto* wd = reinterpret_cast<std::complex<T>*>(w.data) + b * w.sbatch;
    for (int64_t i = 0; i < n; ++i) wd[i * w.srow] = std::complex<T>(wr[i], wi[i]);
    if (!vectors) continue;
    // LAPACK stores a complex pair's vectors as two real columns: re in j, im in j+1.
    auto* vd = reinterpret_cast<std::complex<T>*>(v.data) + b * v.sbatch;
    for (int64_t j = 0; j < n; ++j) {
      if (wi[j] != T(0) && j + 1 < n) {
        for (int64_t i = 0; i < n; ++i) {
          T re = vr[i + j * ld], im = vr[i + (j + 1) * ld];
          vd[i * v.srow + j * v.scol] = std::complex<T>(re, im);
          vd[i * v.srow + (j + 1) * v.scol] = std::complex<T>(re, -im);
        }
        ++j;
      } else {
        for (int64_t i = 0; i < n; ++i) vd[i * v.srow + j * v.scol] = std::complex<T>(vr[i + j * ld], T(0));
      }
    }
  }
  return infos;
}

std::vector<int> geev(py::handle w, py::handle v, py::handle a) {
  TensorArg tw = unpack(w), tv = unpack(v), ta = unpack(a);
  Mat W = as_mat(tw, "geev"), V = as_mat(tv, "geev"), A = as_mat(ta, "geev");
  same_batch({&tw, &tv, &ta}, "geev");
  if (A.rows != A.cols || W.rows != A.rows || (V.cols > 0 && (V.rows != A.rows || V.cols != A.cols)))
    throw std::runtime_error("geev: bad shapes");
  if (ta.dtype == DType::Float32 && tw.dtype == DType::Complex64 && tv.dtype == DType::Complex64)
    return geev_run<float>(W, V, A, ta.shape[0]);
  if (ta.dtype == DType::Float64 && tw.dtype == DType::Complex128 && tv.dtype == DType::Complex128)
    return geev_run<double>(W, V, A, ta.shape[0]);
  throw std::runtime_error("geev: expects float32/float64 input with complex64/complex128 outputs");
}

// -- sytrf / sytrs: Bunch-Kaufman LDL^T, lower storage ----------------------------------------

template <typename T>
std::vector<int> sytrf_run(const Mat& ld_out, const Mat& piv, const Mat& a, int64_t batch) {
  int64_t n = a.rows, ld = std::max<int64_t>(1, n);
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  py::gil_scoped_release release;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<T> w(static_cast<size_t>(ld * n));
    std::vector<int> ipiv(static_cast<size_t>(ld));
    load(a, b, w.data(), ld);
    int ni = to_int(n), ldi = to_int(ld), info = 0, lwork = -1;
    char uplo = 'L';
    if (n > 0) {
      T wq = 0;
      Lx<T>::sytrf(&uplo, &ni, w.data(), &ldi, ipiv.data(), &wq, &lwork, &info);
      lwork = lwork_of(wq);
      std::vector<T> work(static_cast<size_t>(lwork));
      Lx<T>::sytrf(&uplo, &ni, w.data(), &ldi, ipiv.data(), work.data(), &lwork, &info);
    }
    infos[b] = info;
    store<T>(ld_out, b, w.data(), ld);
    auto* pd = reinterpret_cast<int32_t*>(piv.data) + b * piv.sbatch;
    for (int64_t i = 0; i < n; ++i) pd[i * piv.srow] = ipiv[i];
  }
  return infos;
}

template <typename T>
std::vector<int> sytrs_run(const Mat& x, const Mat& ld_in, const Mat& piv, const Mat& rhs, int64_t batch) {
  int64_t n = ld_in.rows, k = rhs.cols, ld = std::max<int64_t>(1, n);
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  py::gil_scoped_release release;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<T> f(static_cast<size_t>(ld * n)), xb(static_cast<size_t>(ld * std::max<int64_t>(1, k)));
    std::vector<int> ipiv(static_cast<size_t>(ld));
    load(ld_in, b, f.data(), ld);
    load(rhs, b, xb.data(), ld);
    const auto* pd = reinterpret_cast<const int32_t*>(piv.data) + b * piv.sbatch;
    for (int64_t i = 0; i < n; ++i) ipiv[i] = pd[i * piv.srow];
    int ni = to_int(n), ki = to_int(k), ldi = to_int(ld), info = 0;
    char uplo = 'L';
    if (n > 0 && k > 0) Lx<T>::sytrs(&uplo, &ni, &ki, f.data(), &ldi, ipiv.data(), xb.data(), &ldi, &info);
    infos[b] = info;
    store<T>(x, b, xb.data(), ld);
  }
  return infos;
}

void check_pivots(const TensorArg& tp, int64_t n) {
  // sytrs trusts the pivots: out-of-range ones would index outside the matrix.
  for (int64_t b = 0; b < tp.shape[0]; ++b) {
    const auto* pd = reinterpret_cast<const int32_t*>(tp.data) + b * tp.strides[0];
    for (int64_t i = 0; i < n; ++i) {
      int32_t p = pd[i * tp.strides[1]];
      if (p == 0 || p > n || p < -n)
        throw std::runtime_error("torch.linalg.ldl_solve: pivots must be in the range [-n, n] without 0 (n = " +
                                 std::to_string(n) + "), got " + std::to_string(p));
    }
  }
}

std::vector<int> sytrf(py::handle ld_out, py::handle piv, py::handle a) {
  TensorArg tl = unpack(ld_out), tp = unpack(piv), ta = unpack(a);
  Mat L = as_mat(tl, "sytrf"), P = as_mat(tp, "sytrf"), A = as_mat(ta, "sytrf");
  same_batch({&tl, &tp, &ta}, "sytrf");
  if (A.rows != A.cols || L.rows != A.rows || L.cols != A.cols || P.rows != A.rows || tp.dtype != DType::Int32 ||
      tl.dtype != ta.dtype)
    throw std::runtime_error("sytrf: bad shapes or dtypes");
  if (ta.dtype == DType::Float32) return sytrf_run<float>(L, P, A, ta.shape[0]);
  if (ta.dtype == DType::Float64) return sytrf_run<double>(L, P, A, ta.shape[0]);
  EMBER_THROW_DTYPE(ta.dtype, "sytrf");
}

std::vector<int> sytrs(py::handle x, py::handle ld_in, py::handle piv, py::handle rhs) {
  TensorArg tx = unpack(x), tl = unpack(ld_in), tp = unpack(piv), tb = unpack(rhs);
  Mat X = as_mat(tx, "sytrs"), L = as_mat(tl, "sytrs"), P = as_mat(tp, "sytrs"), B = as_mat(tb, "sytrs");
  same_batch({&tx, &tl, &tp, &tb}, "sytrs");
  if (L.rows != L.cols || P.rows != L.rows || B.rows != L.rows || X.rows != B.rows || X.cols != B.cols ||
      tp.dtype != DType::Int32 || tl.dtype != tb.dtype || tx.dtype != tb.dtype)
    throw std::runtime_error("sytrs: bad shapes or dtypes");
  check_pivots(tp, L.rows);
  if (tb.dtype == DType::Float32) return sytrs_run<float>(X, L, P, B, tb.shape[0]);
  if (tb.dtype == DType::Float64) return sytrs_run<double>(X, L, P, B, tb.shape[0]);
  EMBER_THROW_DTYPE(tb.dtype, "sytrs");
}

// -- geqrf (raw reflectors + tau) and ormqr ----------------------------------------------------

template <typename T>
std::vector<int> geqrf_run(const Mat& out, const Mat& tau, const Mat& a, int64_t batch) {
  int64_t m = a.rows, n = a.cols, k = std::min(m, n), ld = std::max<int64_t>(1, m);
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  py::gil_scoped_release release;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<T> w(static_cast<size_t>(ld * std::max<int64_t>(1, n))), t(static_cast<size_t>(std::max<int64_t>(1, k)));
    load(a, b, w.data(), ld);
    int mi = to_int(m), ni = to_int(n), ldi = to_int(ld), info = 0, lwork = -1;
    if (k > 0) {
      T wq = 0;
      Lx<T>::geqrf(&mi, &ni, w.data(), &ldi, t.data(), &wq, &lwork, &info);
      lwork = lwork_of(wq);
      std::vector<T> work(static_cast<size_t>(lwork));
      Lx<T>::geqrf(&mi, &ni, w.data(), &ldi, t.data(), work.data(), &lwork, &info);
    }
    infos[b] = info;
    store<T>(out, b, w.data(), ld);
    T* td = reinterpret_cast<T*>(tau.data) + b * tau.sbatch;
    for (int64_t i = 0; i < k; ++i) td[i * tau.srow] = t[i];
  }
  return infos;
}

std::vector<int> geqrf(py::handle out, py::handle tau, py::handle a) {
  TensorArg to = unpack(out), tt = unpack(tau), ta = unpack(a);
  Mat O = as_mat(to, "geqrf"), T_ = as_mat(tt, "geqrf"), A = as_mat(ta, "geqrf");
  same_batch({&to, &tt, &ta}, "geqrf");
  if (O.rows != A.rows || O.cols != A.cols || T_.rows != std::min(A.rows, A.cols) || to.dtype != ta.dtype ||
      tt.dtype != ta.dtype)
    throw std::runtime_error("geqrf: bad shapes or dtypes");
  if (ta.dtype == DType::Float32) return geqrf_run<float>(O, T_, A, ta.shape[0]);
  if (ta.dtype == DType::Float64) return geqrf_run<double>(O, T_, A, ta.shape[0]);
  EMBER_THROW_DTYPE(ta.dtype, "geqrf");
}

template <typename T>
std::vector<int> ormqr_run(const Mat& out, const Mat& a, const Mat& tau, const Mat& c, bool left, bool trans,
                           int64_t batch) {
  int64_t m = c.rows, n = c.cols, k = tau.rows, lda = std::max<int64_t>(1, a.rows), ldc = std::max<int64_t>(1, m);
  std::vector<int> infos(static_cast<size_t>(batch), 0);
  py::gil_scoped_release release;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<T> av(static_cast<size_t>(lda * std::max<int64_t>(1, a.cols)));
    std::vector<T> cv(static_cast<size_t>(ldc * std::max<int64_t>(1, n))), t(static_cast<size_t>(std::max<int64_t>(1, k)));
    load(a, b, av.data(), lda);
    load(c, b, cv.data(), ldc);
    const T* td = reinterpret_cast<const T*>(tau.data) + b * tau.sbatch;
    for (int64_t i = 0; i < k; ++i) t[i] = td[i * tau.srow];
    int mi = to_int(m), ni = to_int(n), ki = to_int(k), ldai = to_int(lda), ldci = to_int(ldc), info = 0, lwork = -1;
    char side = left ? 'L' : 'R', tr = trans ? 'T' : 'N';
    if (m > 0 && n > 0 && k > 0) {
      T wq = 0;
      Lx<T>::ormqr(&side, &tr, &mi, &ni, &ki, av.data(), &ldai, t.data(), cv.data(), &ldci, &wq, &lwork, &info);
      lwork = lwork_of(wq);
      std::vector<T> work(static_cast<size_t>(lwork));
      Lx<T>::ormqr(&side, &tr, &mi, &ni, &ki, av.data(), &ldai, t.data(), cv.data(), &ldci, work.data(), &lwork,
                   &info);
    }
    infos[b] = info;
    store<T>(out, b, cv.data(), ldc);
  }
  return infos;
}

std::vector<int> ormqr(py::handle out, py::handle a, py::handle tau, py::handle c, bool left, bool trans) {
  TensorArg to = unpack(out), ta = unpack(a), tt = unpack(tau), tc = unpack(c);
  Mat O = as_mat(to, "ormqr"), A = as_mat(ta, "ormqr"), T_ = as_mat(tt, "ormqr"), C = as_mat(tc, "ormqr");
  same_batch({&to, &ta, &tt, &tc}, "ormqr");
  int64_t nq = left ? C.rows : C.cols;
  if (O.rows != C.rows || O.cols != C.cols || A.rows != nq || T_.rows > A.cols || T_.rows > nq ||
      ta.dtype != tc.dtype || tt.dtype != tc.dtype || to.dtype != tc.dtype)
    throw std::runtime_error("ormqr: bad shapes or dtypes");
  if (tc.dtype == DType::Float32) return ormqr_run<float>(O, A, T_, C, left, trans, tc.shape[0]);
  if (tc.dtype == DType::Float64) return ormqr_run<double>(O, A, T_, C, left, trans, tc.shape[0]);
  EMBER_THROW_DTYPE(tc.dtype, "ormqr");
}

}  // namespace

void bind_lapack_extra(py::module_& m) {
  m.def("geev_", &geev, py::arg("eigenvalues"), py::arg("eigenvectors"), py::arg("a"),
        "Complex eigenvalues (B,n,1) and right eigenvectors (B,n,n, or 0 columns: values only) of a real (B,n,n) "
        "through geev; returns info.");
  m.def("sytrf_", &sytrf, py::arg("ld"), py::arg("pivots"), py::arg("a"),
        "Bunch-Kaufman LDL^T (lower) of a symmetric (B,n,n): the compact factor (B,n,n) and pivots (B,n,1) int32; "
        "returns info.");
  m.def("sytrs_", &sytrs, py::arg("x"), py::arg("ld"), py::arg("pivots"), py::arg("b"),
        "x (B,n,k) solving A x = b from sytrf's factor and pivots; returns info.");
  m.def("geqrf_", &geqrf, py::arg("out"), py::arg("tau"), py::arg("a"),
        "geqrf's reflectors/R (B,m,n) and tau (B,min(m,n),1); returns info.");
  m.def("ormqr_", &ormqr, py::arg("out"), py::arg("a"), py::arg("tau"), py::arg("c"), py::arg("left"),
        py::arg("transpose"), "out = op(Q) c (left) or c op(Q), Q from geqrf's reflectors a and tau; returns info.");
}

}  // namespace ember
