// The exact hypergradient of a matrix-free ALO mean (matrix_free.hpp;
// docs/math/matrix_free.md, "Hypergradient").
#include "aloocv/matrix_free.hpp"

#include <cmath>

#include "aloocv/newton.hpp"

namespace aloocv {

Vec random_leverages_gradient(const mf::Point& pt, const LeverageOptions& o, bool control,
                              const RowMat& rho, const Vec& alpha, const Vec& gamma) {
  const Problem& pb = pt.pb;
  const Index n = pb.n(), p1 = pb.p1(), G = o.n_groups, per = o.n_probes / o.n_groups;
  if (o.n_groups < 1 || o.n_probes < o.n_groups || o.n_probes % o.n_groups != 0) {
    throw InvalidInput("n_probes must be a positive multiple of n_groups");
  }
  if (rho.rows() != n || rho.cols() != G || alpha.size() != n || gamma.size() != n) {
    throw InvalidInput("random_leverages_gradient: coefficient shapes do not match");
  }
  const mf::Operator& op = pt.op;
  const Vec &d = pt.d, &minv = pt.minv;
  const Vec& eta = pt.eta;
  Vec wl3(n);
  dispatch_loss(pt.loss, [&](auto L) {
    using Loss = decltype(L);
    for (Index i = 0; i < n; ++i) {
      // d(d_i^+)/d eta_i: w l''' where the curvature is positive (the clip max(d, 0))
      wl3[i] = d[i] > 0.0 ? pb.weight(i) * Loss::d3(pb.y[i], eta[i], pb.lp) : 0.0;
    }
  });
  const double dmean = d.cwiseMax(0.0).mean();
  const bool floor_moves = dmean > 0.0;
  const double floor = floor_moves ? kProbeWeightFloor * dmean : 1.0;
  const Vec s = (d.cwiseMax(0.0).array() + floor).sqrt().matrix();
  const mf::HessianOp H{op, d, pb.pen};
  mf::CgOptions co;
  co.rtol = o.cg_rtol;
  co.max_iter = o.max_cg;
  const mf::HeadBlock& head = pt.head();
  if (!head.empty()) co.head = &head;  // random_leverages' preconditioner: the same solves
  // coefficients of d mean on: eta_i (E), the penalty weights (R), s_i (kappa), and
  // sum_k (X~ t_k)_i (X~ S_k)_i (e3, the dH term through eta), diag(H) (sigma: control)
  Vec E = alpha, R = Vec::Zero(p1), kappa = Vec::Zero(n), e3 = Vec::Zero(n);
  Vec sigma = Vec::Zero(p1);
  const Index gpb = std::max<Index>(1, kBatchProbes / per);
  RowMat Z, B, S, AZ, A0Z, MB, Q, Bq, T, XT, XMb, MBq;
  for (Index g0 = 0; g0 < G; g0 += gpb) {
    const Index g1 = std::min(G, g0 + gpb), m = (g1 - g0) * per;
    Z.resize(n, m);
    Q.resize(n, m);
    for (Index i = 0; i < n; ++i) {
      for (Index k = 0; k < m; ++k) {
        const double z = rademacher(o.seed, i, o.first_probe + g0 * per + k);
        Z(i, k) = s[i] * z;
        // q_ik = rho_i^(g) z_ik / s_i: the weights of the probe's contributions
        Q(i, k) = rho(i, g0 + k / per) * z / s[i];
      }
    }
    op.adjoint(Z, B);
    mf::block_pcg(H, minv, B, S, co);
    op.forward(S, AZ);
    op.adjoint(Q, Bq);
    mf::block_pcg(H, minv, Bq, T, co);  // t_k = H^{-1} X~^T q_k
    op.forward(T, XT);
    if (control) {
      MB = B.array().colwise() * minv.array();
      op.forward(MB, A0Z);
      MBq = Bq.array().colwise() * minv.array();
      op.forward(MBq, XMb);
      for (Index j = 0; j < p1; ++j)
        for (Index k = 0; k < m; ++k) sigma[j] += Bq(j, k) * B(j, k);
    }
    for (Index j = 0; j < p1; ++j)
      for (Index k = 0; k < m; ++k) R[j] -= T(j, k) * S(j, k);
    for (Index i = 0; i < n; ++i) {
      const double si = s[i], s2 = si * si;
      double ka = 0.0, e = 0.0;
      for (Index k = 0; k < m; ++k) {
        const double z = Z(i, k) / si;
        const double r = rho(i, g0 + k / per);
        const double az = control ? AZ(i, k) - A0Z(i, k) : AZ(i, k);
        ka += XT(i, k) * z - r * z * az / s2;
        if (control) ka -= XMb(i, k) * z;
        e += XT(i, k) * AZ(i, k);
      }
      kappa[i] += ka;
      e3[i] += e;
    }
  }
  // d mean / d s_i = kappa_i; s_i = sqrt(d_i^+ + floor), floor = F mean(d^+)
  Vec dd = kappa.cwiseQuotient(2.0 * s);  // d mean / d (d_i^+) through s_i
  if (floor_moves) dd.array() += kProbeWeightFloor * dd.sum() / double(n);
  if (control) {
    // diag(A0)_i = sum_j x~_ij^2 minv_j and A0's products: through minv_j = 1 / diag(H)_j
    Vec xg(p1);
    op.weighted_squares(gamma.data(), xg.data());  // sum_i gamma_i x~_ij^2
    const Vec phi = minv.cwiseAbs2().cwiseProduct(sigma - xg);
    R += phi;
    Vec xphi(n);
    op.squares_times(phi.data(), xphi.data());
    dd += xphi;
  }
  E.array() += (dd - e3).array() * wl3.array();
  // eta moves with beta: d beta / d pen_j = -H^{-1} e_j beta_j
  RowMat rhs(p1, 1), u;
  op.adjoint(E.data(), rhs.data());
  mf::CgOptions cu;
  cu.rtol = std::min(o.cg_rtol, 1e-8);
  cu.max_iter = std::max<Index>(o.max_cg, 10 * o.max_cg);
  cu.head = co.head;
  mf::block_pcg(H, minv, rhs, u, cu);
  Vec grad = R - u.col(0).cwiseProduct(pt.beta);
  if (pb.intercept) grad[0] = 0.0;
  return grad;
}

}  // namespace aloocv
