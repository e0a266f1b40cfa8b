// The one instantiation of Eigen's product and triangular kernels (eigen_kernels.hpp).
#define ALOOCV_EIGEN_KERNELS_DEFINE
#include "aloocv/blas.hpp"

#include <Eigen/Cholesky>
#include <algorithm>
#include <atomic>
#include <climits>

#ifdef ALOOCV_X86_SIMD
#include <immintrin.h>
#endif

namespace aloocv::blas {
namespace {
Table g_table;
std::atomic<bool> g_enabled{true};

bool fits_int(Index a) { return a >= 0 && a <= INT_MAX; }
}  // namespace

void set_table(const Table& t) { g_table = t; }
void set_enabled(bool on) { g_enabled.store(on); }
bool enabled() {
  return g_enabled.load() && g_table.syrk && g_table.trsm && g_table.potrf && g_table.gemm;
}

void syrk_lower(Index n, Index k, const double* A, Index lda, double beta, double* C, Index ldc) {
  if (n == 0) return;
  if (enabled() && fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldc) && k > 0) {
    char uplo = 'L', trans = 'N';
    int in = static_cast<int>(n), ik = static_cast<int>(k), ilda = static_cast<int>(lda),
        ildc = static_cast<int>(ldc);
    double alpha = 1.0;
    g_table.syrk(&uplo, &trans, &in, &ik, &alpha, const_cast<double*>(A), &ilda, &beta, C, &ildc);
    return;
  }
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> Cm(C, n, n, Eigen::OuterStride<>(ldc));
  if (beta == 0.0) {
    Cm.triangularView<Eigen::Lower>().setZero();
  } else if (beta != 1.0) {
    Cm.triangularView<Eigen::Lower>() *= beta;
  }
  if (k == 0) return;
  Eigen::Map<const Mat, 0, Eigen::OuterStride<>> Am(A, n, k, Eigen::OuterStride<>(lda));
  Cm.selfadjointView<Eigen::Lower>().rankUpdate(Am);
}

bool has_ssyrk() { return enabled() && g_table.ssyrk != nullptr; }

bool syrk_lower_f32(Index n, Index k, const float* A, Index lda, float* C, Index ldc) {
  if (!(enabled() && g_table.ssyrk && fits_int(n) && fits_int(k) && fits_int(lda) &&
        fits_int(ldc) && n > 0 && k > 0)) {
    return false;
  }
  char uplo = 'L', trans = 'N';
  int in = static_cast<int>(n), ik = static_cast<int>(k), ilda = static_cast<int>(lda),
      ildc = static_cast<int>(ldc);
  float alpha = 1.0f, beta = 0.0f;
  g_table.ssyrk(&uplo, &trans, &in, &ik, &alpha, const_cast<float*>(A), &ilda, &beta, C, &ildc);
  return true;
}

void trsm_lower(Index n, Index m, const double* L, Index ldl, double* B, Index ldb, bool trans) {
  if (n == 0 || m == 0) return;
  if (enabled() && fits_int(n) && fits_int(m) && fits_int(ldl) && fits_int(ldb)) {
    char side = 'L', uplo = 'L', tr = trans ? 'T' : 'N', diag = 'N';
    int in = static_cast<int>(n), im = static_cast<int>(m), ildl = static_cast<int>(ldl),
        ildb = static_cast<int>(ldb);
    double alpha = 1.0;
    g_table.trsm(&side, &uplo, &tr, &diag, &in, &im, &alpha, const_cast<double*>(L), &ildl, B,
                 &ildb);
    return;
  }
  Eigen::Map<const Mat, 0, Eigen::OuterStride<>> Lm(L, n, n, Eigen::OuterStride<>(ldl));
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> Bm(B, n, m, Eigen::OuterStride<>(ldb));
  if (trans) {
    Lm.transpose().triangularView<Eigen::Upper>().solveInPlace(Bm);
  } else {
    Lm.triangularView<Eigen::Lower>().solveInPlace(Bm);
  }
}

bool has_trmm() { return enabled() && g_table.trmm != nullptr; }

bool trmm_lower(Index n, Index m, const double* T, Index ldt, double* B, Index ldb) {
  if (!has_trmm() || !fits_int(n) || !fits_int(m) || !fits_int(ldt) || !fits_int(ldb)) {
    return false;
  }
  if (n == 0 || m == 0) return true;
  char side = 'L', uplo = 'L', tr = 'N', diag = 'N';
  int in = static_cast<int>(n), im = static_cast<int>(m), ildt = static_cast<int>(ldt),
      ildb = static_cast<int>(ldb);
  double alpha = 1.0;
  g_table.trmm(&side, &uplo, &tr, &diag, &in, &im, &alpha, const_cast<double*>(T), &ildt, B, &ildb);
  return true;
}

bool has_strmm() { return enabled() && g_table.strmm != nullptr; }

bool trmm_lower_f32(Index n, Index m, const float* T, Index ldt, float* B, Index ldb) {
  if (!has_strmm() || !fits_int(n) || !fits_int(m) || !fits_int(ldt) || !fits_int(ldb)) {
    return false;
  }
  if (n == 0 || m == 0) return true;
  char side = 'L', uplo = 'L', tr = 'N', diag = 'N';
  int in = static_cast<int>(n), im = static_cast<int>(m), ildt = static_cast<int>(ldt),
      ildb = static_cast<int>(ldb);
  float alpha = 1.0f;
  g_table.strmm(&side, &uplo, &tr, &diag, &in, &im, &alpha, const_cast<float*>(T), &ildt, B, &ildb);
  return true;
}

bool has_gemv() { return enabled() && g_table.gemv != nullptr; }

bool gemv(bool trans, Index m, Index n, double alpha, const double* A, Index lda, const double* x,
          double beta, double* y) {
  if (!has_gemv() || !fits_int(m) || !fits_int(n) || !fits_int(lda) || m == 0 || n == 0 ||
      lda < m) {
    return false;
  }
  char tr = trans ? 'T' : 'N';
  int im = static_cast<int>(m), in = static_cast<int>(n), ilda = static_cast<int>(lda), one = 1;
  g_table.gemv(&tr, &im, &in, &alpha, const_cast<double*>(A), &ilda, const_cast<double*>(x), &one,
               &beta, y, &one);
  return true;
}

#ifdef ALOOCV_X86_SIMD
namespace {
// Four entries of a row as float64 (float32 rows widened in registers).
__attribute__((target("avx2,fma"))) inline __m256d load4(const double* p) {
  return _mm256_loadu_pd(p);
}
__attribute__((target("avx2,fma"))) inline __m256d load4(const float* p) {
  return _mm256_cvtps_pd(_mm_loadu_ps(p));
}
// y = A x + beta y, A row-major m x n (row stride lda), float64 or float32 entries.
template <class T>
__attribute__((target("avx2,fma"))) void row_dots(Index m, Index n, const T* A, Index lda,
                                                  const double* x, double beta, double* y) {
  for (Index i = 0; i < m; ++i) {
    const T* r = A + i * lda;
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    Index j = 0;
    for (; j + 8 <= n; j += 8) {
      a0 = _mm256_fmadd_pd(load4(r + j), _mm256_loadu_pd(x + j), a0);
      a1 = _mm256_fmadd_pd(load4(r + j + 4), _mm256_loadu_pd(x + j + 4), a1);
    }
    const __m256d a = _mm256_add_pd(a0, a1);
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    double t = _mm_cvtsd_f64(s) + _mm_cvtsd_f64(_mm_unpackhi_pd(s, s));
    for (; j < n; ++j) t += static_cast<double>(r[j]) * x[j];
    y[i] = beta == 0.0 ? t : beta * y[i] + t;
  }
}
// y = A^T x + beta y, A row-major m x n (row stride lda), float64 or float32 entries.
template <class T>
__attribute__((target("avx2,fma"))) void row_axpys(Index m, Index n, const T* A, Index lda,
                                                   const double* x, double beta, double* y) {
  if (beta == 0.0) {
    std::fill(y, y + n, 0.0);
  } else if (beta != 1.0) {
    for (Index j = 0; j < n; ++j) y[j] *= beta;
  }
  for (Index i = 0; i < m; ++i) {
    const T* r = A + i * lda;
    const __m256d xi = _mm256_set1_pd(x[i]);
    Index j = 0;
    for (; j + 4 <= n; j += 4) {
      _mm256_storeu_pd(y + j, _mm256_fmadd_pd(xi, load4(r + j), _mm256_loadu_pd(y + j)));
    }
    for (; j < n; ++j) y[j] += x[i] * static_cast<double>(r[j]);
  }
}
}  // namespace
#endif

namespace {
std::atomic<bool> g_row_kernels{true};
}  // namespace

void set_row_kernels(bool on) { g_row_kernels.store(on); }

bool has_row_gemv() {
#ifdef ALOOCV_X86_SIMD
  return g_row_kernels.load() && cpu_has_avx2_fma();
#else
  return false;
#endif
}

namespace {
template <class T>
bool row_gemv_any(bool trans, Index m, Index n, const T* A, Index lda, const double* x, double beta,
                  double* y) {
#ifdef ALOOCV_X86_SIMD
  if (!has_row_gemv() || m <= 0 || n <= 0 || lda < n) return false;
  if (trans) {
    row_axpys(m, n, A, lda, x, beta, y);
  } else {
    row_dots(m, n, A, lda, x, beta, y);
  }
  return true;
#else
  (void)trans, (void)m, (void)n, (void)A, (void)lda, (void)x, (void)beta, (void)y;
  return false;
#endif
}
}  // namespace

bool row_gemv(bool trans, Index m, Index n, const double* A, Index lda, const double* x,
              double beta, double* y) {
  return row_gemv_any(trans, m, n, A, lda, x, beta, y);
}
bool row_gemv(bool trans, Index m, Index n, const float* A, Index lda, const double* x, double beta,
              double* y) {
  return row_gemv_any(trans, m, n, A, lda, x, beta, y);
}

void gemm(Index m, Index n, Index k, const double* A, Index lda, const double* B, Index ldb,
          double* C, Index ldc) {
  if (m == 0 || n == 0) return;
  if (enabled() && k > 0 && fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) &&
      fits_int(ldb) && fits_int(ldc)) {
    char tn = 'N';
    int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k),
        ilda = static_cast<int>(lda), ildb = static_cast<int>(ldb), ildc = static_cast<int>(ldc);
    double one = 1.0, zero = 0.0;
    g_table.gemm(&tn, &tn, &im, &in, &ik, &one, const_cast<double*>(A), &ilda,
                 const_cast<double*>(B), &ildb, &zero, C, &ildc);
    return;
  }
  Eigen::Map<const Mat, 0, Eigen::OuterStride<>> Am(A, m, k, Eigen::OuterStride<>(lda));
  Eigen::Map<const Mat, 0, Eigen::OuterStride<>> Bm(B, k, n, Eigen::OuterStride<>(ldb));
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> Cm(C, m, n, Eigen::OuterStride<>(ldc));
  Cm.noalias() = Am * Bm;
}

void gemm_ex(bool ta, bool tb, Index m, Index n, Index k, double alpha, const double* A, Index lda,
             const double* B, Index ldb, double beta, double* C, Index ldc) {
  if (m == 0 || n == 0) return;
  if (enabled() && k > 0 && fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) &&
      fits_int(ldb) && fits_int(ldc)) {
    char ca = ta ? 'T' : 'N', cb = tb ? 'T' : 'N';
    int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k),
        ilda = static_cast<int>(lda), ildb = static_cast<int>(ldb), ildc = static_cast<int>(ldc);
    g_table.gemm(&ca, &cb, &im, &in, &ik, &alpha, const_cast<double*>(A), &ilda,
                 const_cast<double*>(B), &ildb, &beta, C, &ildc);
    return;
  }
  using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  CMap Am(A, ta ? k : m, ta ? m : k, Eigen::OuterStride<>(lda));
  CMap Bm(B, tb ? n : k, tb ? k : n, Eigen::OuterStride<>(ldb));
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> Cm(C, m, n, Eigen::OuterStride<>(ldc));
  if (beta == 0.0) {
    Cm.setZero();
  } else if (beta != 1.0) {
    Cm *= beta;
  }
  if (k == 0) return;
  if (ta && tb) {
    Cm.noalias() += alpha * Am.transpose() * Bm.transpose();
  } else if (ta) {
    Cm.noalias() += alpha * Am.transpose() * Bm;
  } else if (tb) {
    Cm.noalias() += alpha * Am * Bm.transpose();
  } else {
    Cm.noalias() += alpha * Am * Bm;
  }
}

int potrf_lower(Index n, double* A, Index lda) {
  if (n == 0) return 0;
  if (enabled() && fits_int(n) && fits_int(lda)) {
    char uplo = 'L';
    int in = static_cast<int>(n), ilda = static_cast<int>(lda), info = 0;
    g_table.potrf(&uplo, &in, A, &ilda, &info);
    return info;
  }
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> Am(A, n, n, Eigen::OuterStride<>(lda));
  Eigen::LLT<Eigen::Ref<Mat, 0, Eigen::OuterStride<>>> llt(Am);  // in place
  if (llt.info() != Eigen::Success) return 1;
  return 0;
}

}  // namespace aloocv::blas
