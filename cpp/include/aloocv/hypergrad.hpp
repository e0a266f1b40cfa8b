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

#include "blas.hpp"
#include "loo.hpp"

namespace aloocv {

enum class GradientKind : int { Exact = 0, Paper = 1 };

struct HyperGradient {
  Vec l2;  // (p) d ACV / d lambda_2,j
  Vec l1;  // (p) d ACV / d lambda_1,j (zero without an L1 term)
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

// Tangents of c A and c B along (deta, dh).
template <class Loss>
void alo_tangent(double y, double eta, double w, double h, double inv_sw, const AloTerms& r,
                 double deta, double dh, double& dcA, double& dcB, const LossParams& lp) {
  const double l1 = Loss::d1(y, eta, lp), l2 = Loss::d2(y, eta, lp), l3 = Loss::d3(y, eta, lp);
  const double l4 = Loss::d4(y, eta, lp);
  const double g = w * l1, d = w * l2;
  const double dg = w * l2 * deta, dd = w * l3 * deta;
  const double t = r.t, t2 = t * t, t3 = t2 * t;
  const double dt = -(dd * h + d * dh);
  const double de = r.A * deta + r.B * dh;
  const double dc = w * Loss::d2(y, r.e, lp) * de * inv_sw;
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
// rank-k updates split by the sign of the weights (written as pos - neg).
inline void signed_syrk(Index q1, Index m, const double* Z, const double* wt, double* Ppos,
                        double* Pneg, Scratch& s) {
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
// h[k] = x~_k^T H^{-1} x~_k = ||z_k||^2. Packed sparse rows are dense here, so the blocked
// triangular solves serve them too (q^2 per row, half a product with an explicit inverse).
inline void solve_rows(const FitState& st, Index q1, Index m, double* Zp, double* h, bool full) {
  blas::trsm_lower(q1, m, st.chol.lower(), q1, Zp, q1);
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

// ALO with its derivative in the penalty parameters (exact by default), in one blocked
// pass sharing the Hessian factor; fills `adj` (when given) for the second-order pass.
template <class Loss>
LooResult alo_with_gradient(const Problem& pb, const FitState& st, int n_threads,
                            HyperGradient& grad, GradientKind kind = GradientKind::Exact,
                            AdjointState* adj = nullptr) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size;  // penalized coordinates in the factor
  const Index q1 = q + off;
  const bool curved = !Loss::constant_curvature;
  const bool exact = kind == GradientKind::Exact;
  AdjointState local;
  AdjointState& a = adj ? *adj : local;
  a.inv_sw = 1.0 / pb.weight_sum();
  a.bq.resize(q1);
  a.sgn.resize(q1);
  for (Index k = 0; k < q1; ++k) {
    const Index j = k < off ? 0 : off + (cols.all() ? k - off : cols.cols[k - off]);
    a.bq[k] = st.beta[j];
    // ACV holds the active set and its signs fixed: sign(beta_hat) is the derivative.
    a.sgn[k] = k < off ? 0.0 : (a.bq[k] > 0.0 ? 1.0 : (a.bq[k] < 0.0 ? -1.0 : 0.0));
  }
  LooResult out;
  out.losses.resize(n);
  out.predictions.resize(n);
  out.leverages.resize(n);
  // partials: [r or g2 (q1) | g1 (q1) | G pos (q1^2) | G neg (q1^2)], G = sum c B z z^T;
  // for a constant-curvature loss without a second-order pass only diag(M) is needed:
  // [r (q1) | unused (q1) | diag M (q1)] from a_i itself (the second triangular solve)
  const bool diag_only = exact && !curved && adj == nullptr;
  const Index stride = 2 * q1 + (diag_only ? q1 : (exact ? 2 * q1 * q1 : 0));
  const double inv_sw = a.inv_sw;
  Vec red = detail::blocked_reduce(
      pb, cols, q1, nt, stride, 4.0 * double(q1 * q1),
      [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
        if (exact) std::copy(Z, Z + q1 * m, s.copy);
        detail::solve_rows(st, q1, m, Z, out.leverages.data() + i0, !exact || diag_only);
        double* cA = s.wa;
        double* cB = s.wb;
        for (Index k = 0; k < m; ++k) {
          const Index i = i0 + k;
          const double y = pb.y[i], w = pb.weight(i);
          const auto r =
              detail::alo_terms<Loss>(y, st.eta[i], w, out.leverages[i], inv_sw, i, pb.lp);
          out.predictions[i] = r.e;
          out.losses[i] = Loss::value(y, r.e, pb.lp);
          if (exact) {
            cA[k] = r.c * r.A;
            cB[k] = r.c * r.B;
          } else if (w != 0.0) {  // eq. 16 with H_{-i} at beta_hat
            const double ci = -r.c / r.t;
            const double* ak = Z + k * q1;
            for (Index j = off; j < q1; ++j) {
              P[j] += ci * ak[j] * (a.bq[j] + r.s * ak[j]);
              P[q1 + j] += ci * ak[j] * a.sgn[j];
            }
          }
        }
        if (exact) {
          Eigen::Map<Vec>(P, q1).noalias() +=
              Eigen::Map<const Mat>(s.copy, q1, m) * Eigen::Map<const Vec>(cA, m);
          if (diag_only) {
            Eigen::Map<Vec>(P + 2 * q1, q1).noalias() +=
                Eigen::Map<const Mat>(Z, q1, m).cwiseAbs2() * Eigen::Map<const Vec>(cB, m);
          } else {
            detail::signed_syrk(q1, m, Z, cB, P + 2 * q1, P + 2 * q1 + q1 * q1, s);
          }
        }
      });
  grad.l2 = Vec::Zero(pb.X.p);
  grad.l1 = Vec::Zero(pb.X.p);
  Vec g2(q1), g1(q1);
  if (!exact) {
    g2 = red.head(q1);
    g1 = red.segment(q1, q1);
  } else {
    Vec diagM;
    if (diag_only) {
      diagM = red.segment(2 * q1, q1);
    } else {
      a.M = detail::to_a_space(st, detail::signed_sum(red.data() + 2 * q1, q1));
      diagM = a.M.diagonal();
    }
    Vec rs = red.head(q1);
    a.q.resize(0);
    if (curved) {  // q_j = x~_j^T M x~_j and s = X~^T (w l''' q)
      a.q.resize(n);
      rs -= detail::blocked_reduce(
          pb, cols, q1, nt, q1, 2.0 * double(q1 * q1),
          [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
            blas::gemm(q1, m, q1, a.M.data(), q1, Z, q1, s.work, q1);
            for (Index k = 0; k < m; ++k) {
              const Index i = i0 + k;
              const double qi = Eigen::Map<const Vec>(Z + k * q1, q1)
                                    .dot(Eigen::Map<const Vec>(s.work + k * q1, q1));
              a.q[i] = qi;
              s.wa[k] = pb.weight(i) * Loss::d3(pb.y[i], st.eta[i], pb.lp) * qi;
            }
            Eigen::Map<Vec>(P, q1).noalias() +=
                Eigen::Map<const Mat>(Z, q1, m) * Eigen::Map<const Vec>(s.wa, m);
          });
    }
    a.u = rs;
    st.chol.solve(a.u.data());
    for (Index k = 0; k < q1; ++k) {
      g2[k] = -(a.u[k] * a.bq[k] + diagM[k]);
      g1[k] = -a.u[k] * a.sgn[k];
    }
  }
  for (Index k = 0; k < q; ++k) {
    const Index j = cols.all() ? k : cols.cols[k];
    grad.l2[j] = g2[off + k];
    grad.l1[j] = g1[off + k];
  }
  return out;
}

namespace detail {
// Forward-over-reverse for a block of directions (see alo_gradient_tangents).
template <class Loss>
HyperTangents tangents_block(const Problem& pb, const FitState& st, const LooResult& alo,
                             const AdjointState& a, const Mat& D2, const Mat& D1, int n_threads) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size, q1 = q + off;
  const Index md = D2.cols();
  const bool curved = !Loss::constant_curvature;
  const double inv_sw = a.inv_sw;
  // directions on the factor's coordinates
  Mat del = Mat::Zero(q1, md), eps = Mat::Zero(q1, md);
  for (Index k = 0; k < q; ++k) {
    const Index j = cols.all() ? k : cols.cols[k];
    del.row(off + k) = D2.row(j);
    eps.row(off + k) = D1.row(j);
  }
  // dbeta = -H^{-1} (delta o beta + epsilon o sign)
  Mat dB = -(del.array().colwise() * a.bq.array() + eps.array().colwise() * a.sgn.array()).matrix();
  detail::solve_cols(st, dB);
  // F1: deta = X~ dbeta, dH_k = X~^T diag(w l''' deta_k) X~ (+ diag(delta_k) below)
  Mat dEta(n, md);
  const Index s1 = curved ? 2 * q1 * q1 * md : 0;
  Vec red1 = detail::blocked_reduce(
      pb, cols, q1, nt, s1, (curved ? double(md) : 0.0) * double(q1 * q1) + 2.0 * double(q1 * md),
      [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
        Eigen::Map<const Mat> Zm(Z, q1, m);
        dEta.middleRows(i0, m).noalias() = Zm.transpose() * dB;
        if (!curved) return;
        for (Index k = 0; k < md; ++k) {
          for (Index r = 0; r < m; ++r) {
            const Index i = i0 + r;
            s.wa[r] = pb.weight(i) * Loss::d3(pb.y[i], st.eta[i], pb.lp) * dEta(i, k);
          }
          double* Pk = P + k * 2 * q1 * q1;
          detail::signed_syrk(q1, m, Z, s.wa, Pk, Pk + q1 * q1, s);
        }
      });
  std::vector<Mat> dH(static_cast<size_t>(md));
  for (Index k = 0; k < md; ++k) {
    dH[k] = curved ? detail::signed_sum(red1.data() + k * 2 * q1 * q1, q1) : Mat::Zero(q1, q1);
    dH[k].diagonal() += del.col(k);
  }
  // F2: z_i = L^{-1} x~_i, dh_i = -a_i^T dH a_i = -z_i^T E z_i (E = L^{-1} dH L^{-T}), d(cA)_i,
  // N_k = sum d(cB)_i a_i a_i^T (accumulated in z-space)
  std::vector<Mat> E(static_cast<size_t>(md));
  for (Index k = 0; k < md; ++k) E[k] = detail::to_z_space(st, dH[k]);
  Mat dcA(n, md);
  const Index s2 = 2 * q1 * q1 * md;
  Vec red2 = detail::blocked_reduce(
      pb, cols, q1, nt, s2, (4.0 + 3.0 * double(md)) * double(q1 * q1),
      [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
        double* wt = s.wb;
        detail::solve_rows(st, q1, m, Z, s.wa, false);
        for (Index k = 0; k < md; ++k) {
          blas::gemm(q1, m, q1, E[k].data(), q1, Z, q1, s.copy, q1);
          for (Index r = 0; r < m; ++r) {
            const Index i = i0 + r;
            const double y = pb.y[i], w = pb.weight(i), eta = st.eta[i];
            const double hi = alo.leverages[i];
            const double dh = -Eigen::Map<const Vec>(Z + r * q1, q1)
                                   .dot(Eigen::Map<const Vec>(s.copy + r * q1, q1));
            const auto t = detail::alo_terms<Loss>(y, eta, w, hi, inv_sw, i, pb.lp);
            double dca = 0.0, dcb = 0.0;
            detail::alo_tangent<Loss>(y, eta, w, hi, inv_sw, t, dEta(i, k), dh, dca, dcb, pb.lp);
            dcA(i, k) = dca;
            wt[r] = dcb;
          }
          double* Pk = P + k * 2 * q1 * q1;
          detail::signed_syrk(q1, m, Z, wt, Pk, Pk + q1 * q1, s);
        }
      });
  // dM_k = N_k - T_k - T_k^T with T_k = H^{-1} dH_k M
  std::vector<Mat> dM(static_cast<size_t>(md));
  for (Index k = 0; k < md; ++k) {
    Mat T = dH[k] * a.M;
    detail::solve_cols(st, T);
    dM[k] = detail::to_a_space(st, detail::signed_sum(red2.data() + k * 2 * q1 * q1, q1)) - T -
            T.transpose();
  }
  // F3: dq_i = x~_i^T dM x~_i, dz = d(cA) - w (l'''' deta q + l''' dq), X~^T dz
  Vec red3 = detail::blocked_reduce(
      pb, cols, q1, nt, q1 * md, (curved ? 2.0 * double(md) : 0.0) * double(q1 * q1),
      [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
        Eigen::Map<const Mat> Zm(Z, q1, m);
        for (Index k = 0; k < md; ++k) {
          double* dz = s.wa;
          if (curved) blas::gemm(q1, m, q1, dM[k].data(), q1, Z, q1, s.copy, q1);
          for (Index r = 0; r < m; ++r) {
            const Index i = i0 + r;
            dz[r] = dcA(i, k);
            if (!curved) continue;
            const double y = pb.y[i], w = pb.weight(i), eta = st.eta[i];
            const double dq = Zm.col(r).dot(Eigen::Map<const Vec>(s.copy + r * q1, q1));
            dz[r] -=
                w * (Loss::d4(y, eta, pb.lp) * dEta(i, k) * a.q[i] + Loss::d3(y, eta, pb.lp) * dq);
          }
          Eigen::Map<Vec>(P + k * q1, q1).noalias() += Zm * Eigen::Map<const Vec>(dz, m);
        }
      });
  HyperTangents out;
  out.l2 = Mat::Zero(pb.X.p, md);
  out.l1 = Mat::Zero(pb.X.p, md);
  for (Index k = 0; k < md; ++k) {
    Mat du = Eigen::Map<const Vec>(red3.data() + k * q1, q1) - dH[k] * a.u;
    detail::solve_cols(st, du);
    for (Index c = 0; c < q; ++c) {
      const Index j = cols.all() ? c : cols.cols[c], kk = off + c;
      out.l2(j, k) = -(du(kk, 0) * a.bq[kk] + a.u[kk] * dB(kk, k) + dM[k](kk, kk));
      out.l1(j, k) = -du(kk, 0) * a.sgn[kk];
    }
  }
  return out;
}
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
  for (Index k0 = 0; k0 < md; k0 += per) {
    const Index g = std::min(per, md - k0);
    const HyperTangents t = detail::tangents_block<Loss>(pb, st, alo, a, D2.middleCols(k0, g),
                                                         D1.middleCols(k0, g), n_threads);
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
template <class Loss>
HyperGradient sample_gradient(const Problem& pb, const FitState& st, const Index* idx, Index m,
                              double& acv) {
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size, q1 = q + off;
  const double inv_sw = 1.0 / pb.weight_sum();
  for (Index t = 0; t < m; ++t) {
    if (idx[t] < 0 || idx[t] >= n) throw InvalidInput("sample index out of range");
  }
  if (!Loss::constant_curvature && m < 2) {
    throw InvalidInput(
        "an unbiased minibatch gradient of a non-quadratic loss needs at least 2 samples "
        "(its bilinear term takes two independent draws)");
  }
  Mat Xb(q1, std::max<Index>(m, 1));
  pb.X.pack_indices(idx, m, nullptr, pb.intercept, Xb.data(), cols);
  Mat Ab = Xb.leftCols(m);
  for (Index k = 0; k < m; ++k) st.chol.solve(Ab.col(k).data());
  Vec cA(m), cB(m), l3w(m);
  double loss = 0.0, sw = 0.0;
  for (Index k = 0; k < m; ++k) {
    const Index i = idx[k];
    const double y = pb.y[i], w = pb.weight(i), h = Xb.col(k).dot(Ab.col(k));
    const auto r = detail::alo_terms<Loss>(y, st.eta[i], w, h, inv_sw, i, pb.lp);
    cA[k] = r.c * r.A;
    cB[k] = r.c * r.B;
    l3w[k] = w * Loss::d3(y, st.eta[i], pb.lp);
    loss += w * Loss::value(y, r.e, pb.lp);
    sw += w;
  }
  const double scale = double(n) / double(m);
  Vec rs = scale * (Xb.leftCols(m) * cA);
  Vec diagM = scale * (Ab.array().square().matrix() * cB);
  if (!Loss::constant_curvature) {
    const Index m1 = m / 2, m2 = m - m1;
    // q_j estimate from the first half: sum_{i in half 1} (n/m1) c_i B_i (a_i^T x~_j)^2
    const Mat G = Ab.leftCols(m1).transpose() * Xb.middleCols(m1, m2);  // m1 x m2
    const Vec qj =
        (double(n) / double(m1)) * (G.array().square().matrix().transpose() * cB.head(m1));
    rs -= (double(n) / double(m2)) *
          (Xb.middleCols(m1, m2) * (l3w.tail(m2).array() * qj.array()).matrix());
  }
  Vec u = rs;
  st.chol.solve(u.data());
  HyperGradient g;
  g.l2 = Vec::Zero(pb.X.p);
  g.l1 = Vec::Zero(pb.X.p);
  for (Index k = 0; k < q; ++k) {
    const Index j = cols.all() ? k : cols.cols[k], kk = off + k;
    const double b = st.beta[off + j];
    g.l2[j] = -(u[kk] * b + diagM[kk]);
    g.l1[j] = -u[kk] * (b > 0.0 ? 1.0 : (b < 0.0 ? -1.0 : 0.0));
  }
  acv = sw > 0.0 ? loss / sw : 0.0;
  return g;
}

LooResult loo_gradient(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                       HyperGradient& grad, GradientKind kind = GradientKind::Exact);
// ALO, its exact gradient and the gradient's derivatives along the columns of D2 / D1.
LooResult loo_gradient_tangents(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                                HyperGradient& grad, const Mat& D2, const Mat& D1,
                                HyperTangents& tangents);
HyperGradient loo_sample_gradient(const Problem& pb, LossKind loss, const FitState& st,
                                  const Index* idx, Index m, double& acv);

}  // namespace aloocv
