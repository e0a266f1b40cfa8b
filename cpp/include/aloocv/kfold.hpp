// K-fold cross-validation from one fit (approximate) or by refits (exact).
//
// Approximate: the leave-q-out extension of ALO (the paper's remark after its
// Definition 6), one Newton step from beta_hat on the problem without fold S with its
// exact Hessian H_{-S} = H - X~_S^T D_S X~_S:
//   beta~_S = beta_hat + H_{-S}^{-1} X~_S^T g_S,   eta~_S = X~_S beta~_S,
// which equals the Woodbury form eta_S + K_S (I - D_S K_S)^{-1} g_S of DESIGN.md
// (K_S = X~_S H^{-1} X~_S^T) and is exact for quadratic objectives. The p x p form
// costs O(q p^2 + p^3) per fold, O(n p^2 + K p^3) in all; the q x q Woodbury form would
// cost O(q^3) per fold, which is worse whenever folds are larger than p.
#pragma once

#include <vector>

#include "losses.hpp"
#include "problem.hpp"

namespace aloocv {

struct KFoldOutput {
  Vec losses, predictions;
  Index n_not_converged = 0;
};

// fold[i] in [0, K) for every sample.
KFoldOutput kfold_approx(const Problem& pb, LossKind loss, FitState& st, const int* fold, Index K,
                         int n_threads);
KFoldOutput kfold_exact(const Problem& pb, LossKind loss, const FitState& st, const int* fold,
                        Index K, const FitOptions& opt);

}  // namespace aloocv
