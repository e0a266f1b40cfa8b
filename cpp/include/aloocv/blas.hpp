// A thin BLAS/LAPACK shim. The Python layer may register the Fortran-ABI routines of
// an already loaded BLAS (scipy's, through scipy.linalg.cython_blas): they reach
// optimized, runtime-dispatched kernels without compiling for a particular CPU.
// Without a registration (or when disabled) every routine falls back to Eigen.
// All matrices are column-major; callers keep dimensions within 32-bit BLAS ints.
#pragma once

#include <vector>

#include "common.hpp"

namespace aloocv::blas {

using dsyrk_t = void(char*, char*, int*, int*, double*, double*, int*, double*, double*, int*);
using dtrsm_t = void(char*, char*, char*, char*, int*, int*, double*, double*, int*, double*, int*);
using dpotrf_t = void(char*, int*, double*, int*, int*);
using ssyrk_t = void(char*, char*, int*, int*, float*, float*, int*, float*, float*, int*);
using dgemm_t = void(char*, char*, int*, int*, int*, double*, double*, int*, double*, int*, double*,
                     double*, int*);
using strmm_t = void(char*, char*, char*, char*, int*, int*, float*, float*, int*, float*, int*);
using dgemv_t = void(char*, int*, int*, double*, double*, int*, double*, int*, double*, double*,
                     int*);

struct Table {
  dsyrk_t* syrk = nullptr;
  dtrsm_t* trsm = nullptr;
  dpotrf_t* potrf = nullptr;
  dgemm_t* gemm = nullptr;
  ssyrk_t* ssyrk = nullptr;  // optional: float32 designs (see syrk_lower_f32)
  dtrsm_t* trmm = nullptr;   // optional: dtrmm (same signature as dtrsm; see trmm_lower)
  dgemv_t* gemv = nullptr;   // optional: dgemv (see gemv)
  strmm_t* strmm = nullptr;  // optional: float32 designs' leverage pass (see trmm_lower_f32)
};

void set_table(const Table& t);
void set_enabled(bool on);
bool enabled();  // registered and enabled

// C (n x n, lower triangle) = beta C + A A^T, with A n x k (leading dimension lda).
void syrk_lower(Index n, Index k, const double* A, Index lda, double beta, double* C, Index ldc);

// C (n x n, lower triangle) = A A^T in float32 for a float32 A n x k (leading dimension
// lda), through the registered SSYRK; false (C untouched) when none is registered or
// enabled. For float32 designs: the caller sums such blocks of a few hundred rows in
// float64.
bool has_ssyrk();  // registered and enabled
bool syrk_lower_f32(Index n, Index k, const float* A, Index lda, float* C, Index ldc);

// B (n x m) <- L^{-1} B (or L^{-T} B when trans) with L lower triangular n x n.
void trsm_lower(Index n, Index m, const double* L, Index ldl, double* B, Index ldb,
                bool trans = false);

// B (n x m) <- T B with T lower triangular n x n, through the registered DTRMM; false
// (B untouched) when none is registered or enabled. The leverages multiply by L^{-1}
// formed once: DTRMM runs at the speed of DSYRK, DTRSM at less than half of it.
bool has_trmm();  // registered and enabled
bool trmm_lower(Index n, Index m, const double* T, Index ldt, double* B, Index ldb);
// The same in float32 (STRMM): the leverage pass of float32 designs.
bool has_strmm();  // registered and enabled
bool trmm_lower_f32(Index n, Index m, const float* T, Index ldt, float* B, Index ldb);

// y (m or n) = alpha op(A) x + beta y with A m x n column-major (leading dimension lda),
// op(A) = A or A^T (trans), through the registered DGEMV; false (y untouched) when none
// is registered or enabled. The row-block products of a Newton step (design.hpp:
// block_gemv): OpenBLAS's runtime-dispatched GEMV is faster than Eigen's portable one.
bool has_gemv();  // registered and enabled
bool gemv(bool trans, Index m, Index n, double alpha, const double* A, Index lda, const double* x,
          double beta, double* y);

// y (m) = A x + beta y (trans false) or y (n) = A^T x + beta y (trans true) for a
// ROW-major m x n block A (row stride lda >= n): the core's own kernels, one row at a time
// in 256-bit fused multiply-adds (two accumulators for A x, an axpy per row for A^T x),
// compiled for AVX2 + FMA and chosen at run time; false (y untouched) on a CPU or a build
// without them (the caller then uses gemv above). The row-block products of the O(n p)
// passes (design.hpp: block_gemv): measured on one thread (Zen 4), a fused block pass
// (A x, then A^T g of the same block) takes 0.65-0.72x OpenBLAS's DGEMV pair at
// p = 50..400 (10.8 vs 16.1 ms at n = 1e5, p = 200; 24.6 vs 34.0 ms at n = 1e6, p = 50)
// and ties it where the block is in cache (n = 2e4, p = 50).
bool has_row_gemv();  // the CPU has them and they are enabled
// Switches the row kernels on or off (off: DGEMV / Eigen, as on a CPU without them).
void set_row_kernels(bool on);
bool row_gemv(bool trans, Index m, Index n, const double* A, Index lda, const double* x,
              double beta, double* y);
// The same on float32 rows, widened in registers (float64 products and sums, no copy).
bool row_gemv(bool trans, Index m, Index n, const float* A, Index lda, const double* x, double beta,
              double* y);

// C (n x n, lower triangle) += sum_k S_k T_k^T over the m columns of S and T (n x m,
// column-major, leading dimensions lds and ldt): with S = T diag(d) the weighted rank-m
// update T diag(d) T^T for weights d of any sign, in one pass (a SYRK takes sqrt(d) and a
// second update for negative d). The core's own kernel for narrow blocks: 8 x 6 register
// tiles of C in 256-bit fused multiply-adds over runs of kSmallSyrkRun columns, the n mod 8
// rows' short strip first, compiled for AVX2 + FMA and chosen at run time (with the row
// kernels: set_row_kernels). False (C untouched) on a CPU or a build without them, with
// n > kSmallSyrkMax, or switched off. The Hessian pass (hessian.cpp) on it, one thread,
// Zen 4: 29 GFlop/s at 1e6 x 50 (53% of DGEMM) against 18.5 through DSYRK, 37 against 29
// at 2e5 x 100, 41 against 35 at 1e5 x 150; DSYRK ties it from about 200 columns.
constexpr Index kSmallSyrkMax = 160;
constexpr Index kSmallSyrkRun = 64;
bool has_small_syrk();  // the CPU has it and the row kernels are on
bool syrk_small_lower(Index n, Index m, const double* S, Index lds, const double* T, Index ldt,
                      double* C, Index ldc);

// A lower triangular L (n x n) laid out for norms_lower_small: `pad` zero rows on top
// (n + pad a multiple of 8), column-major with leading dimension n + pad.
struct PaddedLower {
  Index n = 0, pad = 0;
  std::vector<double> a;
};
PaddedLower pad_lower(Index n, const double* L, Index ldl);
// h_k = ||L t_k||^2 for the m columns t_k of T (leading dimension ldt), or with `head_one`
// t_k = (1, T_k) (T_k of n - 1 entries: an intercept's column); the small kernel's
// register tiles (8 rows of L times 6 columns of T, the products summed into their squared
// norms without storing L T). False (h untouched) where syrk_small_lower would be.
bool norms_lower_small(const PaddedLower& L, Index m, const double* T, Index ldt, bool head_one,
                       double* h);

// C (m x n) = A (m x k) B (k x n), all column-major with leading dimensions.
void gemm(Index m, Index n, Index k, const double* A, Index lda, const double* B, Index ldb,
          double* C, Index ldc);

// C (m x n) = alpha op(A) op(B) + beta C with op(M) = M or M^T (ta, tb), column-major.
void gemm_ex(bool ta, bool tb, Index m, Index n, Index k, double alpha, const double* A, Index lda,
             const double* B, Index ldb, double beta, double* C, Index ldc);

// In-place lower Cholesky factor of A (n x n); returns LAPACK's info (0 = success).
int potrf_lower(Index n, double* A, Index lda);

}  // namespace aloocv::blas
