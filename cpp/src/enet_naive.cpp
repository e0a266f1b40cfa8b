// The elastic net's working-set model solve without the working set's Hessian (enet.hpp,
// quadratic_cd_naive): coordinate descent on
//   g^T delta + 1/2 delta^T (X~_W^T diag(d) X~_W + diag(pen_W)) delta + sum l1 |beta + delta|
// with the columns of X~_W gathered once (CSC) and z = X~_W delta kept up to date, so that
// the k-th coordinate's model gradient g_k + x_k^T diag(d) z + pen_k delta_k and its update
// cost the non-zeros of column k. The iterates are quadratic_cd's (same order of updates,
// same stopping test and work bound) up to rounding. docs/math/newton.md, "The elastic
// net's working sets".
#include <algorithm>
#include <cmath>
#include <vector>

#include "aloocv/enet.hpp"

namespace aloocv {
namespace detail {

namespace {

// The columns W of X~ (intercept: a column of ones, kept implicit) in compressed form.
struct GatheredColumns {
  std::vector<Index> start;  // |W| + 1 offsets into rows/vals (the intercept's: empty)
  std::vector<int> rows;
  std::vector<double> vals;
  Index intercept_pos = -1;  // position of the intercept in W, or -1
};

GatheredColumns gather_columns(const Design& X, bool intercept, const std::vector<Index>& W) {
  const Index off = intercept ? 1 : 0;
  const Index w = static_cast<Index>(W.size());
  GatheredColumns c;
  std::vector<Index> pos(static_cast<size_t>(X.p), -1);  // feature -> position in W
  for (Index k = 0; k < w; ++k) {
    if (W[k] < off) {
      c.intercept_pos = k;
    } else {
      pos[static_cast<size_t>(W[k] - off)] = k;
    }
  }
  const CsrView& v = X.csr;
  std::vector<Index> count(static_cast<size_t>(w) + 1, 0);
  for (Index a = v.indptr[0]; a < v.indptr[X.n]; ++a) {
    const Index k = pos[static_cast<size_t>(v.indices[a])];
    if (k >= 0) ++count[static_cast<size_t>(k) + 1];
  }
  c.start.assign(static_cast<size_t>(w) + 1, 0);
  for (Index k = 0; k < w; ++k) c.start[k + 1] = c.start[k] + count[k + 1];
  c.rows.resize(static_cast<size_t>(c.start[w]));
  c.vals.resize(static_cast<size_t>(c.start[w]));
  std::vector<Index> fill(c.start.begin(), c.start.end() - 1);
  for (Index i = 0; i < X.n; ++i) {  // rows in order: each column's rows ascend
    for (Index a = v.indptr[i]; a < v.indptr[i + 1]; ++a) {
      const Index k = pos[static_cast<size_t>(v.indices[a])];
      if (k < 0) continue;
      const size_t at = static_cast<size_t>(fill[k]++);
      c.rows[at] = static_cast<int>(i);
      c.vals[at] = v.val(a);
    }
  }
  return c;
}

}  // namespace

bool prefer_naive_cd(const Design& X, bool intercept, const std::vector<Index>& W) {
  if (!X.sparse) return false;
  const Index off = intercept ? 1 : 0;
  // non-zeros of X_W, estimated from the column count (the exact count is a pass over X)
  const double w = static_cast<double>(W.size());
  const double feats = w - static_cast<double>(off);
  const double nnz_w = static_cast<double>(X.nnz()) * feats / std::max<double>(1.0, double(X.p));
  return w * w > 4.0 * (nnz_w + static_cast<double>(X.n));
}

Vec quadratic_cd_naive(const Design& X, const double* d, bool intercept,
                       const std::vector<Index>& W, const Vec& pen, const Vec& g, const Vec& beta,
                       const Vec& l1, double tol, Index max_sweeps) {
  const Index m = static_cast<Index>(W.size());
  Vec delta = Vec::Zero(m);
  if (m == 0) return delta;
  const GatheredColumns c = gather_columns(X, intercept, W);
  const Index n = X.n;
  Vec z = Vec::Zero(n);  // X~_W delta
  Vec a(m);              // the diagonal of H on W
  for (Index k = 0; k < m; ++k) {
    double s = 0.0;
    if (k == c.intercept_pos) {
      for (Index i = 0; i < n; ++i) s += d[i];
    } else {
      for (Index t = c.start[k]; t < c.start[k + 1]; ++t) {
        const double x = c.vals[static_cast<size_t>(t)];
        s += d[c.rows[static_cast<size_t>(t)]] * x * x;
      }
    }
    a[k] = s + pen[W[k]];
  }
  const double scale = a.cwiseProduct(beta).cwiseAbs().maxCoeff() + g.cwiseAbs().maxCoeff() +
                       l1.cwiseAbs().maxCoeff();
  tol = std::max(tol, kCdRoundingFloor * scale);
  cd_sweeps(m, beta, delta, l1, tol, max_sweeps, [&](Index k) {
    const double ak = a[k];
    if (!(ak > 0.0)) return 0.0;
    double q = pen[W[k]] * delta[k];  // (H delta)_k
    if (k == c.intercept_pos) {
      for (Index i = 0; i < n; ++i) q += d[i] * z[i];
    } else {
      for (Index t = c.start[k]; t < c.start[k + 1]; ++t) {
        const Index i = c.rows[static_cast<size_t>(t)];
        q += c.vals[static_cast<size_t>(t)] * d[i] * z[i];
      }
    }
    const double z_old = beta[k] + delta[k];
    const double u = ak * z_old - (g[k] + q);
    const double z_new =
        std::abs(u) <= l1[k] * (1.0 + kL1TieRel) ? 0.0 : soft_threshold(u, l1[k]) / ak;
    const double step = z_new - z_old;
    if (step != 0.0) {
      delta[k] += step;
      if (k == c.intercept_pos) {
        z.array() += step;
      } else {
        for (Index t = c.start[k]; t < c.start[k + 1]; ++t) {
          z[c.rows[static_cast<size_t>(t)]] += step * c.vals[static_cast<size_t>(t)];
        }
      }
    }
    return std::abs(step) * ak;  // change of the model gradient at k
  });
  return delta;
}

}  // namespace detail
}  // namespace aloocv
