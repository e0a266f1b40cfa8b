// The result objects that the core's calls return (bound, with their docstrings, in
// bind_results.cpp): numpy arrays are built once, by the binding that fills the result,
// and held here, so that reading a property never copies. A field that a call does not
// produce is None. No math here.
//
// The structs hold Python objects: build, copy and destroy them with the GIL held (never
// inside run_released).
#pragma once

#include <pybind11/pybind11.h>

#include "arrays.hpp"

namespace aloocv::bind {

namespace py = pybind11;

// A fitted GLM (FitState): aloocv._core.FitResult.
struct FitOut {
  py::object coef = py::none();  // (p,)
  double intercept = 0.0;
  Index n_iter = 0;
  bool converged = false;
  double objective = 0.0;
  double grad_norm = 0.0;
  Index hessian_passes = 0;
  Index single_hessian_passes = 0;
  Index sampled_hessian_passes = 0;
  Index matvec_passes = 0;
  Index fused_end_fallbacks = 0;
  double stale_eta = 0.0;
  Index cg_iterations = 0;  // Newton-CG fits (matrix-free route)
};

// The fit and its leave-one-out values: aloocv._core.LooResult.
struct LooOut : FitOut {
  py::object losses = py::none();       // (n,) or (len(subset),)
  py::object predictions = py::none();  // (n,)
  py::object leverages = py::none();    // (n,); None for 'exact'
  py::object downdate = py::none();     // (n,) 1 - d_i h_i; None for 'exact'
  py::object rcond = py::none();        // float: the factor's reciprocal condition estimate
  Index n_not_converged = 0;
  Index n_singular = 0;                      // exact refits with a singular Hessian
  py::object singular_samples = py::none();  // int64 (n_singular,) with 'exact'
  py::object grad_l2 = py::none();           // (p,) with the hypergradient
  py::object grad_l1 = py::none();           // (p,) with the hypergradient
  py::object grad_along = py::none();        // float: the derivative along a direction
  py::object eta = py::none();               // (n,) the fit's linear predictor (primal route)
};

// ALO, its exact gradient and the gradient's directional derivatives:
// aloocv._core.AloTangentsResult.
struct AloTangentsOut : LooOut {
  py::object tangent_l2 = py::none();  // (p, m)
  py::object tangent_l1 = py::none();  // (p, m)
};

// Per-group randomized leverage estimates (matrix-free route):
// aloocv._core.RandomLeveragesResult.
struct RandomLeveragesOut {
  py::object plain = py::none();    // (n, G)
  py::object control = py::none();  // (n, G)
  py::object diag0 = py::none();    // (n,)
  py::object eta = py::none();      // (n,)
  py::object g = py::none();        // (n,)
  py::object d = py::none();        // (n,)
  Index cg_iterations = 0;
  Index passes = 0;
  bool converged = true;
  double worst_residual = 0.0;
  bool dual = false;
  Index exact_rows = 0;
};

// K-fold or held-out sets: aloocv._core.KFoldResult.
struct KFoldOut : FitOut {
  py::object losses = py::none();
  py::object predictions = py::none();
  Index n_not_converged = 0;
  Index n_woodbury = 0;
  double seconds_fit = 0.0;
  double seconds_folds = 0.0;
};

// The n x n dual route and kernel ridge: aloocv._core.DualResult.
struct DualOut {
  py::object coef = py::none();
  double intercept = 0.0;
  Index n_iter = 0;
  bool converged = false;
  double objective = 0.0;
  double grad_norm = 0.0;
  py::object alpha = py::none();             // (n,) dual coefficients
  py::object losses = py::none();            // with LOO
  py::object predictions = py::none();       // with LOO
  py::object leverages = py::none();         // with LOO, not 'exact'
  py::object downdate = py::none();          // with LOO, not 'exact'
  py::object n_not_converged = py::none();   // int, with LOO
  py::object n_singular = py::none();        // int, with LOO
  py::object singular_samples = py::none();  // int64 array, with exact LOO
  py::object grad_l2 = py::none();           // with the hypergradient
  py::object grad_l1 = py::none();           // with the hypergradient
};

// Exact ridge LOO along a grid of lambdas: aloocv._core.RidgePathResult.
struct RidgePathOut {
  py::object losses = py::none();       // (n, k)
  py::object predictions = py::none();  // (n, k)
  py::object coef = py::none();         // (p, k)
  py::object intercept = py::none();    // (k,)
};

// The eigendecomposition of the centered Gram matrix: aloocv._core.RidgeSpectrumResult.
struct RidgeSpectrumOut {
  py::object s = py::none();   // (p,) eigenvalues
  py::object V = py::none();   // (p, p) eigenvectors
  py::object C = py::none();   // (p, m) V^T X_c^T Z
  py::object mu = py::none();  // (p,) column means (zeros without intercept)
};

// aloocv._core.MultiRidgeScores.
struct MultiRidgeScoresOut {
  py::object s2 = py::none();  // (k, T)
  py::object s4 = py::none();  // (k, T)
  Index rank = 0;
  double passes = 0.0;
};

// aloocv._core.MultiRidgeSolution.
struct MultiRidgeSolutionOut {
  py::object coef = py::none();         // (p, T)
  py::object intercept = py::none();    // (T,)
  py::object predictions = py::none();  // (n, T) or None
};

// A multinomial fit (MnState): aloocv._core.MultinomialFitResult.
struct MnFitOut {
  py::object coef = py::none();       // (K, p)
  py::object intercept = py::none();  // (K,)
  Index n_iter = 0;
  bool converged = false;
  double objective = 0.0;
  double grad_norm = 0.0;
  Index hessian_passes = 0;
  Index hessian_products = 0;
};

// aloocv._core.MultinomialLooResult.
struct MnLooOut : MnFitOut {
  py::object predictions = py::none();  // (n, K)
  py::object losses = py::none();       // (n,)
  Index n_not_converged = 0;
  py::object leverages = py::none();  // (n, K, K); None for 'exact'
  py::object det = py::none();        // (n,) det(I - D_i K_i); None for 'exact'
  py::object gradient = py::none();   // (p,) with return_gradient
};

// One row chunk's sums at beta: aloocv._core.ChunkSumsResult.
struct ChunkSumsOut {
  double loss = 0.0;
  double weight = 0.0;
  py::object grad = py::none();
  py::object hess = py::none();      // with hessian
  py::object step_max = py::none();  // float (chunk_sums); None (multinomial)
};

// One row chunk's leave-one-out values: aloocv._core.ChunkLooResult.
struct ChunkLooOut {
  py::object eta = py::none();
  py::object losses = py::none();
  py::object predictions = py::none();
  py::object leverages = py::none();
  py::object downdate = py::none();
  py::object r = py::none();  // with gradient (chunk_loo)
  py::object S = py::none();  // with gradient
};

// One row chunk's sums for a batch of leave-one-out refits: aloocv._core.ChunkRefitsResult.
struct ChunkRefitsOut {
  py::object loss = py::none();  // (B,)
  py::object grad = py::none();  // (p1, B)
  py::object hess = py::none();  // (p1, p1, m)
};

// A Newton fit over a sums source (sums_model.hpp): aloocv._core.SumsFitResult.
struct SumsFitOut {
  py::object beta = py::none();                 // (p1,) intercept first
  py::object grad = py::none();                 // (p1,) penalized gradient
  py::object hessian = py::none();              // (p1, p1) penalized Hessian of the factor
  py::object unpenalized_hessian = py::none();  // (p1, p1) X~^T D X~
  bool hessian_at_point = false;
  double objective = 0.0;
  Index n_iter = 0;
  Index hessian_passes = 0;
  Index n_evals = 0;
  bool converged = false;
  bool stalled = false;
  double grad_norm = 0.0;
  double loss = 0.0;                       // the source's unpenalized sums at beta
  py::object loss_grad = py::none();       // (p1,)
  py::object end_guard_step = py::none();  // (p1,) the deferred guard's step, or None
  double end_guard_dec = 0.0;
};

// An elastic-net fit over a sums source (enet.hpp): aloocv._core.EnetSumsFitResult.
struct EnetSumsFitOut {
  py::object beta = py::none();     // (p1,)
  py::object grad = py::none();     // (p1,) gradient of the smooth part
  py::object hessian = py::none();  // on the intercept and the active columns
  py::object active = py::none();   // int64 feature indices of the nonzero coefficients
  double objective = 0.0;
  Index n_iter = 0;
  Index hessian_passes = 0;
  Index n_evals = 0;
  bool converged = false;
  double grad_norm = 0.0;
};

// The fields of a FitState (coef without the intercept).
inline void fill_fit(FitOut& out, const FitState& st, bool intercept) {
  const Index off = intercept ? 1 : 0;
  out.coef = to_numpy(st.beta.tail(st.beta.size() - off));
  out.intercept = intercept ? st.beta[0] : 0.0;
  out.n_iter = st.n_iter;
  out.converged = st.converged;
  out.objective = st.objective;
  out.grad_norm = st.grad_norm;
  out.hessian_passes = st.hessian_passes;
  out.single_hessian_passes = st.single_hessian_passes;
  out.sampled_hessian_passes = st.sampled_hessian_passes;
  out.matvec_passes = st.matvec_passes;
  out.fused_end_fallbacks = st.fused_end_fallbacks;
  out.stale_eta = st.stale_eta;
  out.cg_iterations = st.cg_iterations;
}

inline FitOut fit_out(const FitState& st, bool intercept) {
  FitOut out;
  fill_fit(out, st, intercept);
  return out;
}

}  // namespace aloocv::bind
