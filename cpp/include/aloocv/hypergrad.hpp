// Derivatives of the ALO estimate with respect to the penalty parameters.
// See docs/math/hypergradient.md.
//
// What loo(...).mean reports is ACV(lambda) = sum_i v_i l(y_i, eta~_i) / sum(v), with
// eta~_i = eta_i + g_i h_i / t_i, g_i = w_i l'_i, d_i = w_i l''_i, t_i = 1 - d_i h_i and
// h_i = x~_i^T H^{-1} x~_i, all at the fit beta_hat(lambda). The exact derivative
// (docs/math/hypergradient.md, reverse mode): with c_i = v_i l'(y_i, eta~_i) / sum(v),
//   A_i = d eta~_i / d eta_i = 1 / t_i + w_i g_i l'''_i h_i^2 / t_i^2,
//   B_i = d eta~_i / d h_i   = g_i / t_i^2,
//   M   = sum_i c_i B_i a_i a_i^T   (a_i = H^{-1} x~_i; accumulated in the leverage pass),
//   q_j = x~_j^T M x~_j,  z_j = c_j A_j - w_j l'''_j q_j,  u = H^{-1} X~^T z,
//   d ACV / d lambda2_k = -u_k theta_k - M_kk,   d ACV / d lambda1_k = -u_k sign(theta_k).
// Per-feature parameters; scalars and groups are sums over their features (the Python
// penalty's chain rule). With an L1 term everything lives on the active set, held fixed
// with its signs, as the ALO estimate holds it. Cost beyond ALO: one signed rank-k update
// (M), one pass for q (none for the squared loss, l''' = 0) and p x p solves.
//
// Second order (forward over reverse): along directions (delta, epsilon) of the per-feature
// (l2, l1) weights, dbeta = -H^{-1}(delta o theta + epsilon o sign), deta = X~ dbeta,
// dH = X~^T diag(w l''' deta) X~ + diag(delta), dh_i = -a_i^T dH a_i, and the gradient's
// pieces are differentiated in turn: dM = N - T - T^T with N = sum d(c B)_i a_i a_i^T and
// T = H^{-1} dH M, dq_j = x~_j^T dM x~_j, du = H^{-1}(X~^T dz - dH u). About five passes per
// direction: meant for a few hyperparameters (trust-region Newton).
//
// The paper's approximation (Lemma 4, eq. 14-16, H_{-i} evaluated at beta_hat) stays
// available as GradientKind::Paper for the paper's experiments.
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "blas.hpp"
#include "loo.hpp"

namespace aloocv {

enum class GradientKind : int { Exact = 0, Paper = 1 };

struct HyperGradient {
  Vec l2;  // (p) d ACV / d lambda_2,j
  Vec l1;  // (p) d ACV / d lambda_1,j (zero without an L1 term)
  // With a HyperDirection: the one derivative along it (l2 and l1 are then left empty).
  std::optional<double> along;
};

// A direction (delta, epsilon) of the per-feature (l2, l1) weights, each of length p: the
// exact gradient's projection on it, sum_j delta_j dACV/dlambda2_j + epsilon_j
// dACV/dlambda1_j, without the per-feature gradient (docs/math/hypergradient.md, "One
// direction"): the derivative of a one-parameter penalty in its parameter.
struct HyperDirection {
  Vec l2, l1;
};

// Directional derivatives of the per-feature gradient: column k of l2 / l1 is the
// derivative of HyperGradient::l2 / l1 along direction k.
struct HyperTangents {
  Mat l2, l1;  // (p x m)
};

// What the reverse pass leaves for the forward (second-order) pass.
struct AdjointState {
  Mat M;        // (q1 x q1) sum_i c_i B_i a_i a_i^T
  Vec u;        // (q1) H^{-1} X~^T z
  Vec q;        // (n) x~_j^T M x~_j (empty for the squared loss)
  Vec bq, sgn;  // beta and sign(beta) on the factor's coordinates
  double inv_sw = 0.0;
};

namespace detail {

// The per-sample pieces of eta~ and of the reverse-mode gradient.
struct AloTerms {
  double t, s, e, c, A, B;
};

template <class Loss>
AloTerms alo_terms(double y, double eta, double w, double h, double inv_sw, Index i,
                   const LossParams& lp) {
  constexpr double tiny = 64 * std::numeric_limits<double>::epsilon();
  AloTerms r{};
  const double g = w * Loss::d1(y, eta, lp), d = w * Loss::d2(y, eta, lp);
  r.t = 1.0 - d * h;
  if (w != 0.0 && !(r.t > tiny)) throw_loo_singular(i, d * h);
  if (w == 0.0) r.t = 1.0;
  r.s = g / r.t;
  r.e = eta + r.s * h;
  r.c = w * Loss::d1(y, r.e, lp) * inv_sw;
  r.A = 1.0 / r.t + w * g * Loss::d3(y, eta, lp) * h * h / (r.t * r.t);
  r.B = g / (r.t * r.t);
  return r;
}

// A sample's loss derivatives for the tangents: l', l'', l''', l'''' at eta and l'' at the
// ALO prediction r.e, with its ALO terms r.
struct TangentTerms {
  AloTerms r;
  double l1, l2, l3, l4, l2e;
};
template <class Loss>
TangentTerms tangent_terms(double y, double eta, double w, double h, double inv_sw, Index i,
                           const LossParams& lp) {
  TangentTerms t;
  t.r = alo_terms<Loss>(y, eta, w, h, inv_sw, i, lp);
  t.l1 = Loss::d1(y, eta, lp);
  t.l2 = Loss::d2(y, eta, lp);
  t.l3 = Loss::d3(y, eta, lp);
  t.l4 = Loss::d4(y, eta, lp);
  t.l2e = Loss::d2(y, t.r.e, lp);
  return t;
}

// Tangents of c A and c B along (deta, dh).
inline void alo_tangent(const TangentTerms& tt, double w, double h, double inv_sw, double deta,
                        double dh, double& dcA, double& dcB) {
  const AloTerms& r = tt.r;
  const double l1 = tt.l1, l2 = tt.l2, l3 = tt.l3;
  const double l4 = tt.l4;
  const double g = w * l1, d = w * l2;
  const double dg = w * l2 * deta, dd = w * l3 * deta;
  const double t = r.t, t2 = t * t, t3 = t2 * t;
  const double dt = -(dd * h + d * dh);
  const double de = r.A * deta + r.B * dh;
  const double dc = w * tt.l2e * de * inv_sw;
  const double F = w * g * l3 * h * h;
  const double dF = w * (dg * l3 * h * h + g * l4 * deta * h * h + 2.0 * g * l3 * h * dh);
  const double dA = -dt / t2 + dF / t2 - 2.0 * F * dt / t3;
  const double dB = dg / t2 - 2.0 * g * dt / t3;
  dcA = dc * r.A + r.c * dA;
  dcB = dc * r.B + r.c * dB;
}

// Per-thread scratch of the blocked passes (uninitialized: every use writes before reading).
struct Scratch {
  std::unique_ptr<double[]> buf;
  Index cap = 0;
  double *pack = nullptr, *copy = nullptr, *pos = nullptr, *neg = nullptr, *work = nullptr;
  double *wa = nullptr, *wb = nullptr;
  void ensure(Index q1, Index B) {
    if (buf && cap >= q1 * B) return;
    cap = std::max<Index>(1, q1 * B);
    buf.reset(new double[static_cast<size_t>(5 * cap + 2 * std::max<Index>(1, B))]);
    double* p = buf.get();
    for (double** d : {&pack, &copy, &pos, &neg, &work}) {
      *d = p;
      p += cap;
    }
    wa = p;
    wb = p + std::max<Index>(1, B);
  }
};

// partial (q1 x q1, lower) += sum_k wt[k] z_k z_k^T over the m columns of Z, as two
// rank-k updates split by the sign of the weights (written as pos - neg), or for q1 <=
// blas::kSmallSyrkMax by the small kernel's one signed pass into pos.
inline void signed_syrk(Index q1, Index m, const double* Z, const double* wt, double* Ppos,
                        double* Pneg, Scratch& s) {
  // narrow rows: the core's weighted update takes signed weights in one pass (the
  // products w_k z_k z_k^T into Ppos, Pneg left as it is)
  if (q1 <= blas::kSmallSyrkMax && blas::has_small_syrk()) {
    for (Index k = 0; k < m; ++k)
      for (Index j = 0; j < q1; ++j) s.pos[k * q1 + j] = wt[k] * Z[k * q1 + j];
    if (blas::syrk_small_lower(q1, m, s.pos, q1, Z, q1, Ppos, q1)) return;
  }
  Index np = 0, nn = 0;
  for (Index k = 0; k < m; ++k) {
    const double a = wt[k];
    if (a == 0.0) continue;
    const double r = std::sqrt(std::abs(a));
    double* dst = a > 0 ? s.pos + (np++) * q1 : s.neg + (nn++) * q1;
    for (Index j = 0; j < q1; ++j) dst[j] = r * Z[k * q1 + j];
  }
  blas::syrk_lower(q1, np, s.pos, q1, 1.0, Ppos, q1);
  blas::syrk_lower(q1, nn, s.neg, q1, 1.0, Pneg, q1);
}

// Symmetric (q1 x q1) from the pos/neg lower partials at p (pos) and p + q1*q1 (neg).
inline Mat signed_sum(const double* p, Index q1) {
  Mat S = Eigen::Map<const Mat>(p, q1, q1) - Eigen::Map<const Mat>(p + q1 * q1, q1, q1);
  S.triangularView<Eigen::StrictlyUpper>() = S.transpose();
  return S;
}

// Runs body(partial, i0, m, Z, scratch) over row blocks; Z holds x~ of rows [i0, i0 + m)
// restricted to `cols` (q1 x m). Chunks are fixed by size (not by the thread count) and
// their `stride` partial doubles are reduced in chunk order: deterministic results.
// Compiled once (loo.cpp), the bodies called once per block.
using BlockBody = FunctionRef<void(double*, Index, Index, double*, Scratch&)>;
Vec blocked_reduce(const Problem& pb, Columns cols, Index q1, int nt, Index stride,
                   double flops_per_row, BlockBody body);

// Z (q1 x m, packed rows x~) <- z_i = L^{-1} x~_i, or a_i = H^{-1} x~_i when `full`;
// h[k] = x~_k^T H^{-1} x~_k = ||z_k||^2. z by DTRMM with Linv (L^{-1} from
// lower_inverse_for_trmm, the leverage pass's rule) or, where Linv is empty, by blocked
// triangular solves (packed sparse rows are dense here, so they serve them too).
inline void solve_rows(const FitState& st, Index q1, Index m, double* Zp, double* h, bool full,
                       const Mat& Linv) {
  if (Linv.size() == 0 || !blas::trmm_lower(q1, m, Linv.data(), q1, Zp, q1)) {
    blas::trsm_lower(q1, m, st.chol.lower(), q1, Zp, q1);
  }
  Eigen::Map<Mat> Z(Zp, q1, m);
  for (Index k = 0; k < m; ++k) h[k] = Z.col(k).squaredNorm();
  if (full) blas::trsm_lower(q1, m, st.chol.lower(), q1, Zp, q1, true);
}

// R <- H^{-1} R, column by column.
inline void solve_cols(const FitState& st, Mat& R) {
  for (Index k = 0; k < R.cols(); ++k) st.chol.solve(R.col(k).data());
}

// L^{-T} G L^{-1} for a symmetric G (from z-space sums to a-space: sum c z z^T -> sum c a a^T).
inline Mat to_a_space(const FitState& st, Mat G) {
  const Index q1 = G.rows();
  blas::trsm_lower(q1, q1, st.chol.lower(), q1, G.data(), q1, true);  // L^{-T} G
  Mat T = G.transpose();
  blas::trsm_lower(q1, q1, st.chol.lower(), q1, T.data(), q1, true);  // L^{-T} G L^{-1}
  return T;
}

// L^{-1} A L^{-T} for a symmetric A (a quadratic form in a_i as one in z_i).
inline Mat to_z_space(const FitState& st, Mat A) {
  const Index q1 = A.rows();
  blas::trsm_lower(q1, q1, st.chol.lower(), q1, A.data(), q1);  // L^{-1} A
  Mat T = A.transpose();
  blas::trsm_lower(q1, q1, st.chol.lower(), q1, T.data(), q1);  // L^{-1} A L^{-T}
  return T;
}

}  // namespace detail

namespace detail {
// The loss's rows of alo_with_gradient's pass for the rows [i0, i0 + m), with h their
// leverages: the ALO predictions and losses (into pred, losses at i0), and per row
// (exact) c A into wa and c B into wb, or (the paper's form) -c / t into wa and s into wb.
template <class Loss>
void alo_rows(const Problem& pb, const FitState& st, Index i0, Index m, const double* h,
              double inv_sw, bool exact, double* pred, double* losses, double* wa, double* wb) {
  for (Index k = 0; k < m; ++k) {
    const Index i = i0 + k;
    const double y = pb.y[i], w = pb.weight(i);
    const auto r = alo_terms<Loss>(y, st.eta[i], w, h[k], inv_sw, i, pb.lp);
    pred[i] = r.e;
    losses[i] = Loss::value(y, r.e, pb.lp);
    if (exact) {
      wa[k] = r.c * r.A;
      wb[k] = r.c * r.B;
    } else {
      wa[k] = -r.c / r.t;
      wb[k] = r.s;
    }
  }
}
// w l''' at eta for the rows [i0, i0 + m) into out.
template <class Loss>
void l3w_rows(const Problem& pb, const FitState& st, Index i0, Index m, double* out) {
  for (Index k = 0; k < m; ++k) {
    const Index i = i0 + k;
    out[k] = pb.weight(i) * Loss::d3(pb.y[i], st.eta[i], pb.lp);
  }
}
struct AloRows {
  void (*rows)(const Problem&, const FitState&, Index, Index, const double*, double, bool, double*,
               double*, double*, double*);
  void (*l3w)(const Problem&, const FitState&, Index, Index, double*);
  bool curved;  // l''' != 0
};
// The loss-independent rest of alo_with_gradient (loo.cpp).
LooResult alo_with_gradient_impl(const Problem& pb, const FitState& st, int n_threads,
                                 HyperGradient& grad, GradientKind kind, AdjointState* adj,
                                 const AloRows& loss, const HyperDirection* dir);
}  // namespace detail

// ALO with its derivative in the penalty parameters (exact by default), in one blocked
// pass sharing the Hessian factor; fills `adj` (when given) for the second-order pass.
// With `dir` (exact, no adj): only the derivative along it (HyperGradient::along), in the
// same pass (no second pass for q).
template <class Loss>
LooResult alo_with_gradient(const Problem& pb, const FitState& st, int n_threads,
                            HyperGradient& grad, GradientKind kind = GradientKind::Exact,
                            AdjointState* adj = nullptr, const HyperDirection* dir = nullptr) {
  return detail::alo_with_gradient_impl(
      pb, st, n_threads, grad, kind, adj,
      detail::AloRows{&detail::alo_rows<Loss>, &detail::l3w_rows<Loss>, !Loss::constant_curvature},
      dir);
}

namespace detail {
// Forward-over-reverse for a block of directions (see alo_gradient_tangents), given the
// samples' loss terms (tangent_terms; curved: the loss has l''' != 0). Compiled once
// (loo.cpp).
HyperTangents tangents_block(const Problem& pb, const FitState& st, const LooResult& alo,
                             const AdjointState& a, const Mat& D2, const Mat& D1, int n_threads,
                             const std::vector<TangentTerms>& terms, bool curved);
}  // namespace detail

// Doubles of per-chunk partial sums that one block of directions may hold (each direction
// needs two signed q1 x q1 accumulators): blocks of directions bound the memory and keep
// the chunking independent of the thread count.
constexpr double kTangentPartialBudget = 4.0e6;

// Forward-over-reverse: derivatives of the exact per-feature gradient along m directions
// (columns of D2: per-feature l2 weights, D1: per-feature l1 weights; p x m each).
template <class Loss>
HyperTangents alo_gradient_tangents(const Problem& pb, const FitState& st, const LooResult& alo,
                                    const AdjointState& a, const Mat& D2, const Mat& D1,
                                    int n_threads) {
  const Index q1 = a.bq.size(), md = D2.cols();
  const Index per = std::max<Index>(
      1, static_cast<Index>(kTangentPartialBudget / (2.0 * double(q1) * double(q1) + 1.0)));
  HyperTangents out;
  out.l2.resize(pb.X.p, md);
  out.l1.resize(pb.X.p, md);
  // the samples' loss terms, once for every block of directions
  const Index n = pb.n();
  std::vector<detail::TangentTerms> terms(static_cast<size_t>(n));
  ExceptionCatcher guard;
#pragma omp parallel for schedule(static) num_threads(threads_for(n_threads, 64.0 * double(n)))
  for (Index i = 0; i < n; ++i) {
    guard.run([&] {
      terms[static_cast<size_t>(i)] = detail::tangent_terms<Loss>(
          pb.y[i], st.eta[i], pb.weight(i), alo.leverages[i], a.inv_sw, i, pb.lp);
    });
  }
  guard.rethrow();
  for (Index k0 = 0; k0 < md; k0 += per) {
    const Index g = std::min(per, md - k0);
    const HyperTangents t =
        detail::tangents_block(pb, st, alo, a, D2.middleCols(k0, g), D1.middleCols(k0, g),
                               n_threads, terms, !Loss::constant_curvature);
    out.l2.middleCols(k0, g) = t.l2;
    out.l1.middleCols(k0, g) = t.l1;
  }
  return out;
}

// Algorithm 2's stochastic gradient: an unbiased estimate of the exact gradient from the
// samples idx[0..m) (drawn uniformly with replacement). The terms linear in the samples
// (X~^T c A, diag M) use the whole batch; the bilinear term sum_j w_j l'''_j x~_j x~_j^T M
// x~_j uses the batch's first half for M and its second half for j (independent halves,
// so the product stays unbiased). O(m p^2), no pass over X. Also returns the batch's
// weighted mean ALO loss in `acv`.
namespace detail {
// The batch's per-sample terms of sample_gradient, from its packed rows Xb and their
// solves Ab = H^{-1} Xb: c A, c B and w l''' per sample, the weighted ALO losses and
// weights summed.
struct BatchTerms {
  Vec cA, cB, l3w;
  double loss = 0.0, sw = 0.0;
};
using BatchTermsFn = void (*)(const Problem&, const FitState&, const Index*, Index, const Mat&,
                              const Mat&, double, BatchTerms&);
template <class Loss>
void batch_terms(const Problem& pb, const FitState& st, const Index* idx, Index m, const Mat& Xb,
                 const Mat& Ab, double inv_sw, BatchTerms& t) {
  t.cA.resize(m);
  t.cB.resize(m);
  t.l3w.resize(m);
  for (Index k = 0; k < m; ++k) {
    const Index i = idx[k];
    const double y = pb.y[i], w = pb.weight(i), h = Xb.col(k).dot(Ab.col(k));
    const auto r = alo_terms<Loss>(y, st.eta[i], w, h, inv_sw, i, pb.lp);
    t.cA[k] = r.c * r.A;
    t.cB[k] = r.c * r.B;
    t.l3w[k] = w * Loss::d3(y, st.eta[i], pb.lp);
    t.loss += w * Loss::value(y, r.e, pb.lp);
    t.sw += w;
  }
}
// The loss-independent rest of sample_gradient (loo.cpp); curved: the loss has l''' != 0.
HyperGradient sample_gradient_impl(const Problem& pb, const FitState& st, const Index* idx, Index m,
                                   double& acv, bool curved, BatchTermsFn terms);
}  // namespace detail

template <class Loss>
HyperGradient sample_gradient(const Problem& pb, const FitState& st, const Index* idx, Index m,
                              double& acv) {
  return detail::sample_gradient_impl(pb, st, idx, m, acv, !Loss::constant_curvature,
                                      &detail::batch_terms<Loss>);
}

// With `dir`: the exact derivative along it only (HyperGradient::along).
LooResult loo_gradient(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                       HyperGradient& grad, GradientKind kind = GradientKind::Exact,
                       const HyperDirection* dir = nullptr);
// ALO, its exact gradient and the gradient's derivatives along the columns of D2 / D1.
LooResult loo_gradient_tangents(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                                HyperGradient& grad, const Mat& D2, const Mat& D1,
                                HyperTangents& tangents);
HyperGradient loo_sample_gradient(const Problem& pb, LossKind loss, const FitState& st,
                                  const Index* idx, Index m, double& acv);

}  // namespace aloocv
