// A read-only view of a dense design matrix X (n x p) with arbitrary element strides:
// C order (col stride 1), Fortran order (row stride 1) or any strided numpy view,
// used in place without a copy. The intercept column x~ = (1, x) is never stored.
#pragma once

#include "common.hpp"

namespace aloocv {

struct DenseView {
  const double* data = nullptr;
  Index n = 0, p = 0;
  Index row_stride = 0, col_stride = 1;  // in elements

  double operator()(Index i, Index j) const { return data[i * row_stride + j * col_stride]; }

  // Calls f(M) with M an Eigen expression of rows [i0, i1) that keeps unit inner
  // stride where the memory layout has one, so that products vectorize.
  template <class F>
  decltype(auto) with_rows(Index i0, Index i1, F&& f) const {
    const double* base = data + i0 * row_stride;
    const Index m = i1 - i0;
    if (col_stride == 1) {
      using M = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      return f(Eigen::Map<const M, 0, Eigen::OuterStride<>>(base, m, p,
                                                            Eigen::OuterStride<>(row_stride)));
    }
    if (row_stride == 1) {
      return f(Eigen::Map<const Mat, 0, Eigen::OuterStride<>>(base, m, p,
                                                              Eigen::OuterStride<>(col_stride)));
    }
    using M = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    return f(Eigen::Map<const M, 0, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>(
        base, m, p, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(row_stride, col_stride)));
  }

  // out (p1 x m, column-major, leading dimension p1) column k = scale[k] * x~_{i0+k},
  // with x~ = (1, x) when intercept; scale == nullptr means 1.
  void pack_rows(Index i0, Index i1, const double* scale, bool intercept, double* out) const {
    const Index off = intercept ? 1 : 0;
    const Index p1 = p + off;
    const Index m = i1 - i0;
    if (row_stride == 1 && col_stride != 1) {
      // Fortran order: read columns contiguously.
      if (intercept)
        for (Index k = 0; k < m; ++k) out[k * p1] = scale ? scale[k] : 1.0;
      for (Index j = 0; j < p; ++j) {
        const double* col = data + j * col_stride + i0;
        double* o = out + off + j;
        if (scale) {
          for (Index k = 0; k < m; ++k) o[k * p1] = scale[k] * col[k];
        } else {
          for (Index k = 0; k < m; ++k) o[k * p1] = col[k];
        }
      }
      return;
    }
    for (Index k = 0; k < m; ++k) {
      const Index i = i0 + k;
      const double s = scale ? scale[k] : 1.0;
      double* o = out + k * p1;
      if (intercept) o[0] = s;
      const double* row = data + i * row_stride;
      for (Index j = 0; j < p; ++j) o[off + j] = s * row[j * col_stride];
    }
  }
};

// Linear predictor of coefficients beta = (b, theta) (b only when intercept).
inline double dot_row(const DenseView& X, Index i, const double* beta, bool intercept) {
  const Index off = intercept ? 1 : 0;
  double acc = intercept ? beta[0] : 0.0;
  const double* row = X.data + i * X.row_stride;
  for (Index j = 0; j < X.p; ++j) acc += row[j * X.col_stride] * beta[off + j];
  return acc;
}

}  // namespace aloocv
