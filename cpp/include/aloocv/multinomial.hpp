// Multinomial logistic regression (softmax, full K-class parametrization) with an L2
// penalty, and its leave-one-out estimators with a K x K block per sample.
// See docs/math/multinomial.md.
//
//   min_B  sum_i w_i ce(y_i, eta_i) + 1/2 sum_a sum_j pen_j B_aj^2,   eta_i = B x~_i (K)
//   ce(y, eta) = logsumexp(eta) - eta_y
//
// Coordinates: beta[a * p1 + j] (class-major, p1 = p + intercept); the Hessian is the
// K p1 x K p1 matrix with block (a, b) = X~^T diag(w (mu_a delta_ab - mu_a mu_b)) X~ plus
// the penalty. The loss is invariant to adding one constant to every class's intercept:
// that gauge is fixed by the term tau/2 (sum_a b_a)^2 (tau = sum(w) / K^2), whose minimum
// is sum_a b_a = 0 (scikit-learn's solution) and which makes the Hessian positive
// definite. The Newton step of any leave-one-out problem is orthogonal to the gauge
// direction (its gradient is), so no ALO quantity depends on tau.
#pragma once

#include "loo.hpp"
#include "newton.hpp"
#include "sums_model.hpp"

namespace aloocv {

// Class frequencies are clipped here before the log of the starting intercepts (the dask
// backend's cold start reads it through aloocv._core).
constexpr double kMinClassShare = 1e-6;

// A Newton step of mn_fit or mn_sums_fit that cuts the gradient norm at least this much
// lets the next one reuse the factor (chord steps).
constexpr double kMnChordRatio = 0.25;

struct MnProblem {
  Design X;
  const double* y = nullptr;  // labels 0..K-1 as doubles
  const double* w = nullptr;  // nullptr: unit weights
  Index K = 2;
  bool intercept = true;
  Vec pen;  // (p1) per-coordinate L2 penalty, 0 for the intercept; shared by the classes

  Index n() const { return X.n; }
  Index p1() const { return X.p + (intercept ? 1 : 0); }
  Index dim() const { return K * p1(); }
  double weight(Index i) const { return w ? w[i] : 1.0; }
  double weight_sum() const {
    if (!w) return static_cast<double>(X.n);
    double s = 0.0;
    for (Index i = 0; i < X.n; ++i) s += w[i];
    return s;
  }
  // The gauge term's weight (0 without intercept).
  double gauge() const { return intercept ? weight_sum() / static_cast<double>(K * K) : 0.0; }
  // Throws InvalidInput unless every y is an integer label in [0, K).
  void check() const;
};

struct MnState {
  Vec beta;       // (K p1) class-major
  Vec eta;        // (n K) row-major: eta[i K + a]
  Vec grad;       // (K p1)
  Cholesky chol;  // factor of the penalized, gauge-fixed Hessian at beta (when factored)
  bool factored = false;
  double objective = 0.0;
  Index n_iter = 0;
  bool converged = false;
  double grad_norm = 0.0;  // max |grad| / sum(w)
  Index hessian_passes = 0;
  Index hessian_products = 0;  // Hessian-vector products of the Newton-CG steps
};

// Softmax of e (K) into mu; returns logsumexp(e).
double mn_softmax(const double* e, Index K, double* mu);

// The cold start of mn_fit (sample `skip` left out): zero slopes and, with an intercept,
// the centered logs of the class shares (clipped at kMinClassShare); class-major.
Vec mn_cold_start(const MnProblem& pb, Index skip = -1);

// Damped Newton from beta0 (nullptr: zero slopes, centered log class frequencies) with
// Armijo backtracking; `skip` >= 0 drops that sample (exact leave-one-out refits).
// With `factor_end` the returned state holds the Hessian factor at the returned beta.
// Large problems ((K + 1) p1 >= 256) and fits given `precond` take Newton-CG steps
// (conjugate gradients on Hessian-vector products, preconditioned by `precond` or by a
// Kronecker approximation of the Hessian) instead of exact Hessian passes.
MnState mn_fit(const MnProblem& pb, const FitOptions& opt, const Vec* beta0, bool factor_end,
               Index skip = -1, const Cholesky* precond = nullptr);

// Leave-one-out estimates from a fitted state (factored at its beta).
// method: 0 ALO, 1 IF, 2 Lemma 3. pred (n K) LOO class scores, loss (n), lev (n K K)
// the blocks K_i = X~_i H^{-1} X~_i^T, det (n) det(I - D_i K_i).
// With grad != nullptr (ALO only): the exact derivative of the weighted mean of the
// losses (weights w) with respect to a per-feature L2 penalty lam_j, (p).
void mn_loo(const MnProblem& pb, const MnState& st, int method, double* pred, double* loss,
            double* lev, double* det, double* grad, int n_threads);

// Exact leave-one-out: a refit without each sample of `set` (all n by default),
// warm-started from st.beta, in parallel over samples. pred (m K), loss (m) in the order
// of `set` (m = set.size(n)); returns the number of refits that did not converge.
Index mn_exact(const MnProblem& pb, const MnState& st, const FitOptions& opt, double* pred,
               double* loss, SampleSet set = {});

// The sums of one row chunk of a multinomial problem at beta (K p1, class-major), for a
// fit over chunks: returns sum_i w_i ce_i; grad (K p1) = X~^T G; with hess != nullptr also
// the unpenalized Hessian (K p1 x K p1, column-major) of the chunk, by the block code of
// the in-memory factor. pb.pen is not used.
double mn_chunk_sums(const MnProblem& pb, const Vec& beta, double* grad, double* hess,
                     int n_threads);

// Leave-one-out estimates of one row chunk (method 0 ALO, 1 IF, 2 Lemma 3; outputs as
// mn_loo's) given beta and H, the penalized, gauge-fixed Hessian of the whole problem
// (K p1 x K p1, column-major). eta (m K): the chunk's class scores. With S != nullptr
// (ALO): S (K p1 x K p1) += the chunk's part of the hypergradient's first accumulation,
// for the weighted mean of the losses over the whole problem (vsum: its weight sum).
void mn_chunk_loo(const MnProblem& pb, const Vec& beta, const Mat& H, int method, double* pred,
                  double* loss, double* lev, double* det, double* eta, int n_threads,
                  double vsum = 1.0, double* S = nullptr);

// The hypergradient's second accumulation over one row chunk: rho (K p1) = the chunk's
// X~^T gamma given Mbig = H^{-1} S H^{-1} (S summed over all chunks by mn_chunk_loo).
// The gradient is then -sum_a [(H^{-1} rho)_q beta_q + Mbig_qq] over the classes' entries q
// of each feature, as mn_loo has it.
void mn_chunk_adjoint(const MnProblem& pb, const Vec& beta, const Mat& H, const Mat& Mbig,
                      double vsum, double* rho, int n_threads);

// mn_fit over a sums source (the chunks of a distributed X; each evaluation returns
// mn_chunk_sums added over the chunks): the one Newton driver with mn_fit's penalty
// (gauge term included, tau = weight_sum / K^2), refresh policy and stopping rule, on
// exact Hessians (mn_fit's Newton-CG mode for large K p1 is not used). opt.fit.fresh_end:
// end on the factor at the returned beta (mn_fit's factor_end). lam: (p) the L2 weights;
// beta0: (K p1) class-major.
SumsFit mn_sums_fit(SumsSource& source, Index K, const Vec& lam, bool intercept, const Vec& beta0,
                    const SumsFitOptions& opt);

}  // namespace aloocv
