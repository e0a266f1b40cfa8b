// The ALO hypergradient (the paper's Lemma 4, eq. 14-16) together with ALO itself,
// in one blocked pass that shares the Hessian factor. For sample i, with
// a_i = H^{-1} x~_i, h_i = x~_i^T a_i, s_i = w_i l'_i / (1 - d_i h_i) and the ALO
// point beta~(i) = beta + s_i a_i, eta~_i = eta_i + s_i h_i:
//   d ACV_i / d lambda_m = - l'(y_i, eta~_i) / (1 - d_i h_i) * a_i^T grad r_m(beta~(i)),
// with H_{-i} evaluated at beta_hat (O(n p^2) for all i together). The penalty terms
// are per feature: r_j = theta_j^2 / 2 (grad: theta_j e_j) and r_j = |theta_j|
// (grad: sign(theta_j) e_j on the active set of beta_hat); scalar lambdas are sums of these. The
// result is the derivative of the weighted mean sum_i w_i ACV_i / sum_i w_i.
//
// Curvature correction. The paper's eq. 16 evaluates H_{-i} at beta~(i); evaluating it
// at beta_hat instead (O(n p^2) rather than O(n^2 p^2)) loses a term of the same order
// as the gradient itself for non-quadratic losses (seen: a factor 2 on logistic data).
// To first order, H_{-i}(beta~(i)) = H_{-i}(beta_hat) + E_i with
// E_i = sum_j w_j l'''_j (x~_j^T Delta_i) x~_j x~_j^T, Delta_i = s_i a_i, which adds
//   sum_i w_i l'(eta~_i) v^T E_i a_i / (1 - d_i h_i),   v = H^{-1} grad r_m(beta_hat),
// = rho^T grad r_m  with  rho = H^{-1} X~^T tau,  tau_j = w_j l'''_j x~_j^T S x~_j,
//   S = sum_i kappa_i a_i a_i^T,  kappa_i = w_i l'(eta~_i) s_i / (1 - d_i h_i):
// one more accumulation (S, alongside the a_i) and one more pass (x~_j^T S x~_j), so
// the whole gradient stays O(n p^2). It vanishes for the squared loss (l''' = 0), where
// the result is the exact derivative of the exact LOO.
#pragma once

#include "blas.hpp"
#include "loo.hpp"

namespace aloocv {

struct HyperGradient {
  Vec l2;  // (p) d ACV / d lambda_2,j
  Vec l1;  // (p) d ACV / d lambda_1,j (zero without an L1 term)
};

template <class Loss>
LooResult alo_with_gradient(const Problem& pb, const FitState& st, int n_threads,
                            HyperGradient& grad) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size;  // penalized coordinates in the factor
  const Index q1 = q + off;
  const double tiny = 64 * std::numeric_limits<double>::epsilon();
  // beta restricted to the factor's coordinates
  Vec bq(q1);
  if (pb.intercept) bq[0] = st.beta[0];
  for (Index k = 0; k < q; ++k) bq[off + k] = st.beta[off + (cols.all() ? k : cols.cols[k])];
  // grad |theta_j| on the support of beta_hat: ACV holds the active set (and its signs)
  // fixed, so sign(beta_hat) rather than sign(beta~(i)), which can flip for small
  // coefficients, is the derivative of the estimate being tuned.
  Vec sgn(q1);
  for (Index j = 0; j < q1; ++j) sgn[j] = bq[j] > 0.0 ? 1.0 : (bq[j] < 0.0 ? -1.0 : 0.0);
  if (pb.intercept) sgn[0] = 0.0;

  LooResult out;
  out.losses.resize(n);
  out.predictions.resize(n);
  out.leverages.resize(n);
  const bool curved = !Loss::constant_curvature;
  const Index stride = 2 * q1 + (curved ? 2 * q1 * q1 : 0);
  const Partition part{n, reduction_chunks(n, stride, nt, 256)};
  std::vector<double> partial(static_cast<size_t>(part.chunks * stride), 0.0);
  Mat Hinv;
  if (pb.X.sparse) Hinv = st.chol.inverse();
  const Index B = block_rows(q1);
  ExceptionCatcher guard;
#pragma omp parallel num_threads(nt)
  {
    std::vector<double> pack, sbuf, cbuf, pos_buf, neg_buf;
    guard.run([&] {
      pack.resize(static_cast<size_t>(q1 * B));
      if (curved) {
        pos_buf.resize(static_cast<size_t>(q1 * B));
        neg_buf.resize(static_cast<size_t>(q1 * B));
      }
      sbuf.resize(static_cast<size_t>(B));
      cbuf.resize(static_cast<size_t>(B));
    });
#pragma omp for schedule(dynamic, 1)
    for (Index c = 0; c < part.chunks; ++c) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        double* g2 = partial.data() + c * stride;
        double* g1 = g2 + q1;
        double* Spos = g1 + q1;
        double* Sneg = Spos + q1 * q1;
        for (Index i0 = part.begin(c); i0 < part.begin(c + 1); i0 += B) {
          const Index i1 = std::min(part.begin(c + 1), i0 + B), m = i1 - i0;
          pb.X.pack_rows(i0, i1, nullptr, pb.intercept, pack.data(), cols);
          Eigen::Map<Mat> Z(pack.data(), q1, m);
          if (pb.X.sparse) {
            Mat A = Hinv * Z;  // a_i = H^{-1} x~_i (O(q^2) per row; sparse rows are short)
            for (Index k = 0; k < m; ++k) out.leverages[i0 + k] = Z.col(k).dot(A.col(k));
            Z = A;
          } else {
            blas::trsm_lower(q1, m, st.chol.lower(), q1, Z.data(), q1);  // L^{-1} x~
            for (Index k = 0; k < m; ++k) out.leverages[i0 + k] = Z.col(k).squaredNorm();
            blas::trsm_lower(q1, m, st.chol.lower(), q1, Z.data(), q1, true);  // a_i
          }
          for (Index k = 0; k < m; ++k) {
            const Index i = i0 + k;
            const double y = pb.y[i], eta = st.eta[i], w = pb.weight(i), h = out.leverages[i];
            const double dh = w * Loss::d2(y, eta) * h, den = 1.0 - dh;
            if (w != 0.0 && !(den > tiny)) detail::throw_loo_singular(i, dh);
            const double s = w * Loss::d1(y, eta) / den;
            const double e = eta + s * h;
            out.predictions[i] = e;
            out.losses[i] = Loss::value(y, e);
            sbuf[static_cast<size_t>(k)] = s;
            cbuf[static_cast<size_t>(k)] = w == 0.0 ? 0.0 : -w * Loss::d1(y, e) / den;
          }
          if (curved) {  // S += sum_i kappa_i a_i a_i^T, split by the sign of kappa
            Index np_ = 0, nn_ = 0;
            for (Index k = 0; k < m; ++k) {
              const double kappa = -cbuf[static_cast<size_t>(k)] * sbuf[static_cast<size_t>(k)];
              if (kappa == 0.0) continue;
              const double r = std::sqrt(std::abs(kappa));
              double* dst =
                  kappa > 0 ? pos_buf.data() + (np_++) * q1 : neg_buf.data() + (nn_++) * q1;
              for (Index j = 0; j < q1; ++j) dst[j] = r * Z(j, k);
            }
            blas::syrk_lower(q1, np_, pos_buf.data(), q1, 1.0, Spos, q1);
            blas::syrk_lower(q1, nn_, neg_buf.data(), q1, 1.0, Sneg, q1);
          }
          for (Index k = 0; k < m; ++k) {
            const double s = sbuf[static_cast<size_t>(k)], ci = cbuf[static_cast<size_t>(k)];
            if (ci == 0.0) continue;
            const double* a = Z.data() + k * q1;
            for (Index j = off; j < q1; ++j) {
              const double bt = bq[j] + s * a[j];  // beta~(i)_j
              g2[j] += ci * a[j] * bt;
              g1[j] += ci * a[j] * sgn[j];
            }
          }
        }
      });
    }
  }
  guard.rethrow();
  const double sw = pb.weight_sum();
  grad.l2 = Vec::Zero(pb.X.p);
  grad.l1 = Vec::Zero(pb.X.p);
  Vec g2sum = Vec::Zero(q1), g1sum = Vec::Zero(q1);
  Mat S = Mat::Zero(q1, q1);
  for (Index c = 0; c < part.chunks; ++c) {
    const double* g2 = partial.data() + c * stride;
    g2sum += Eigen::Map<const Vec>(g2, q1);
    g1sum += Eigen::Map<const Vec>(g2 + q1, q1);
    if (curved) {
      S += Eigen::Map<const Mat>(g2 + 2 * q1, q1, q1);
      S -= Eigen::Map<const Mat>(g2 + 2 * q1 + q1 * q1, q1, q1);
    }
  }
  if (curved) {
    S.triangularView<Eigen::StrictlyUpper>() = S.transpose();
    // tau_j = w_j l'''_j x~_j^T S x~_j over all rows, then rho = H^{-1} X~_A^T tau
    Vec tau(n);
    const Index nb = (n + B - 1) / B;
#pragma omp parallel num_threads(nt)
    {
      std::vector<double> pack, ybuf;
      guard.run([&] {
        pack.resize(static_cast<size_t>(q1 * B));
        ybuf.resize(static_cast<size_t>(q1 * B));
      });
#pragma omp for schedule(dynamic, 1)
      for (Index blk = 0; blk < nb; ++blk) {
        if (guard.failed()) continue;
        guard.run([&] {
          interrupt::check();
          const Index i0 = blk * B, i1 = std::min(n, i0 + B), m = i1 - i0;
          pb.X.pack_rows(i0, i1, nullptr, pb.intercept, pack.data(), cols);
          blas::gemm(q1, m, q1, S.data(), q1, pack.data(), q1, ybuf.data(), q1);
          for (Index k = 0; k < m; ++k) {
            const Index i = i0 + k;
            const double qf = Eigen::Map<const Vec>(pack.data() + k * q1, q1)
                                  .dot(Eigen::Map<const Vec>(ybuf.data() + k * q1, q1));
            tau[i] = pb.weight(i) * Loss::d3(pb.y[i], st.eta[i]) * qf;
          }
        });
      }
    }
    guard.rethrow();
    Vec xt(pb.p1());
    gradient(pb.X, tau.data(), pb.intercept, xt.data(), nt);
    Vec rho(q1);
    if (pb.intercept) rho[0] = xt[0];
    for (Index k = 0; k < q; ++k) rho[off + k] = xt[off + (cols.all() ? k : cols.cols[k])];
    st.chol.solve(rho.data());
    for (Index k = 0; k < q; ++k) {
      const double b = bq[off + k];
      g2sum[off + k] += rho[off + k] * b;
      g1sum[off + k] += rho[off + k] * sgn[off + k];
    }
  }
  for (Index k = 0; k < q; ++k) {
    const Index j = cols.all() ? k : cols.cols[k];
    grad.l2[j] = g2sum[off + k] / sw;
    grad.l1[j] = g1sum[off + k] / sw;
  }
  return out;
}

// Algorithm 2's stochastic gradient: the per-sample terms g(i) of eq. 16 (H_{-i} at
// beta_hat, without the curvature correction, which is global) averaged over the
// samples `idx` with their weights, from the factor in `st`: O(|idx| p^2), no pass
// over X. Also returns the mean ALO loss of those samples in `acv`.
template <class Loss>
HyperGradient sample_gradient(const Problem& pb, const FitState& st, const Index* idx, Index m,
                              double& acv) {
  const Index off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size, q1 = q + off;
  const double tiny = 64 * std::numeric_limits<double>::epsilon();
  HyperGradient g;
  g.l2 = Vec::Zero(pb.X.p);
  g.l1 = Vec::Zero(pb.X.p);
  Vec x(q1), a(q1);
  std::vector<double> full(static_cast<size_t>(pb.p1()));
  double sw = 0.0, loss = 0.0;
  for (Index t = 0; t < m; ++t) {
    const Index i = idx[t];
    if (i < 0 || i >= pb.n()) throw InvalidInput("sample index out of range");
    const double w = pb.weight(i);
    if (w == 0.0) continue;
    pb.row(i, full.data());
    if (pb.intercept) x[0] = 1.0;
    for (Index k = 0; k < q; ++k) x[off + k] = full[off + (cols.all() ? k : cols.cols[k])];
    a = x;
    st.chol.solve(a.data());
    const double y = pb.y[i], eta = st.eta[i], h = x.dot(a);
    const double dh = w * Loss::d2(y, eta) * h, den = 1.0 - dh;
    if (!(den > tiny)) detail::throw_loo_singular(i, dh);
    const double s = w * Loss::d1(y, eta) / den, e = eta + s * h;
    const double c = -w * Loss::d1(y, e) / den;
    loss += w * Loss::value(y, e);
    sw += w;
    for (Index k = 0; k < q; ++k) {
      const Index j = cols.all() ? k : cols.cols[k];
      const double b = st.beta[off + j];
      g.l2[j] += c * a[off + k] * (b + s * a[off + k]);
      g.l1[j] += c * a[off + k] * (b > 0.0 ? 1.0 : (b < 0.0 ? -1.0 : 0.0));
    }
  }
  if (sw > 0.0) {
    g.l2 /= sw;
    g.l1 /= sw;
    acv = loss / sw;
  } else {
    acv = 0.0;
  }
  return g;
}

LooResult loo_gradient(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                       HyperGradient& grad);
HyperGradient loo_sample_gradient(const Problem& pb, LossKind loss, const FitState& st,
                                  const Index* idx, Index m, double& acv);

}  // namespace aloocv
