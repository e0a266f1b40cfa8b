// The exact ALO hypergradient on the n x n dual route (every feature penalized, L2).
// See docs/math/dual.md.
//
// With K = X P^{-1} X^T, S = D^{1/2}, M = I + S K S, the hat-like matrix
// G = X~ H^{-1} X~^T (n x n) is N0 = K - K S M^{-1} S K without an intercept, and
// G = N0 + e e^T / kappa with e = 1 - N0 d, kappa = d^T e with one (its Schur complement).
// The feature block of a_i = H^{-1} x~_i is P^{-1} X^T (I - D G) e_i, so with the per-sample
// weights of hypergrad.hpp (c A, c B):
//   h = diag(G),  q = (G o G) (c B),  z = c A - w l''' q,
//   u_theta = P^{-1} X^T (I - D G) z,  M_kk = sum_i c_i B_i [P^{-1} X^T (I - D G)]_ki^2,
//   d ACV / d lambda_k = -u_k theta_k - M_kk.
// Cost: O(n^3) plus one pass over X's columns of O(n^2) per column (as forming K).
#include <Eigen/Cholesky>
#include <vector>

#include "aloocv/dual.hpp"
#include "aloocv/hypergrad.hpp"

namespace aloocv {

namespace {

// The loss's per-sample terms: d = w l'' at eta, and, given the leverages h (G's diagonal),
// the weights c A and c B of hypergrad.hpp; w l''' (empty for a constant curvature).
struct DualTerms {
  Vec d, cA, cB, l3w;
};
using DualCurvature = void (*)(const Problem&, const Vec& eta, DualTerms&);
using DualWeights = void (*)(const Problem&, const Vec& eta, const Mat& G, DualTerms&);

template <class Loss>
void dual_curvature(const Problem& pb, const Vec& eta, DualTerms& t) {
  const Index n = pb.n();
  t.d.resize(n);
  for (Index i = 0; i < n; ++i) {
    const double w = pb.weight(i);
    t.d[i] = w == 0.0 ? 0.0 : w * Loss::d2(pb.y[i], eta[i], pb.lp);
  }
}

template <class Loss>
void dual_weights(const Problem& pb, const Vec& eta, const Mat& G, DualTerms& t) {
  const Index n = pb.n();
  const double inv_sw = 1.0 / pb.weight_sum();
  t.cA.resize(n);
  t.cB.resize(n);
  for (Index i = 0; i < n; ++i) {
    const auto r =
        detail::alo_terms<Loss>(pb.y[i], eta[i], pb.weight(i), G(i, i), inv_sw, i, pb.lp);
    t.cA[i] = r.c * r.A;
    t.cB[i] = r.c * r.B;
  }
  t.l3w.resize(0);
  if (!Loss::constant_curvature) {
    t.l3w.resize(n);
    for (Index i = 0; i < n; ++i) t.l3w[i] = pb.weight(i) * Loss::d3(pb.y[i], eta[i], pb.lp);
  }
}

// Everything but the loss's O(n) terms is compiled once.
HyperGradient dual_gradient_impl(DualCurvature curvature, DualWeights weights, const Problem& pb,
                                 const Mat& K, const Vec& eta, const Vec& coef, int n_threads) {
  const Index n = pb.n(), p = pb.X.p, off = pb.intercept ? 1 : 0;
  const int nt = resolve_threads(n_threads);
  DualTerms terms;
  curvature(pb, eta, terms);
  const Vec& d = terms.d;
  Vec s(n);
  for (Index i = 0; i < n; ++i) s[i] = sqrt_curvature(d[i]);
  Mat Mm = s.asDiagonal() * K * s.asDiagonal();
  Mm.diagonal().array() += 1.0;
  Eigen::LLT<Mat> llt(Mm);
  if (llt.info() != Eigen::Success) {
    throw SingularHessian("the dual matrix I + S K S is not positive definite");
  }
  Mat W = s.asDiagonal() * K;  // L^{-1} S K
  llt.matrixL().solveInPlace(W);
  Mat G = K;
  G.noalias() -= W.transpose() * W;  // N0
  if (pb.intercept) {
    const Vec e = Vec::Ones(n) - G * d;
    const double kappa = d.dot(e);
    if (!(kappa > 0.0)) throw SingularHessian("no curvature left for the intercept");
    G.noalias() += e * e.transpose() / kappa;
  }
  weights(pb, eta, G, terms);
  const Vec& cB = terms.cB;
  Vec z = terms.cA;
  if (terms.l3w.size() > 0) {
    const Vec q = G.cwiseAbs2() * cB;  // G symmetric: q_j = sum_i cB_i G_ij^2
    for (Index i = 0; i < n; ++i) z[i] -= terms.l3w[i] * q[i];
  }
  // T = I - D G (n x n); v = T z
  Mat T = -(d.asDiagonal() * G);
  T.diagonal().array() += 1.0;
  const Vec v = T * z;
  HyperGradient out;
  out.l2 = Vec::Zero(p);
  out.l1 = Vec::Zero(p);
  // column blocks of X: Y = X_b^T T (m x n), M_kk and u_k per column
  const Index bc = std::max<Index>(16, std::min<Index>(512, Index(131072) / std::max<Index>(1, n)));
  const Index nb = (p + bc - 1) / bc;
  ExceptionCatcher guard;
#pragma omp parallel num_threads(threads_for(nt, 2.0 * double(n) * double(n) * double(p)))
  {
    std::vector<double> buf;
    Mat Y;
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < nb; ++b) {
      if (guard.failed()) continue;
      guard.run([&] {
        const Index j0 = b * bc, m = std::min(p, j0 + bc) - j0;
        buf.resize(static_cast<size_t>(n * m));
        pb.X.pack_cols(j0, j0 + m, nullptr, buf.data());
        Eigen::Map<const Mat> Xb(buf.data(), n, m);
        Y.noalias() = Xb.transpose() * T;
        const Vec u = Xb.transpose() * v;
        for (Index k = 0; k < m; ++k) {
          const double lam = pb.pen[off + j0 + k];
          const double Mkk = Y.row(k).cwiseAbs2().dot(cB) / (lam * lam);
          out.l2[j0 + k] = -(u[k] / lam) * coef[j0 + k] - Mkk;
        }
      });
    }
  }
  guard.rethrow();
  return out;
}

}  // namespace

HyperGradient dual_gradient(const Problem& pb, LossKind loss, const Mat& K, const Vec& eta,
                            const Vec& coef, int n_threads) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    return dual_gradient_impl(&dual_curvature<Loss>, &dual_weights<Loss>, pb, K, eta, coef,
                              n_threads);
  });
}

}  // namespace aloocv
