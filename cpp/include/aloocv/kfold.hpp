// K-fold (leave-q-out) cross-validation from one fit (approximate) or by refits (exact).
// See docs/math/kfold.md.
//
// Approximate: the leave-q-out extension of ALO (the paper's remark after its
// Definition 6). For a fold S of q samples, with H = L L^T the Hessian of the full fit,
// D_S = diag(w l'')_S and g_S = (w l')_S, the held-out linear predictors are those of one
// Newton step from beta_hat on the problem without S, taken with its exact Hessian
// H_{-S} = H - X~_S^T D_S X~_S (a rank-q downdate). Two algebraically equal forms:
//
//  - q x q (Woodbury, docs/math/kfold.md): Z_S = L^{-1} X~_S^T (one TRSM), K_S = Z_S^T Z_S,
//      eta~_S = eta_S + K_S (I - D_S K_S)^{-1} g_S
//             = eta_S + c + K_S s o M^{-1} (s o c),   c = K_S g_S, s = sqrt(d_S),
//    with M = I - diag(s) K_S diag(s) symmetric (the identity (I - S S K)^{-1} =
//    I + S (I - S K S)^{-1} S K needs no division by s, so zero-weight samples are fine).
//    M is positive definite exactly when H_{-S} is. Cost O(q p^2 + q^2 p + q^3).
//  - p x p: beta~_S = beta_hat + H_{-S}^{-1} X~_S^T g_S, eta~_S = X~_S beta~_S, with H_{-S}
//    formed by a SYRK of the fold's rows and factored. Cost O(q p^2 + p^3).
//
// When every fold takes the p x p form and the folds partition the samples (a smooth
// problem of a loss whose curvature varies), H itself is summed from the folds' blocks
// X~_S^T D_S X~_S at beta_hat (the fold-wise end): one pass over the rows gives H and every
// H_{-S}, so the fit need not end on a fresh Hessian of its own (FitOptions::fresh_end off:
// holdout_foldwise_end, kfold_foldwise_end), and the fit's factor is not used.
//
// Each fold takes the cheaper form (q x q when q^2 p + q^3 / 3 < p^3 / 3, i.e. q below
// about p / 2): many small folds (leave-q-out, n_folds = n) cost O(n p^2 + n q^2) in
// all, a few large ones O(n p^2 + K p^3). Both are exact for quadratic objectives.
// Folds run in parallel; each fold's arithmetic is independent of the thread count.
//
// Exact: the full problem with the fold's weights set to zero, refitted from the full
// fit (newton_fit / enet_fit with beta0 = beta_hat), then the held-out rows predicted.
#pragma once

#include <vector>

#include "losses.hpp"
#include "problem.hpp"

namespace aloocv {

struct KFoldOutput {
  Vec losses, predictions;
  Index n_not_converged = 0;  // exact refits that missed the tolerance
  Index n_woodbury = 0;       // folds done in the q x q form (approximate)
};

// True when the q x q form is cheaper than the p x p form for a fold of q samples and
// p1 coordinates.
inline bool kfold_use_woodbury(Index q, Index p1) {
  const double a = static_cast<double>(q), b = static_cast<double>(p1);
  return a * a * (b + a / 3.0) < b * b * b / 3.0;
}

// Held-out sets: non-empty subsets of the samples without repeats; they may overlap and
// need not cover the samples (the complements of a scikit-learn splitter's training
// sets). Each set is left out on its own: the outputs of holdout_* hold, set after set,
// the held-out predictions and losses of the set's samples in the set's order.
using SampleSets = std::vector<std::vector<Index>>;

KFoldOutput holdout_approx(const Problem& pb, LossKind loss, FitState& st, const SampleSets& sets,
                           int n_threads);
// Whether holdout_approx / kfold_approx take the fold-wise end for these sets: then the fit
// they are given need not end on the Hessian at beta (FitOptions::fresh_end may be off).
bool holdout_foldwise_end(const Problem& pb, LossKind loss, const SampleSets& sets);
// The rule for the K sets of a partition of the samples with these sizes: a loss whose
// curvature varies (for a constant one the fit's factor is at beta_hat already), no L1
// term, every set in the p x p form (kfold_use_woodbury false), and the K blocks of
// p1 x p1 doubles within kFoldBlocksBudget bytes. The dask route (a p x p step per fold
// from the folds' blocks) asks it too, so that its fit is the in-memory one.
constexpr double kFoldBlocksBudget = 128.0 * 1024 * 1024;
bool foldwise_end_sizes(bool constant_curvature, bool has_l1, Index p1, const Index* sizes,
                        Index K);
bool foldwise_end_sizes(LossKind loss, bool has_l1, Index p1, const Index* sizes, Index K);
bool kfold_foldwise_end(const Problem& pb, LossKind loss, const int* fold, Index K);
KFoldOutput holdout_exact(const Problem& pb, LossKind loss, const FitState& st,
                          const SampleSets& sets, const FitOptions& opt);

// fold[i] in [0, K) for every sample; every fold non-empty (a partition: per-sample outputs).
KFoldOutput kfold_approx(const Problem& pb, LossKind loss, FitState& st, const int* fold, Index K,
                         int n_threads);
KFoldOutput kfold_exact(const Problem& pb, LossKind loss, const FitState& st, const int* fold,
                        Index K, const FitOptions& opt);

}  // namespace aloocv
