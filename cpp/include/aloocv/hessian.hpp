// One-pass kernels over the rows of X: linear predictor, gradient and Hessian.
// Parallel over row chunks with OpenMP; every reduction sums per-chunk partials in a
// fixed order, so results do not depend on the number of threads.
#pragma once

#include "design.hpp"

namespace aloocv {

// eta = X~ beta (beta = (b, theta) with intercept, else theta).
void linear_predictor(const Design& X, const double* beta, bool intercept, double* eta,
                      int n_threads);

// out (p1) = X~^T r.
void gradient(const Design& X, const double* r, bool intercept, double* out, int n_threads);

// H (p1 x p1, column-major, both triangles) = X~^T diag(d) X~ restricted to the
// columns `cols` (p1 = |cols| + intercept), d of any sign. Dense float64 rows of at most
// blas::kSmallSyrkMax columns: the core's own weighted update (blas::syrk_small_lower,
// rows read in place where they can be). Wider dense rows: each row block is scaled
// by sqrt(max(d, 0)) once and added by a symmetric rank-k update (SYRK); a block with
// negative d (a loss with negative curvature, e.g. Tweedie with power > 2) subtracts a
// second SYRK of sqrt(max(-d, 0)). Sparse: O(nnz_i^2) per row. Float32 dense designs, and
// float64 ones with `single` (the Newton steps' Hessians far from the optimum, newton.hpp),
// pack their row blocks in float32 for SSYRK (registered BLAS) and sum the blocks in
// float64.
void hessian(const Design& X, const double* d, bool intercept, double* H, int n_threads,
             Columns cols = {}, bool single = false);

// The first row of a dense X (float64 or float32, any strides) holding a NaN or an
// infinity, or -1 when every entry is finite: the validation layer's scan of X, one read
// of X in parallel row blocks (a single-threaded scan took a quarter of a 16-thread fit at
// n = 1e6, p = 200: benchmarks/scaling.md). Sparse designs: -1 (their values are one
// contiguous array, scanned by the caller).
Index first_nonfinite_row(const Design& X, int n_threads);

// The weighted second moments of the columns of a dense X with unit column stride (C
// order): all[j] = sum_i w_i x_ij^2 over every row and sampled[j] = the same sum over
// the rows 0, k, 2k, ... (w: nullptr for unit weights). One read of X.
void column_second_moments(const Design& X, const double* w, Index k, double* all, double* sampled,
                           int n_threads);

// Row block size of the packed kernels for p1 columns (about 1 MiB per buffer).
inline Index block_rows(Index p1) {
  return std::min<Index>(2048, std::max<Index>(32, Index(131072) / std::max<Index>(1, p1)));
}

}  // namespace aloocv
