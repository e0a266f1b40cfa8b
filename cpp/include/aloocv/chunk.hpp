// Per-chunk kernels for a map-reduce driver (python/aloocv/_dask.py): every quantity the
// Newton fit, the closed-form leave-one-out estimates, the approximate K-fold and the
// exact hypergradient need, as sums over the rows of one chunk of (X, y, w, offset) at
// a given beta. The driver adds the partial sums of all chunks and does the p1 x p1
// algebra (factor, solves) once; nothing here knows how the chunks are distributed.
// Every kernel reuses the one-pass kernels (linear_predictor, gradient, hessian,
// leverages) and the per-sample formulas of loo.hpp / hypergrad.hpp.
#pragma once

#include "factor.hpp"
#include "loo.hpp"
#include "problem.hpp"

namespace aloocv {

// Sums over one chunk at beta (eta = X~ beta + offset).
struct ChunkSums {
  double loss = 0.0;    // sum_i w_i l(y_i, eta_i)
  double weight = 0.0;  // sum_i w_i
  Vec grad;             // (p1) X~^T (w l')
  Vec hess;             // (p1 x p1, column-major) X~^T diag(w l'') X~; empty unless asked
  // max_i |x~_i^T step| when a step is given
  double step_max = 0.0;
};

// One pass: the loss sum, the gradient and (with `hessian`) the Hessian of the chunk.
// With `check`, y is first checked against the loss's domain. With `clip`, the Hessian
// has w l'' clipped at 0 (factor_hessian's descent direction for a loss with negative
// curvature); with `step` (p1), also max_i |x~_i^T step| (SumsRequest, sums_model.hpp).
ChunkSums chunk_sums(const Problem& pb, LossKind loss, const Vec& beta, bool hessian, bool check,
                     int n_threads, const Vec* step = nullptr, bool clip = false);

// The closed forms of one chunk from the factor of the full (penalized) Hessian.
struct ChunkLoo {
  LooResult res;  // losses, predictions (eta~), leverages, den = 1 - d_i h_i
  Vec eta;        // linear predictor at beta (with the offset)
  // With `gradient` (method ALO): the partial sums of the reverse-mode hypergradient
  // (hypergrad.hpp), c_i = w_i l'(y_i, eta~_i) * inv_sw:
  Vec r;  // (p1) X~^T (c A)
  Vec S;  // (p1 x p1) X~^T diag(c B) X~; M = H^{-1} S H^{-1}
};

ChunkLoo chunk_loo(const Problem& pb, LossKind loss, const Vec& beta, const Cholesky& chol,
                   LooMethod method, bool gradient, double inv_sw, int n_threads);
// The same from the full penalized Hessian H (p1 x p1) itself, factored here.
ChunkLoo chunk_loo(const Problem& pb, LossKind loss, const Vec& beta, const Mat& H,
                   LooMethod method, bool gradient, double inv_sw, int n_threads);

// The second reverse-mode pass of the hypergradient: X~^T (w l''' q), q_j = x~_j^T M x~_j.
Vec chunk_adjoint(const Problem& pb, LossKind loss, const Vec& beta, const Mat& M, int n_threads);

// Per-fold sums of one chunk for the p x p form of the approximate K-fold (kfold.hpp):
// for each fold k, X~_S^T D_S X~_S and X~_S^T g_S over the chunk's rows of fold k
// (fold[i] in [0, K)). hess: (p1 x p1 x K), grad: (p1 x K).
struct ChunkFolds {
  Vec hess, grad;
};
ChunkFolds chunk_folds(const Problem& pb, LossKind loss, const Vec& beta, const int* fold, Index K,
                       int n_threads);

// One pass of B exact leave-one-out refits run in lockstep (the dask form of exact_loo):
// refit j is at beta.col(j) and leaves out the chunk's row exclude[j] (-1: its sample is
// in another chunk). Per refit, the chunk's sums without that row; for the refits
// hess_cols[0..n_hess) also the Hessian without it. Memory: one row block x B.
struct ChunkRefits {
  Vec loss;  // (B) sum_i w_i l(y_i, eta_ij), i != exclude[j]
  Mat grad;  // (p1 x B) X~^T (w l'(eta_.j)) without row exclude[j]
  Vec hess;  // (p1 x p1 x n_hess, column-major) X~^T diag(w l''(eta_.j)) X~ without it
};
ChunkRefits chunk_refits(const Problem& pb, LossKind loss, const Mat& beta, const int* exclude,
                         const int* hess_cols, Index n_hess, int n_threads);

}  // namespace aloocv
