// The matrix-free route for the multinomial loss (docs/math/matrix_free.md, "The
// multinomial loss"): the fit, the K x K leverage blocks of ALO and their exact values for
// a few samples from products with X~ and X~^T on blocks of K columns, O(nnz K) each, never
// a K p1 x K p1 (or p1 x p1) matrix.
//
// Coordinates: the problem and the coefficients are multinomial.hpp's (beta class-major,
// beta[a * p1 + j], the gauge term tau/2 (sum_a b_a)^2 of MnProblem::gauge with an
// intercept), so that the fits equal mn_fit's. Inside, the coefficients are a p1 x K
// row-major block (column a: class a), the shape the block products of mf::Operator take.
//  - MnHessianOp: H V = X~^T [w_i J_i (X~ V)_i] + pen .* V + gauge, for m probes side by
//    side (a p1 x mK block), one forward and one adjoint block product.
//  - MnPrecond: a block-Jacobi preconditioner: 1 / H_(ja)(ja) for the features, the K x K
//    intercept block (with the gauge term) by its Cholesky factor.
//  - mn_pcg: preconditioned conjugate gradients, one system of K p1 unknowns per probe.
//  - mn_cg_fit: truncated Newton as a model of newton_drive (the shared Armijo search).
//  - mn_random_blocks: block Hutchinson estimates of K_i = X~_i H^{-1} X~_i^T from
//    Rademacher probes in R^{n K}, E[(A z)_i z_i^T] = A_ii, plain and with the blocks of
//    the preconditioner's A0 = X~ M^{-1} X~^T as a control variate, per group of probes.
//  - mn_row_blocks: the exact blocks K_i of a few samples (K solves each).
#pragma once

#include <cstdint>

#include "matrix_free.hpp"
#include "multinomial.hpp"

namespace aloocv {

// Columns of one block product at most (m probes of K columns each: m = max(1, this / K));
// the scalar route's measured optimum of 8 to 32 columns (kBatchProbes) at n = 2e4, p = 1e5.
constexpr Index kMnBatchColumns = 32;

// Options of the matrix-free multinomial fit.
struct MnCgOptions {
  FitOptions fit;
  Index max_cg = 250;  // CG iterations per Newton step at most
};

// Newton-CG from beta0 (class-major, nullptr: mn_fit's cold start) to
// max|grad| / sum(w) <= tol, mn_fit's stopping test; offset (n K, row-major) is added to
// the scores (nullptr: none). hessian_products counts the Hessian-vector products (CG
// iterations), hessian_passes the preconditioners built.
MnState mn_cg_fit(const MnProblem& pb, const MnCgOptions& opt, const Vec* beta0,
                  const double* offset = nullptr);

// Number of entries of a packed symmetric K x K block (the upper triangle, row by row).
inline Index mn_packed(Index K) { return K * (K + 1) / 2; }

struct MnRandomBlocks {
  RowMat plain;    // (n x G T) group means of sym((A z)_i z_i^T) / s_i^2, packed (T entries)
  RowMat control;  // (n x G T) the same with (A - A0) z
  RowMat diag0;    // (n x T) the blocks of A0 = X~ M^{-1} X~^T
  RowMat eta;      // (n x K) the scores at beta (offset included)
  Index cg_iterations = 0;
  Index passes = 0;
  bool converged = true;
  double worst_residual = 0.0;
};

// The per-group estimates of the blocks K_i at beta (LeverageOptions: n_probes, n_groups,
// seed, first_probe, cg_rtol, max_cg, n_threads; dual is not used).
MnRandomBlocks mn_random_blocks(const MnProblem& pb, const Vec& beta, const double* offset,
                                const LeverageOptions& o);

// The exact blocks K_i (r x K x K, row-major) of the samples rows[0..r) at beta, by block
// PCG with K right-hand sides per sample.
Vec mn_row_blocks(const MnProblem& pb, const Vec& beta, const double* offset, const Index* rows,
                  Index r, double rtol, Index max_cg, int n_threads);

}  // namespace aloocv
