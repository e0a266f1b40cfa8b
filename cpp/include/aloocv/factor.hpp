// Cholesky factorization of the (penalized) Hessian and the leverages built on it.
// See docs/math/alo.md.
#pragma once

#include <vector>

#include "design.hpp"

namespace aloocv {

class Cholesky {
 public:
  // Factors the symmetric matrix H (p1 x p1, column-major; the lower triangle is read).
  // Throws SingularHessian when H is not numerically positive definite.
  void factor(const double* H, Index p1);
  bool empty() const { return p1_ == 0; }
  Index size() const { return p1_; }
  const double* lower() const { return L_.data(); }
  // min_j L_jj^2 / H_jj: for each coordinate, the share of its curvature not explained by
  // the coordinates before it (1 - R^2 of a weighted regression on them; invariant to the
  // scaling of the coordinates). A cheap estimate of the reciprocal condition number of H
  // after diagonal scaling: relative errors of solves and leverages scale like
  // eps / rcond() when it is small (near-collinear features with a tiny penalty).
  double rcond() const { return rcond_; }
  // b <- L^{-1} b
  void solve_lower(double* b) const;
  // b <- H^{-1} b
  void solve(double* b) const;
  // H^{-1} (p1 x p1, column-major, both triangles)
  Mat inverse() const;

 private:
  Index p1_ = 0;
  double rcond_ = 0.0;
  std::vector<double> L_;
};

// The leverage passes multiply row blocks by an explicit L^{-1} (one DTRMM per block, the
// speed of the Hessian's DSYRK; DTRSM per block ran at less than half of it) where the
// factor's rcond() is at least kTrmmMinRcond and a DTRMM is registered; below it, blocked
// triangular solves.
constexpr double kTrmmMinRcond = 1e-6;
// L^{-1} (p1 x p1, column-major, zeros above the diagonal) where the rule above allows
// it, else an empty matrix (the caller then solves with L).
Mat lower_inverse_for_trmm(const Cholesky& chol);

// h_i = x~_i^T H^{-1} x~_i for every row, with x~ restricted to `cols` (H is then the
// |cols| + intercept Hessian of those columns). Dense float64 rows of at most
// blas::kSmallSyrkMax columns: the small kernel (blas::norms_lower_small, rows in place
// where they can be). Other dense rows: ||L^{-1} x~_i||^2 per packed
// row block, by DTRMM with L^{-1} formed once (registered BLAS, rcond() >= 1e-6) or by
// blocked triangular solves. Sparse rows: the quadratic form of the
// explicit inverse over the row's nonzeros, O(nnz_i^2) per row after one O(p^3) inverse.
// With `probe` (p1, in the coordinates of H): also *probe_max = max_i |x~_i^T probe|, taken
// from the rows while they are in cache (the guard of a fused end, newton.hpp), O(n p).
void leverages(const Design& X, bool intercept, const Cholesky& chol, double* h, int n_threads,
               Columns cols = {}, const Vec* probe = nullptr, double* probe_max = nullptr);

}  // namespace aloocv
