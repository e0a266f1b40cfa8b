// Exact leave-one-out of ridge regression along a grid of scalar lambdas, from one
// eigendecomposition (what RidgeCV does with an SVD): with the intercept eliminated by
// its Schur complement, G = X_c^T W X_c = V diag(s) V^T, z_i = V^T (x_i - mu),
// c = V^T X_c^T W y, every lambda costs O(n p):
//   h_i = 1/sum(w) + sum_k z_ik^2 / (s_k + lambda),
//   eta_i = ybar + sum_k z_ik c_k / (s_k + lambda),
// and the LOO prediction is the ALO (= exact, Corollary 2) formula. One Hessian pass,
// one O(p^3) eigendecomposition and one pass of z_i = V^T (x_i - mu) for the whole grid.
#pragma once

#include "problem.hpp"

namespace aloocv {

struct RidgePath {
  Mat losses;       // (n x k) 1/2 (y_i - eta~_i)^2
  Mat predictions;  // (n x k) eta~_i
  Mat coef;         // (p x k)
  Vec intercept;    // (k)
};

RidgePath ridge_path(const Problem& pb, const double* lams, Index k, int n_threads);

// The spectral form of ridge for many responses at once (batched solves sharing one
// factorization): with the features centered when pb.intercept (by the Schur complement
// of the intercept, never by copying X), G = X_c^T X_c = V diag(s) V^T and for each
// response column z_j of Z (n x m, column-major): C[:, j] = V^T X_c^T z_j. Then
// beta(lambda) = V diag(1 / (s + lambda)) C[:, j] and
// RSS_j(lambda) = ||z_j - zbar_j||^2 - sum_k C_kj^2 (s_k + 2 lambda) / (s_k + lambda)^2.
struct RidgeSpectrum {
  Vec s;   // (p) eigenvalues of G
  Mat V;   // (p x p) eigenvectors
  Mat C;   // (p x m)
  Vec mu;  // (p) column means (zero without intercept)
};
RidgeSpectrum ridge_spectrum(const Problem& pb, const double* Z, Index m, int n_threads);

// The eigendecomposition G = V diag(s) V^T of a symmetric G (eigenvalues ascending, clipped
// at 0; Eigen's SelfAdjointEigenSolver, compiled once, in ridge_path.cpp: 9-10 CPU-s of
// compile time per instance with GCC 12 -O2, measured on a loaded machine). Throws
// InvalidInput(`what` + " failed") when it fails.
void sym_eigen(const Mat& G, Vec& s, Mat& V, const char* what);

}  // namespace aloocv
