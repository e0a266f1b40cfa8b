// Cholesky factorization of the (penalized) Hessian and the leverages built on it.
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
  // b <- L^{-1} b
  void solve_lower(double* b) const;
  // b <- H^{-1} b
  void solve(double* b) const;

 private:
  Index p1_ = 0;
  std::vector<double> L_;
};

// h_i = x~_i^T H^{-1} x~_i = ||L^{-1} x~_i||^2 for every row, by blocked triangular
// solves against packed row blocks (never an explicit inverse).
void leverages(const DenseView& X, bool intercept, const Cholesky& chol, double* h, int n_threads);

}  // namespace aloocv
