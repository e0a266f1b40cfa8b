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

// C[a.., b..] += sum_k S_k[a..a+8) T_k[b..b+NC) over the columns k in [k0, k1): one 8 x NC
// tile of C in 2 NC accumulators; R: 8 rows (8), 5-7 rows (masked, -8), 1-4 rows (-4).
template <int NC, int R>
__attribute__((target("avx2,fma"))) inline void syrk_tile(const double* S, Index lds,
                                                          const double* T, Index ldt, Index k0,
                                                          Index k1, Index a, Index b, __m256i mlo,
                                                          __m256i mhi, double* C, Index ldc) {
  __m256d c0[NC], c1[NC];
  for (int c = 0; c < NC; ++c) {
    c0[c] = _mm256_setzero_pd();
    c1[c] = _mm256_setzero_pd();
  }
  for (Index k = k0; k < k1; ++k) {
    const double* s = S + k * lds + a;
    const double* t = T + k * ldt + b;
    const __m256d lo = R == 8 ? _mm256_loadu_pd(s) : _mm256_maskload_pd(s, mlo);
    __m256d hi = _mm256_setzero_pd();
    if (R == 8) hi = _mm256_loadu_pd(s + 4);
    if (R == -8) hi = _mm256_maskload_pd(s + 4, mhi);
    for (int c = 0; c < NC; ++c) {
      const __m256d bc = _mm256_broadcast_sd(t + c);
      c0[c] = _mm256_fmadd_pd(lo, bc, c0[c]);
      if (R != -4) c1[c] = _mm256_fmadd_pd(hi, bc, c1[c]);
    }
  }
  for (int c = 0; c < NC; ++c) {
    double* col = C + (b + c) * ldc + a;
    if (R == 8) {
      _mm256_storeu_pd(col, _mm256_add_pd(_mm256_loadu_pd(col), c0[c]));
      _mm256_storeu_pd(col + 4, _mm256_add_pd(_mm256_loadu_pd(col + 4), c1[c]));
    } else {
      _mm256_maskstore_pd(col, mlo, _mm256_add_pd(_mm256_maskload_pd(col, mlo), c0[c]));
      if (R == -8) {
        _mm256_maskstore_pd(col + 4, mhi, _mm256_add_pd(_mm256_maskload_pd(col + 4, mhi), c1[c]));
      }
    }
  }
}
// One strip of rows [a, a + rows) of C: its tiles at the columns b < a + rows (the strip's
// lower part and diagonal).
template <int R>
__attribute__((target("avx2,fma"))) void syrk_strip(Index rows, const double* S, Index lds,
                                                    const double* T, Index ldt, Index k0, Index k1,
                                                    Index a, __m256i mlo, __m256i mhi, double* C,
                                                    Index ldc) {
  const Index bend = a + rows;
  Index b = 0;
  for (; b + 6 <= bend; b += 6) syrk_tile<6, R>(S, lds, T, ldt, k0, k1, a, b, mlo, mhi, C, ldc);
  using Tile = void (*)(const double*, Index, const double*, Index, Index, Index, Index, Index,
                        __m256i, __m256i, double*, Index);
  static constexpr Tile narrower[6] = {nullptr,          &syrk_tile<1, R>, &syrk_tile<2, R>,
                                       &syrk_tile<3, R>, &syrk_tile<4, R>, &syrk_tile<5, R>};
  if (bend > b) narrower[bend - b](S, lds, T, ldt, k0, k1, a, b, mlo, mhi, C, ldc);
}
__attribute__((target("avx2,fma"))) void syrk_small_avx2(Index n, Index m, const double* S,
                                                         Index lds, const double* T, Index ldt,
                                                         double* C, Index ldc) {
  // The strip of n mod 8 rows first, where it is short (its columns end at its last row),
  // then full strips of 8: a masked strip at the bottom would run over every column.
  const Index r0 = n % 8;
  alignas(32) long long lanes[8];
  for (int r = 0; r < 8; ++r) lanes[r] = r < r0 ? -1 : 0;
  const __m256i mlo = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  const __m256i mhi = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes + 4));
  for (Index k0 = 0; k0 < m; k0 += kSmallSyrkRun) {
    const Index k1 = std::min(m, k0 + kSmallSyrkRun);
    if (r0 > 4) {
      syrk_strip<-8>(r0, S, lds, T, ldt, k0, k1, 0, mlo, mhi, C, ldc);
    } else if (r0 > 0) {
      syrk_strip<-4>(r0, S, lds, T, ldt, k0, k1, 0, mlo, mhi, C, ldc);
    }
    for (Index a = r0; a < n; a += 8) syrk_strip<8>(8, S, lds, T, ldt, k0, k1, a, mlo, mhi, C, ldc);
  }
}

// h[c] += ||L (t_c)||^2 over the strips of L for NC columns t_c of T: per strip of 8 rows
// of L (rows a - pad .. a - pad + 7), the products over the columns j below its last row
// in 2 NC accumulators, then their squares into hs[c].
template <int NC>
__attribute__((target("avx2,fma"))) void norms_group(const PaddedLower& L, const double* T,
                                                     Index ldt, bool head_one, double* h) {
  const Index n = L.n, ld = n + L.pad;
  const double* A = L.a.data();
  // the squared norms' partial sums in memory (registers hold the 2 NC accumulators)
  alignas(32) double hs[NC][4] = {};
  // t_c[j] = T[c * ldt + j - shift] (j >= shift); with head_one t_c[0] = 1
  const Index shift = head_one ? 1 : 0;
  for (Index a = 0; a < ld; a += 8) {
    const Index jend = std::min(n, a - L.pad + 8);  // columns up to the strip's last row
    __m256d c0[NC], c1[NC];
    Index j = 0;
    if (head_one) {
      const __m256d lo = _mm256_loadu_pd(A + a), hi = _mm256_loadu_pd(A + a + 4);
      for (int c = 0; c < NC; ++c) {
        c0[c] = lo;
        c1[c] = hi;
      }
      j = 1;
    } else {
      for (int c = 0; c < NC; ++c) {
        c0[c] = _mm256_setzero_pd();
        c1[c] = _mm256_setzero_pd();
      }
    }
    for (; j < jend; ++j) {
      const double* col = A + j * ld + a;
      const __m256d lo = _mm256_loadu_pd(col), hi = _mm256_loadu_pd(col + 4);
      for (int c = 0; c < NC; ++c) {
        const __m256d bc = _mm256_broadcast_sd(T + c * ldt + j - shift);
        c0[c] = _mm256_fmadd_pd(lo, bc, c0[c]);
        c1[c] = _mm256_fmadd_pd(hi, bc, c1[c]);
      }
    }
    for (int c = 0; c < NC; ++c) {
      const __m256d sq = _mm256_fmadd_pd(c0[c], c0[c], _mm256_load_pd(hs[c]));
      _mm256_store_pd(hs[c], _mm256_fmadd_pd(c1[c], c1[c], sq));
    }
  }
  for (int c = 0; c < NC; ++c) h[c] = (hs[c][0] + hs[c][1]) + (hs[c][2] + hs[c][3]);
}
__attribute__((target("avx2,fma"))) void norms_lower_avx2(const PaddedLower& L, Index m,
                                                          const double* T, Index ldt, bool head_one,
                                                          double* h) {
  Index k = 0;
  for (; k + 6 <= m; k += 6) norms_group<6>(L, T + k * ldt, ldt, head_one, h + k);
  using Group = void (*)(const PaddedLower&, const double*, Index, bool, double*);
  static constexpr Group fewer[6] = {nullptr,         &norms_group<1>, &norms_group<2>,
                                     &norms_group<3>, &norms_group<4>, &norms_group<5>};
  if (m > k) fewer[m - k](L, T + k * ldt, ldt, head_one, h + k);
}
}  // namespace
#endif

namespace {
std::atomic<bool> g_row_kernels{true};
}  // namespace

PaddedLower pad_lower(Index n, const double* L, Index ldl) {
  PaddedLower out;
  out.n = n;
  out.pad = (8 - n % 8) % 8;
  const Index ld = n + out.pad;
  out.a.assign(static_cast<size_t>(ld * n), 0.0);
  for (Index j = 0; j < n; ++j)
    for (Index i = j; i < n; ++i) out.a[static_cast<size_t>(j * ld + out.pad + i)] = L[j * ldl + i];
  return out;
}

bool norms_lower_small(const PaddedLower& L, Index m, const double* T, Index ldt, bool head_one,
                       double* h) {
#ifdef ALOOCV_X86_SIMD
  const Index width = head_one ? L.n - 1 : L.n;
  if (!has_small_syrk() || L.n <= 0 || L.n > kSmallSyrkMax || ldt < width) return false;
  norms_lower_avx2(L, m, T, ldt, head_one, h);
  return true;
#else
  (void)L, (void)m, (void)T, (void)ldt, (void)head_one, (void)h;
  return false;
#endif
}

bool has_small_syrk() { return has_row_gemv(); }

bool syrk_small_lower(Index n, Index m, const double* S, Index lds, const double* T, Index ldt,
                      double* C, Index ldc) {
#ifdef ALOOCV_X86_SIMD
  if (!has_small_syrk() || n <= 0 || n > kSmallSyrkMax || lds < n || ldt < n || ldc < n) {
    return false;
  }
  syrk_small_avx2(n, m, S, lds, T, ldt, C, ldc);
  return true;
#else
  (void)n, (void)m, (void)S, (void)lds, (void)T, (void)ldt, (void)C, (void)ldc;
  return false;
#endif
}

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
