// Kernel family "lapack": the factorizations behind ember.linalg (det/slogdet, inv, solve,
// cholesky, qr, eigh, svd, lstsq), each a batched loop over LAPACK from scipy-openblas32.
// LAPACK is column-major: every matrix of the batch is copied into a column-major workspace
// (which also makes any input strides work) and results are copied back into the outputs.
// Inputs are (B, m, n) float32/float64 tensors; shapes are validated by the Python caller and
// re-checked here. Each kernel returns LAPACK's `info` per batch element for Python to turn
// into torch's errors.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/dtype.h"
#include "../common/parallel.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

// Fortran LAPACK entry points (scipy-openblas32 prefixes every symbol); character arguments
// take their hidden lengths at the end.
extern "C" {
#define EMBER_LAPACK_DECL(T, p)                                                                                     \
  void scipy_##p##getrf_(const int* m, const int* n, T* a, const int* lda, int* ipiv, int* info);                   \
  void scipy_##p##getri_(const int* n, T* a, const int* lda, const int* ipiv, T* work, const int* lwork, int* info); \
  void scipy_##p##gesv_(const int* n, const int* nrhs, T* a, const int* lda, int* ipiv, T* b, const int* ldb,       \
                        int* info);                                                                                 \
  void scipy_##p##potrf_(const char* uplo, const int* n, T* a, const int* lda, int* info, size_t);                  \
  void scipy_##p##geqrf_(const int* m, const int* n, T* a, const int* lda, T* tau, T* work, const int* lwork,       \
                         int* info);                                                                                \
  void scipy_##p##orgqr_(const int* m, const int* n, const int* k, T* a, const int* lda, const T* tau, T* work,     \
                         const int* lwork, int* info);                                                              \
  void scipy_##p##syevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* lda, T* w, T* work,     \
                         const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);               \
  void scipy_##p##gesdd_(const char* jobz, const int* m, const int* n, T* a, const int* lda, T* s, T* u,            \
                         const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork, int* iwork, int* info, \
                         size_t);                                                                                   \
  void scipy_##p##gels_(const char* trans, const int* m, const int* n, const int* nrhs, T* a, const int* lda, T* b, \
                        const int* ldb, T* work, const int* lwork, int* info, size_t);                              \
  void scipy_##p##gelsy_(const int* m, const int* n, const int* nrhs, T* a, const int* lda, T* b, const int* ldb,   \
                         int* jpvt, const T* rcond, int* rank, T* work, const int* lwork, int* info);               \
  void scipy_##p##gelsd_(const int* m, const int* n, const int* nrhs, T* a, const int* lda, T* b, const int* ldb,   \
                         T* s, const T* rcond, int* rank, T* work, const int* lwork, int* iwork, int* info);        \
  void scipy_##p##gelss_(const int* m, const int* n, const int* nrhs, T* a, const int* lda, T* b, const int* ldb,   \
                         T* s, const T* rcond, int* rank, T* work, const int* lwork, int* info);
EMBER_LAPACK_DECL(float, s)
EMBER_LAPACK_DECL(double, d)
#undef EMBER_LAPACK_DECL
void scipy_openblas_set_num_threads(int);
}

namespace ember {

namespace {

// The s/d entry point for T, named without the prefix.
template <typename T>
struct Lapack;

#define EMBER_LAPACK_TRAITS(T, p)                                                   \
  template <>                                                                       \
  struct Lapack<T> {                                                                \
    template <typename... A>                                                        \
    static void getrf(A... a) { scipy_##p##getrf_(a...); }                          \
    template <typename... A>                                                        \
    static void getri(A... a) { scipy_##p##getri_(a...); }                          \
    template <typename... A>                                                        \
    static void gesv(A... a) { scipy_##p##gesv_(a...); }                            \
    template <typename... A>                                                        \
    static void potrf(A... a) { scipy_##p##potrf_(a..., size_t{1}); }               \
    template <typename... A>                                                        \
    static void geqrf(A... a) { scipy_##p##geqrf_(a...); }                          \
    template <typename... A>                                                        \
    static void orgqr(A... a) { scipy_##p##orgqr_(a...); }                          \
    template <typename... A>                                                        \
    static void syevd(A... a) { scipy_##p##syevd_(a..., size_t{1}, size_t{1}); }    \
    template <typename... A>                                                        \
    static void gesdd(A... a) { scipy_##p##gesdd_(a..., size_t{1}); }               \
    template <typename... A>                                                        \
    static void gels(A... a) { scipy_##p##gels_(a..., size_t{1}); }                 \
    template <typename... A>                                                        \
    static void gelsy(A... a) { scipy_##p##gelsy_(a...); }                          \
    template <typename... A>                                                        \
    static void gelsd(A... a) { scipy_##p##gelsd_(a...); }                          \
    template <typename... A>                                                        \
    static void gelss(A... a) { scipy_##p##gelss_(a...); }                          \
  };
EMBER_LAPACK_TRAITS(float, s)
EMBER_LAPACK_TRAITS(double, d)
#undef EMBER_LAPACK_TRAITS

// Matrix `b` of a (B, rows, cols) tensor.
struct Mat {
  char* data;
  int64_t rows, cols, srow, scol, sbatch;
};

Mat as_mat(const TensorArg& t, const char* what) {
  if (t.ndim() != 3) throw std::invalid_argument(std::string(what) + ": kernel expects 3-D tensors");
  for (int64_t s : {t.shape[1], t.shape[2]})
    if (s > INT_MAX / 4)
      throw std::runtime_error(std::string(what) + ": matrix dimension exceeds LAPACK's int32 limit");
  return Mat{t.data, t.shape[1], t.shape[2], t.strides[1], t.strides[2], t.strides[0]};
}

// Copies rows x cols of matrix b into a column-major buffer with leading dimension ld.
template <typename T>
void load(const Mat& m, int64_t b, int64_t rows, int64_t cols, T* dst, int64_t ld) {
  const T* src = reinterpret_cast<const T*>(m.data) + b * m.sbatch;
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) dst[i + j * ld] = src[i * m.srow + j * m.scol];
}

// Writes rows x cols of a column-major buffer into matrix b of an output.
template <typename T>
void store(const Mat& m, int64_t b, int64_t rows, int64_t cols, const T* src, int64_t ld) {
  T* dst = reinterpret_cast<T*>(m.data) + b * m.sbatch;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * m.srow + j * m.scol] = src[i + j * ld];
}

// Element i of vector b in a (B, n) output, seen as a (B, n, 1) Mat.
template <typename T>
T& at(const Mat& m, int64_t b, int64_t i) {
  return reinterpret_cast<T*>(m.data)[b * m.sbatch + i * m.srow];
}

int to_int(int64_t v) { return static_cast<int>(v); }

// Runs fn(b, workspace) for every batch element: small matrices on OpenMP threads with one BLAS
// thread each; large ones one at a time with OpenBLAS's own threads.
template <typename Fn>
void batch_loop(int64_t batch, int64_t n, Fn fn) {
  if (batch > 1 && n <= 128 && get_num_threads() > 1) {
    BlasSingleThread guard;
    parallel_for(batch, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * n)), [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) fn(b);
    });
    return;
  }
  for (int64_t b = 0; b < batch; ++b) fn(b);
}

template <typename T>
int query_lwork(T w) {
  return std::max(1, static_cast<int>(w));
}

// Runs a kernel templated on float/double for the dtype of `t`.
template <template <typename> class K, typename... A>
std::vector<int> dispatch(DType dtype, const char* what, A&&... args) {
  switch (dtype) {
    case DType::Float32:
      return K<float>::run(std::forward<A>(args)...);
    case DType::Float64:
      return K<double>::run(std::forward<A>(args)...);
    default:
      EMBER_THROW_DTYPE(dtype, what);
  }
}

void check_dtypes(std::initializer_list<const TensorArg*> ts, const char* what) {
  for (const TensorArg* t : ts)
    if (t->dtype != (*ts.begin())->dtype) throw std::runtime_error(std::string(what) + ": kernel dtypes differ");
}

void check_batch(std::initializer_list<const TensorArg*> ts, const char* what) {
  for (const TensorArg* t : ts)
    if (t->shape[0] != (*ts.begin())->shape[0]) throw std::runtime_error(std::string(what) + ": batch sizes differ");
}

// -- det / slogdet: LU (getrf), then the product of U's diagonal and the pivots' sign --------

template <typename T>
struct LuDet {
  static std::vector<int> run(const Mat& a, const Mat& sign, const Mat& logabs, const Mat& det, int64_t batch) {
    int64_t n = a.rows;
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, n, [&](int64_t b) {
      std::vector<T> w(static_cast<size_t>(n * n));
      std::vector<int> ipiv(static_cast<size_t>(std::max<int64_t>(1, n)));
      load(a, b, n, n, w.data(), n);
      int ni = to_int(n), lda = std::max(1, ni), info = 0;
      if (n > 0) Lapack<T>::getrf(&ni, &ni, w.data(), &lda, ipiv.data(), &info);
      T s = 1, la = 0, d = 1;
      for (int64_t i = 0; i < n; ++i) {
        T u = w[i + i * n];
        if (ipiv[i] != i + 1) s = -s, d = -d;
        d *= u;
        s *= u < 0 ? T(-1) : (u > 0 ? T(1) : T(0));
        la += std::log(std::abs(u));
      }
      if (s == 0) la = -std::numeric_limits<T>::infinity();
      at<T>(sign, b, 0) = s;
      at<T>(logabs, b, 0) = la;
      at<T>(det, b, 0) = d;
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> lu_det(py::handle sign, py::handle logabs, py::handle det, py::handle a) {
  TensorArg ta = unpack(a), ts = unpack(sign), tl = unpack(logabs), td = unpack(det);
  Mat A = as_mat(ta, "lu_det"), S = as_mat(ts, "lu_det"), L = as_mat(tl, "lu_det"), D = as_mat(td, "lu_det");
  check_dtypes({&ta, &ts, &tl, &td}, "lu_det");
  check_batch({&ta, &ts, &tl, &td}, "lu_det");
  if (A.rows != A.cols || S.rows < 1 || L.rows < 1 || D.rows < 1) throw std::runtime_error("lu_det: bad shapes");
  return dispatch<LuDet>(ta.dtype, "lu_det", A, S, L, D, ta.shape[0]);
}

// -- inv: getrf + getri ----------------------------------------------------------------------

template <typename T>
struct Inv {
  static std::vector<int> run(const Mat& out, const Mat& a, int64_t batch) {
    int64_t n = a.rows;
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, n, [&](int64_t b) {
      if (n == 0) return;
      std::vector<T> w(static_cast<size_t>(n * n));
      std::vector<int> ipiv(static_cast<size_t>(n));
      load(a, b, n, n, w.data(), n);
      int ni = to_int(n), info = 0, lwork = -1;
      Lapack<T>::getrf(&ni, &ni, w.data(), &ni, ipiv.data(), &info);
      if (info == 0) {
        T q = 0;
        Lapack<T>::getri(&ni, w.data(), &ni, ipiv.data(), &q, &lwork, &info);
        lwork = query_lwork(q);
        std::vector<T> work(static_cast<size_t>(lwork));
        Lapack<T>::getri(&ni, w.data(), &ni, ipiv.data(), work.data(), &lwork, &info);
      }
      store(out, b, n, n, w.data(), n);
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> inv(py::handle out, py::handle a) {
  TensorArg to = unpack(out), ta = unpack(a);
  Mat O = as_mat(to, "inv"), A = as_mat(ta, "inv");
  check_dtypes({&to, &ta}, "inv");
  check_batch({&to, &ta}, "inv");
  if (A.rows != A.cols || O.rows != A.rows || O.cols != A.cols) throw std::runtime_error("inv: bad shapes");
  return dispatch<Inv>(ta.dtype, "inv", O, A, ta.shape[0]);
}

// -- solve: gesv on (n, n) A and (n, k) B ----------------------------------------------------

template <typename T>
struct Solve {
  static std::vector<int> run(const Mat& out, const Mat& a, const Mat& rhs, int64_t batch) {
    int64_t n = a.rows, k = rhs.cols;
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, n, [&](int64_t b) {
      if (n == 0 || k == 0) return;
      std::vector<T> w(static_cast<size_t>(n * n)), x(static_cast<size_t>(n * k));
      std::vector<int> ipiv(static_cast<size_t>(n));
      load(a, b, n, n, w.data(), n);
      load(rhs, b, n, k, x.data(), n);
      int ni = to_int(n), ki = to_int(k), info = 0;
      Lapack<T>::gesv(&ni, &ki, w.data(), &ni, ipiv.data(), x.data(), &ni, &info);
      store(out, b, n, k, x.data(), n);
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> solve(py::handle out, py::handle a, py::handle rhs) {
  TensorArg to = unpack(out), ta = unpack(a), tb = unpack(rhs);
  Mat O = as_mat(to, "solve"), A = as_mat(ta, "solve"), B = as_mat(tb, "solve");
  check_dtypes({&to, &ta, &tb}, "solve");
  check_batch({&to, &ta, &tb}, "solve");
  if (A.rows != A.cols || B.rows != A.rows || O.rows != B.rows || O.cols != B.cols)
    throw std::runtime_error("solve: bad shapes");
  return dispatch<Solve>(ta.dtype, "solve", O, A, B, ta.shape[0]);
}

// -- cholesky: potrf, the other triangle zeroed ------------------------------------------------

template <typename T>
struct Cholesky {
  static std::vector<int> run(const Mat& out, const Mat& a, bool upper, int64_t batch) {
    int64_t n = a.rows;
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, n, [&](int64_t b) {
      if (n == 0) return;
      std::vector<T> w(static_cast<size_t>(n * n));
      load(a, b, n, n, w.data(), n);
      int ni = to_int(n), info = 0;
      char uplo = upper ? 'U' : 'L';
      Lapack<T>::potrf(&uplo, &ni, w.data(), &ni, &info);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < n; ++i)
          if (upper ? i > j : i < j) w[i + j * n] = 0;
      store(out, b, n, n, w.data(), n);
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> cholesky(py::handle out, py::handle a, bool upper) {
  TensorArg to = unpack(out), ta = unpack(a);
  Mat O = as_mat(to, "cholesky"), A = as_mat(ta, "cholesky");
  check_dtypes({&to, &ta}, "cholesky");
  check_batch({&to, &ta}, "cholesky");
  if (A.rows != A.cols || O.rows != A.rows || O.cols != A.cols) throw std::runtime_error("cholesky: bad shapes");
  return dispatch<Cholesky>(ta.dtype, "cholesky", O, A, upper, ta.shape[0]);
}

// -- qr: geqrf, then orgqr for Q (q may have 0 columns: mode 'r') -------------------------------

template <typename T>
struct Qr {
  static std::vector<int> run(const Mat& q, const Mat& r, const Mat& a, int64_t batch) {
    int64_t m = a.rows, n = a.cols, k = std::min(m, n), qcols = q.cols;
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, std::max(m, n), [&](int64_t b) {
      // Room for A (m x n) and for Q (m x qcols) in the same buffer.
      int64_t cols = std::max(n, qcols), ld = std::max<int64_t>(1, m);
      std::vector<T> w(static_cast<size_t>(ld * std::max<int64_t>(1, cols)), T(0));
      std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(1, k)));
      load(a, b, m, n, w.data(), ld);
      int mi = to_int(m), ni = to_int(n), ki = to_int(k), ldi = to_int(ld), info = 0, lwork = -1;
      T wq = 0;
      if (k > 0) {
        Lapack<T>::geqrf(&mi, &ni, w.data(), &ldi, tau.data(), &wq, &lwork, &info);
        lwork = query_lwork(wq);
        std::vector<T> work(static_cast<size_t>(lwork));
        Lapack<T>::geqrf(&mi, &ni, w.data(), &ldi, tau.data(), work.data(), &lwork, &info);
      }
      // R: the upper triangle of the first r.rows rows.
      T* rdst = reinterpret_cast<T*>(r.data) + b * r.sbatch;
      for (int64_t i = 0; i < r.rows; ++i)
        for (int64_t j = 0; j < n; ++j) rdst[i * r.srow + j * r.scol] = j >= i ? w[i + j * ld] : T(0);
      if (qcols > 0 && m > 0) {
        int qi = to_int(qcols);
        lwork = -1;
        Lapack<T>::orgqr(&mi, &qi, &ki, w.data(), &ldi, tau.data(), &wq, &lwork, &info);
        lwork = query_lwork(wq);
        std::vector<T> work(static_cast<size_t>(lwork));
        Lapack<T>::orgqr(&mi, &qi, &ki, w.data(), &ldi, tau.data(), work.data(), &lwork, &info);
        store(q, b, m, qcols, w.data(), ld);
      }
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> qr(py::handle q, py::handle r, py::handle a) {
  TensorArg tq = unpack(q), tr = unpack(r), ta = unpack(a);
  Mat Q = as_mat(tq, "qr"), R = as_mat(tr, "qr"), A = as_mat(ta, "qr");
  check_dtypes({&tq, &tr, &ta}, "qr");
  check_batch({&tq, &tr, &ta}, "qr");
  if ((Q.cols > 0 && Q.rows != A.rows) || Q.cols > A.rows || R.cols != A.cols || R.rows > A.rows ||
      Q.cols < std::min(A.rows, A.cols) * (Q.cols > 0))
    throw std::runtime_error("qr: bad shapes");
  return dispatch<Qr>(ta.dtype, "qr", Q, R, A, ta.shape[0]);
}

// -- eigh: syevd (v has 0 columns for eigenvalues only) ----------------------------------------

template <typename T>
struct Eigh {
  static std::vector<int> run(const Mat& w_out, const Mat& v, const Mat& a, bool lower, int64_t batch) {
    int64_t n = a.rows;
    bool vectors = v.cols > 0;
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, n, [&](int64_t b) {
      if (n == 0) return;
      std::vector<T> w(static_cast<size_t>(n * n)), ev(static_cast<size_t>(n));
      load(a, b, n, n, w.data(), n);
      char jobz = vectors ? 'V' : 'N', uplo = lower ? 'L' : 'U';
      int ni = to_int(n), info = 0, lwork = -1, liwork = -1, iq = 0;
      T q = 0;
      Lapack<T>::syevd(&jobz, &uplo, &ni, w.data(), &ni, ev.data(), &q, &lwork, &iq, &liwork, &info);
      lwork = query_lwork(q);
      liwork = std::max(1, iq);
      std::vector<T> work(static_cast<size_t>(lwork));
      std::vector<int> iwork(static_cast<size_t>(liwork));
      Lapack<T>::syevd(&jobz, &uplo, &ni, w.data(), &ni, ev.data(), work.data(), &lwork, iwork.data(), &liwork,
                       &info);
      for (int64_t i = 0; i < n; ++i) at<T>(w_out, b, i) = ev[i];
      if (vectors) store(v, b, n, n, w.data(), n);
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> eigh(py::handle evals, py::handle evecs, py::handle a, bool lower) {
  TensorArg tw = unpack(evals), tv = unpack(evecs), ta = unpack(a);
  Mat W = as_mat(tw, "eigh"), V = as_mat(tv, "eigh"), A = as_mat(ta, "eigh");
  check_dtypes({&tw, &tv, &ta}, "eigh");
  check_batch({&tw, &tv, &ta}, "eigh");
  if (A.rows != A.cols || W.rows != A.rows || (V.cols > 0 && (V.rows != A.rows || V.cols != A.cols)))
    throw std::runtime_error("eigh: bad shapes");
  return dispatch<Eigh>(ta.dtype, "eigh", W, V, A, lower, ta.shape[0]);
}

// -- svd: gesdd. u is m x (m or k), vh is (n or k) x n, or both 0-column for values only -------

template <typename T>
struct Svd {
  static std::vector<int> run(const Mat& u, const Mat& s, const Mat& vh, const Mat& a, int64_t batch) {
    int64_t m = a.rows, n = a.cols, k = std::min(m, n);
    bool vectors = u.cols > 0 || vh.rows > 0;
    bool full = vectors && (u.cols > k || vh.rows > k);
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, std::max(m, n), [&](int64_t b) {
      int64_t ld = std::max<int64_t>(1, m);
      if (k == 0) {  // nothing to factor: full U and Vh are identities
        std::vector<T> eye_u(static_cast<size_t>(u.rows * u.cols), T(0)), eye_v(static_cast<size_t>(vh.rows * vh.cols));
        for (int64_t i = 0; i < std::min(u.rows, u.cols); ++i) eye_u[i + i * u.rows] = 1;
        for (int64_t i = 0; i < std::min(vh.rows, vh.cols); ++i) eye_v[i + i * vh.rows] = 1;
        store(u, b, u.rows, u.cols, eye_u.data(), std::max<int64_t>(1, u.rows));
        store(vh, b, vh.rows, vh.cols, eye_v.data(), std::max<int64_t>(1, vh.rows));
        return;
      }
      std::vector<T> w(static_cast<size_t>(m * n)), sv(static_cast<size_t>(k));
      load(a, b, m, n, w.data(), ld);
      char jobz = !vectors ? 'N' : (full ? 'A' : 'S');
      int64_t ucols = full ? m : k, vrows = full ? n : k;
      std::vector<T> ub(static_cast<size_t>(vectors ? m * ucols : 1)), vb(static_cast<size_t>(vectors ? vrows * n : 1));
      std::vector<int> iwork(static_cast<size_t>(8 * k));
      int mi = to_int(m), ni = to_int(n), ldi = to_int(ld), ldu = to_int(m), ldvt = to_int(vectors ? vrows : 1);
      int info = 0, lwork = -1;
      T q = 0;
      Lapack<T>::gesdd(&jobz, &mi, &ni, w.data(), &ldi, sv.data(), ub.data(), &ldu, vb.data(), &ldvt, &q, &lwork,
                       iwork.data(), &info);
      lwork = query_lwork(q);
      std::vector<T> work(static_cast<size_t>(lwork));
      Lapack<T>::gesdd(&jobz, &mi, &ni, w.data(), &ldi, sv.data(), ub.data(), &ldu, vb.data(), &ldvt, work.data(),
                       &lwork, iwork.data(), &info);
      for (int64_t i = 0; i < k; ++i) at<T>(s, b, i) = sv[i];
      if (vectors) {
        store(u, b, m, ucols, ub.data(), m);
        store(vh, b, vrows, n, vb.data(), vrows);
      }
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> svd(py::handle u, py::handle s, py::handle vh, py::handle a) {
  TensorArg tu = unpack(u), ts = unpack(s), tv = unpack(vh), ta = unpack(a);
  Mat U = as_mat(tu, "svd"), S = as_mat(ts, "svd"), V = as_mat(tv, "svd"), A = as_mat(ta, "svd");
  check_dtypes({&tu, &ts, &tv, &ta}, "svd");
  check_batch({&tu, &ts, &tv, &ta}, "svd");
  int64_t m = A.rows, n = A.cols, k = std::min(m, n);
  bool values_only = U.cols == 0 && V.rows == 0 && k > 0;
  bool reduced = U.rows == m && U.cols == k && V.rows == k && V.cols == n;
  bool full = U.rows == m && U.cols == m && V.rows == n && V.cols == n;
  if (S.rows != k || !(values_only || reduced || full)) throw std::runtime_error("svd: bad shapes");
  return dispatch<Svd>(ta.dtype, "svd", U, S, V, A, ta.shape[0]);
}

// -- lstsq: gels / gelsy / gelsd / gelss on (m, n) A and (m, k) B --------------------------------

template <typename T>
struct Lstsq {
  static std::vector<int> run(const Mat& x, const Mat& rank, const Mat& sv, const Mat& a, const Mat& rhs,
                              double rcond_d, char driver, int64_t batch) {
    int64_t m = a.rows, n = a.cols, k = rhs.cols, ldb = std::max<int64_t>(1, std::max(m, n));
    T rcond = static_cast<T>(rcond_d);
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, std::max(m, n), [&](int64_t b) {
      int64_t lda = std::max<int64_t>(1, m);
      std::vector<T> w(static_cast<size_t>(lda * std::max<int64_t>(1, n))),
          xb(static_cast<size_t>(ldb * std::max<int64_t>(1, k)), T(0));
      std::vector<T> s(static_cast<size_t>(std::max<int64_t>(1, std::min(m, n))));
      load(a, b, m, n, w.data(), lda);
      load(rhs, b, m, k, xb.data(), ldb);
      int mi = to_int(m), ni = to_int(n), ki = to_int(k), ldai = to_int(lda), ldbi = to_int(ldb);
      int info = 0, lwork = -1, r = 0;
      T q = 0;
      if (m > 0 && n > 0 && k > 0) {
        if (driver == 'l') {  // gels
          char trans = 'N';
          Lapack<T>::gels(&trans, &mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, &q, &lwork, &info);
          lwork = query_lwork(q);
          std::vector<T> work(static_cast<size_t>(lwork));
          Lapack<T>::gels(&trans, &mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, work.data(), &lwork, &info);
        } else if (driver == 'y') {
          std::vector<int> jpvt(static_cast<size_t>(n), 0);
          Lapack<T>::gelsy(&mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, jpvt.data(), &rcond, &r, &q, &lwork,
                           &info);
          lwork = query_lwork(q);
          std::vector<T> work(static_cast<size_t>(lwork));
          Lapack<T>::gelsy(&mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, jpvt.data(), &rcond, &r, work.data(),
                           &lwork, &info);
        } else if (driver == 'd') {
          int iq = 0;
          Lapack<T>::gelsd(&mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, s.data(), &rcond, &r, &q, &lwork, &iq,
                           &info);
          lwork = query_lwork(q);
          std::vector<T> work(static_cast<size_t>(lwork));
          std::vector<int> iwork(static_cast<size_t>(std::max(1, iq)));
          Lapack<T>::gelsd(&mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, s.data(), &rcond, &r, work.data(),
                           &lwork, iwork.data(), &info);
        } else {  // gelss
          Lapack<T>::gelss(&mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, s.data(), &rcond, &r, &q, &lwork,
                           &info);
          lwork = query_lwork(q);
          std::vector<T> work(static_cast<size_t>(lwork));
          Lapack<T>::gelss(&mi, &ni, &ki, w.data(), &ldai, xb.data(), &ldbi, s.data(), &rcond, &r, work.data(),
                           &lwork, &info);
        }
      }
      // The solution is the first n rows; below it (m > n) LAPACK leaves the residual components.
      store(x, b, x.rows, k, xb.data(), ldb);
      if (rank.rows > 0) reinterpret_cast<int64_t*>(rank.data)[b * rank.sbatch] = r;
      for (int64_t i = 0; i < sv.rows; ++i) at<T>(sv, b, i) = s[i];
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> lstsq(py::handle x, py::handle rank, py::handle sv, py::handle a, py::handle rhs, double rcond,
                       const std::string& driver) {
  TensorArg tx = unpack(x), tr = unpack(rank), ts = unpack(sv), ta = unpack(a), tb = unpack(rhs);
  Mat X = as_mat(tx, "lstsq"), R = as_mat(tr, "lstsq"), S = as_mat(ts, "lstsq"), A = as_mat(ta, "lstsq"),
      B = as_mat(tb, "lstsq");
  check_dtypes({&tx, &ts, &ta, &tb}, "lstsq");
  check_batch({&tx, &ta, &tb}, "lstsq");
  if (tr.dtype != DType::Int64) throw std::runtime_error("lstsq: rank must be int64");
  int64_t m = A.rows, n = A.cols;
  if (B.rows != m || X.cols != B.cols || X.rows > std::max(m, n) || X.rows < n ||
      (R.rows > 0 && tr.shape[0] != ta.shape[0]) ||
      (S.rows > 0 && (S.rows != std::min(m, n) || ts.shape[0] != ta.shape[0])))
    throw std::runtime_error("lstsq: bad shapes");
  char code;
  if (driver == "gels") code = 'l';
  else if (driver == "gelsy") code = 'y';
  else if (driver == "gelsd") code = 'd';
  else if (driver == "gelss") code = 's';
  else throw std::invalid_argument("lstsq: unknown driver " + driver);
  return dispatch<Lstsq>(ta.dtype, "lstsq", X, R, S, A, B, rcond, code, ta.shape[0]);
}

// -- lu_factor: getrf on a (B, m, n) A, LU written over the output, pivots (B, k) int32 --------

template <typename T>
struct LuFactor {
  static std::vector<int> run(const Mat& lu, const Mat& piv, const Mat& a, int64_t batch) {
    int64_t m = a.rows, n = a.cols, k = std::min(m, n);
    std::vector<int> infos(static_cast<size_t>(batch), 0);
    py::gil_scoped_release release;
    batch_loop(batch, std::max(m, n), [&](int64_t b) {
      std::vector<T> w(static_cast<size_t>(std::max<int64_t>(1, m * n)));
      std::vector<int> ipiv(static_cast<size_t>(std::max<int64_t>(1, k)));
      load(a, b, m, n, w.data(), std::max<int64_t>(1, m));
      int mi = to_int(m), ni = to_int(n), lda = std::max(1, mi), info = 0;
      if (k > 0) Lapack<T>::getrf(&mi, &ni, w.data(), &lda, ipiv.data(), &info);
      store(lu, b, m, n, w.data(), std::max<int64_t>(1, m));
      for (int64_t i = 0; i < k; ++i) at<int32_t>(piv, b, i) = ipiv[i];
      infos[b] = info;
    });
    return infos;
  }
};

std::vector<int> lu_factor(py::handle lu, py::handle pivots, py::handle a) {
  TensorArg tl = unpack(lu), tp = unpack(pivots), ta = unpack(a);
  Mat L = as_mat(tl, "lu_factor"), A = as_mat(ta, "lu_factor");
  check_dtypes({&tl, &ta}, "lu_factor");
  if (tp.dtype != DType::Int32 || tp.ndim() != 2) throw std::runtime_error("lu_factor: pivots must be (B, k) int32");
  Mat P{tp.data, tp.shape[1], 1, tp.strides[1], 0, tp.strides[0]};
  check_batch({&tl, &tp, &ta}, "lu_factor");
  if (L.rows != A.rows || L.cols != A.cols || P.rows != std::min(A.rows, A.cols))
    throw std::runtime_error("lu_factor: bad shapes");
  return dispatch<LuFactor>(ta.dtype, "lu_factor", L, P, A, ta.shape[0]);
}

// perm (B, m) int64: the row permutation that LAPACK's 1-based row swaps (B, k) describe, applied
// in order to the identity (row i of P A is row perm[i] of A).
void lu_pivots_to_perm(py::handle perm, py::handle pivots) {
  TensorArg to = unpack(perm), tp = unpack(pivots);
  if (to.dtype != DType::Int64 || to.ndim() != 2 || tp.dtype != DType::Int32 || tp.ndim() != 2 ||
      to.shape[0] != tp.shape[0] || tp.shape[1] > to.shape[1])
    throw std::runtime_error("lu_pivots_to_perm: expects perm (B, m) int64 and pivots (B, k) int32 with k <= m");
  int64_t batch = to.shape[0], m = to.shape[1], k = tp.shape[1];
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t* p = reinterpret_cast<const int32_t*>(tp.data) + b * tp.strides[0];
    for (int64_t i = 0; i < k; ++i) {
      int32_t v = p[i * tp.strides[1]];
      if (v < 1 || v > m)
        throw std::runtime_error("lu_unpack: pivots must be in the range [1, " + std::to_string(m) + "], got " +
                                 std::to_string(v));
    }
  }
  py::gil_scoped_release release;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t* o = reinterpret_cast<int64_t*>(to.data) + b * to.strides[0];
    const int32_t* p = reinterpret_cast<const int32_t*>(tp.data) + b * tp.strides[0];
    for (int64_t i = 0; i < m; ++i) o[i * to.strides[1]] = i;
    for (int64_t i = 0; i < k; ++i) {
      int64_t j = p[i * tp.strides[1]] - 1;
      std::swap(o[i * to.strides[1]], o[j * to.strides[1]]);
    }
  }
}

}  // namespace

void bind_lapack(py::module_& m) {
  m.def("lu_factor_", &lu_factor, py::arg("lu"), py::arg("pivots"), py::arg("a"),
        "LU (B,m,n) and 1-based pivots (B,min(m,n)) int32 of a (B,m,n) through getrf; returns info.");
  m.def("lu_pivots_to_perm_", &lu_pivots_to_perm, py::arg("perm"), py::arg("pivots"),
        "perm (B,m) int64 from getrf's row swaps (B,k) int32 (validated to lie in [1, m]).");
  m.def("lu_det_", &lu_det, py::arg("sign"), py::arg("logabsdet"), py::arg("det"), py::arg("a"),
        "sign, log|det| and det (each (B,1,1)) of a (B,n,n) through getrf; returns getrf's info per matrix.");
  m.def("inv_", &inv, py::arg("out"), py::arg("a"), "out = a^-1 for (B,n,n) through getrf/getri; returns info.");
  m.def("solve_", &solve, py::arg("out"), py::arg("a"), py::arg("b"),
        "out (B,n,k) = a^-1 b through gesv; returns info.");
  m.def("cholesky_", &cholesky, py::arg("out"), py::arg("a"), py::arg("upper"),
        "Cholesky factor of (B,n,n) through potrf; returns info.");
  m.def("qr_", &qr, py::arg("q"), py::arg("r"), py::arg("a"),
        "Q (B,m,0|k|m) and R (B,k|m,n) of a (B,m,n) through geqrf/orgqr; returns info.");
  m.def("eigh_", &eigh, py::arg("eigenvalues"), py::arg("eigenvectors"), py::arg("a"), py::arg("lower"),
        "Eigenvalues (B,n,1) and eigenvectors (B,n,n or 0) of a symmetric (B,n,n) through syevd; returns info.");
  m.def("svd_", &svd, py::arg("u"), py::arg("s"), py::arg("vh"), py::arg("a"),
        "U, S (B,k,1), Vh of a (B,m,n) through gesdd (U, Vh with 0 columns/rows: values only); returns info.");
  m.def("lstsq_", &lstsq, py::arg("x"), py::arg("rank"), py::arg("singular_values"), py::arg("a"), py::arg("b"),
        py::arg("rcond"), py::arg("driver"),
        "Least squares through gels/gelsy/gelsd/gelss: x (B,max(m,n)|n,k), rank (B,1,1 or 0), singular values "
        "(B,min(m,n),1 or 0); returns info.");
}

}  // namespace ember
