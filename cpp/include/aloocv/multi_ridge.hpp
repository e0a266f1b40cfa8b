// Ridge regression (squared loss, L2 penalty lam * P with P = diag(pen) > 0) for many
// responses Y (n x T) at once, every response and every lam sharing one decomposition.
//
// With the intercept eliminated by its Schur complement (weighted centering, never a
// copy of X), A = X_c^T W X_c and the generalized eigenproblem A v = s P v (V^T P V = I):
//   z_i = V^T (x_i - mu)                      (rows of Z, n x p; Z^T W Z = diag(s))
//   C   = Z^T W Y                             (p x T)
//   beta_t(lam) = V diag(1 / (s + lam)) C_t,  eta_it = ybar_t + z_i^T diag(1/(s+lam)) C_t
//   h_i(lam)    = 1/sum(w) + sum_k z_ik^2 / (s_k + lam)
//   y_it - eta~_it = (y_it - eta_it) / (1 - w_i h_i)          (exact LOO, Corollary 2)
// One Hessian pass, one p x p eigendecomposition, one pass for Z and one GEMM for C serve
// every lam and every response. A grid of k lams then costs one blocked GEMM
// Z_b (diag(f) C_tile) per spectral filter f, fused with the leave-one-out epilogue (no
// n x T temporaries). The filters f_j = s / (s + lam_j) of a grid are often numerically
// of low rank, band by band of the spectrum (a band far from a lam sees a nearly
// polynomial filter): they are compressed by SVDs to the ranks at which every filter is
// reproduced to kFilterTol, and GEMMs over the bands replace the k full ones.
#pragma once

#include "design.hpp"

namespace aloocv {

struct MultiRidge {
  Index n = 0, p = 0, T = 0;
  bool intercept = true;
  Vec w;            // (n) sample weights
  double sw = 0.0;  // their sum
  Vec s;            // (p) generalized eigenvalues, ascending, clamped at 0
  Mat Vt;           // (p x p) V^T: z_i = Vt (x_i - mu), beta = Vt^T g
  Mat Z;            // (n x p)
  Mat C;            // (p x T)
  Vec mu;           // (p) weighted feature means (0 without intercept)
  Vec ybar;         // (T) weighted response means (0 without intercept)
  DenseView Y;      // the responses, read in place (the caller keeps them alive)
};

// Absolute accuracy of the compressed spectral filters s / (s + lam) (values in [0, 1]).
constexpr double kFilterTol = 1e-13;

// pen: (p) positive per-feature penalty shape, or nullptr for the identity.
MultiRidge multi_ridge(const Design& X, const double* w, bool intercept, const DenseView& Y,
                       const double* pen, int n_threads);

struct MultiRidgeScores {
  Mat s2;               // (k x T) sum_i w_i (y_it - eta~_it(lam_j))^2
  Mat s4;               // (k x T) sum_i w_i (y_it - eta~_it(lam_j))^4
  Index rank = 0;       // number of spectral filters evaluated (k without compression)
  double passes = 0.0;  // their cost in GEMMs of inner dimension p (k without compression)
};
MultiRidgeScores multi_ridge_scores(const MultiRidge& mr, const double* lams, Index k,
                                    int n_threads);

struct MultiRidgeSolution {
  Mat coef;         // (p x T)
  Vec intercept;    // (T)
  Mat predictions;  // (n x T) leave-one-out predictions eta~ (empty unless asked)
};
// lam: (T) one lambda per response.
MultiRidgeSolution multi_ridge_solve(const MultiRidge& mr, const double* lam, bool predictions,
                                     int n_threads);

// (n) leverages h_i(lam).
Vec multi_ridge_leverages(const MultiRidge& mr, double lam);

// (n x T) held-out predictions of K-fold CV at lam by the fold downdate (Woodbury, exact
// for ridge): eta~_S = eta_S + K_S W_S^{1/2} (I - W_S^{1/2} K_S W_S^{1/2})^{-1}
// W_S^{1/2} (eta_S - y_S), K_S = X~_S H^{-1} X~_S^T. folds: (n) in [0, n_folds).
Mat multi_ridge_folds(const MultiRidge& mr, double lam, const int* folds, Index n_folds,
                      int n_threads);

}  // namespace aloocv
