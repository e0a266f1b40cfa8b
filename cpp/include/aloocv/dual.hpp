// The n x n dual route for n < p (L2 penalty, every feature penalized): with
// K = X P^{-1} X^T (n x n, computed once, O(n^2 p)), the coefficients stay in the
// representer form theta = P^{-1} X^T alpha, eta = b + K alpha, and every Newton step
// and the leverages cost O(n^3) instead of O(p^3).
//
// Newton step (S = D^{1/2}, M = I + S K S, r = u + alpha with u = w l'):
//   t = M^{-1} S K r,  db = (s^T t - sum u) / (s^T M^{-1} s),
//   v = -t - db (s - M^{-1} s),  dalpha = -r - S v - d db,  deta = db + K dalpha
// (no division by d: samples with zero curvature are fine). Leverages with the
// intercept eliminated by its Schur complement: h_i = 1/sum(d) + R_ii,
// R = K_c - K_c S M_c^{-1} S K_c, K_c = C K C^T, C = I - 1 d^T / sum(d), M_c = I + S K_c S.
// Kernel ridge regression is the same computation with a user's kernel K.
// See docs/math/dual.md.
#pragma once

#include "loo.hpp"
#include "problem.hpp"

namespace aloocv {

struct DualState {
  Vec alpha, eta;
  double b = 0.0;
  Index n_iter = 0;
  bool converged = false;
  double objective = 0.0;
  double grad_norm = 0.0;
};

// K = X P^{-1} X^T for the penalized features (pen > 0 required).
Mat dual_kernel(const Problem& pb, int n_threads);

struct DualResult {
  DualState st;
  Vec coef;  // theta (p); empty for a user kernel
  LooResult loo;
};

// Fit in the dual and the LOO `method` ("alo", "if", "lemma3", "exact"). With X == nullptr
// in pb (a user kernel), the loss must be squared and coef is not recovered. A given
// beta = (b, theta) (p1 entries, X needed) is taken as the fit instead: the closed forms
// and the leverages at beta, or exact refits warm-started from the dual fit. With `set`,
// the exact method refits only those samples.
DualResult dual_loo(const Problem& pb, LossKind loss, const Mat& K, LooMethod method,
                    const FitOptions& opt, bool want_loo, const Vec* beta = nullptr,
                    SampleSet set = {});

struct HyperGradient;
// The exact ALO hypergradient (d mean ALO / d lambda_j per feature) at the fit with linear
// predictor eta and coefficients coef, from the n x n system (see dual_gradient.cpp).
HyperGradient dual_gradient(const Problem& pb, LossKind loss, const Mat& K, const Vec& eta,
                            const Vec& coef, int n_threads);

}  // namespace aloocv
