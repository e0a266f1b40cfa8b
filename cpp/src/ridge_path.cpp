#include "aloocv/ridge_path.hpp"

#include <Eigen/Eigenvalues>
#include <limits>
#include <sstream>

#include "aloocv/blas.hpp"
#include "aloocv/hessian.hpp"

namespace aloocv {

void sym_eigen(const Mat& G, Vec& s, Mat& V, const char* what) {
  Eigen::SelfAdjointEigenSolver<Mat> eig(G);
  if (eig.info() != Eigen::Success) throw InvalidInput(std::string(what) + " failed");
  s = eig.eigenvalues().cwiseMax(0.0);
  V = eig.eigenvectors();
}

RidgePath ridge_path(const Problem& pb, const double* lams, Index k, int n_threads) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), p = pb.X.p, off = pb.intercept ? 1 : 0, p1 = p + off;
  Vec w(n);
  for (Index i = 0; i < n; ++i) w[i] = pb.weight(i);
  const double sw = w.sum();
  // H~ = X~^T W X~, then the Schur complement of the intercept
  Mat H(p1, p1);
  hessian(pb.X, w.data(), pb.intercept, H.data(), nt);
  Vec mu = Vec::Zero(p);
  double ybar = 0.0;
  Mat G = H.bottomRightCorner(p, p);
  Vec wy(n);
  for (Index i = 0; i < n; ++i) wy[i] = w[i] * pb.y[i];
  Vec xty(p1);
  gradient(pb.X, wy.data(), pb.intercept, xty.data(), nt);  // X~^T W y
  Vec rhs = xty.tail(p);
  if (pb.intercept) {
    mu = H.col(0).tail(p) / sw;
    G.noalias() -= sw * mu * mu.transpose();
    ybar = xty[0] / sw;
    rhs -= mu * xty[0];  // X_c^T W y = X^T W y - mu sum(w y)
  }
  Vec s;
  Mat V;
  sym_eigen(G, s, V, "eigendecomposition of X^T W X");
  const Vec c = V.transpose() * rhs;
  for (Index j = 0; j < k; ++j) {
    const double smin = s.size() ? s.minCoeff() : 0.0;
    if (!(smin + lams[j] > 1e-12 * std::max(1.0, s.size() ? s.maxCoeff() : 1.0))) {
      std::ostringstream msg;
      msg << "ridge with lambda = " << lams[j]
          << " is singular on this data (p > n or collinear features); use lambda > 0";
      throw SingularHessian(msg.str());
    }
  }
  RidgePath out;
  out.losses.resize(n, k);
  out.predictions.resize(n, k);
  out.coef.resize(p, k);
  out.intercept.resize(k);
  Mat inv(p, k);  // 1 / (s + lambda)
  for (Index j = 0; j < k; ++j) inv.col(j) = (s.array() + lams[j]).inverse().matrix();
  for (Index j = 0; j < k; ++j) {
    out.coef.col(j) = V * (c.cwiseProduct(inv.col(j)));
    out.intercept[j] = pb.intercept ? ybar - mu.dot(out.coef.col(j)) : 0.0;
  }
  const Mat Vt = V.transpose();
  const Mat cinv = inv.array().colwise() * c.array();  // c_k / (s_k + lambda_j)
  const Index B = block_rows(p);
  const Index nb = (n + B - 1) / B;
  const double tiny = 64 * std::numeric_limits<double>::epsilon();
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
  // small problems on the calling thread (a team costs more than the loop there)
  const double work = double(n) * double(p) * double(p + 2 * k);
#pragma omp parallel num_threads(threads_for(nt, work))
  {
    interrupt::Share share(ictx);
    std::vector<double> pack, zbuf;
    guard.run([&] {
      pack.resize(static_cast<size_t>(p * B));
      zbuf.resize(static_cast<size_t>(p * B));
    });
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < nb; ++b) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        const Index i0 = b * B, i1 = std::min(n, i0 + B), m = i1 - i0;
        pb.X.pack_rows(i0, i1, nullptr, false, pack.data());
        Eigen::Map<Mat> Xb(pack.data(), p, m);
        if (pb.intercept) Xb.colwise() -= mu;
        blas::gemm(p, m, p, Vt.data(), p, pack.data(), p, zbuf.data(), p);
        Eigen::Map<const Mat> Z(zbuf.data(), p, m);
        const Mat Z2 = Z.array().square().matrix();
        const Mat hb = Z2.transpose() * inv;  // (m x k)
        const Mat eb = Z.transpose() * cinv;  // (m x k)
        for (Index j = 0; j < k; ++j) {
          for (Index r = 0; r < m; ++r) {
            const Index i = i0 + r;
            const double h = hb(r, j) + (pb.intercept ? 1.0 / sw : 0.0);
            const double eta = eb(r, j) + ybar;
            const double dh = w[i] * h, den = 1.0 - dh;
            if (w[i] != 0.0 && !(den > tiny)) {
              std::ostringstream msg;
              msg << "the leave-one-out Hessian is singular for sample " << i
                  << " at lambda = " << lams[j] << "; use a larger penalty";
              throw SingularHessian(msg.str());
            }
            const double e = eta + w[i] * (eta - pb.y[i]) * h / den;
            out.predictions(i, j) = e;
            out.losses(i, j) = 0.5 * (pb.y[i] - e) * (pb.y[i] - e);
          }
        }
      });
    }
  }
  guard.rethrow();
  return out;
}

RidgeSpectrum ridge_spectrum(const Problem& pb, const double* Z, Index m, int n_threads) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), p = pb.X.p, p1 = pb.p1();
  Vec ones = Vec::Ones(n);
  Mat H(p1, p1);
  hessian(pb.X, ones.data(), pb.intercept, H.data(), nt);
  RidgeSpectrum out;
  Mat G = H.bottomRightCorner(p, p);
  out.mu = Vec::Zero(p);
  if (pb.intercept) {
    out.mu = H.col(0).tail(p) / static_cast<double>(n);
    G.noalias() -= static_cast<double>(n) * out.mu * out.mu.transpose();
  }
  sym_eigen(G, out.s, out.V, "eigendecomposition of X^T X");
  Mat XtZ(p, m);
  Vec col(p1);
  for (Index j = 0; j < m; ++j) {  // X~^T z_j, then the centering through the intercept row
    gradient(pb.X, Z + j * n, pb.intercept, col.data(), nt);
    XtZ.col(j) = col.tail(p);
    if (pb.intercept) XtZ.col(j) -= out.mu * col[0];
  }
  out.C = out.V.transpose() * XtZ;
  return out;
}

}  // namespace aloocv
