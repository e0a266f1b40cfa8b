// Read-only views of the design matrix X (n x p), used in place without copies:
//  - DenseView: any element strides (C order, Fortran order, strided numpy views);
//  - CsrView: compressed sparse rows (scipy CSR with 32-bit indices).
// Either stores float64 or float32 values (data or data32, the other null). float32 data
// are read in place and widened to float64 as they are read (a row block at a time in
// with_rows, element by element in the pack_* routines): every product, p x p matrix and
// reduction accumulates in float64, and the kernels need not know the storage type.
// Design wraps either one; kernels dispatch once per pass, not per element.
// The intercept column x~ = (1, x) is never stored.
#pragma once

#include <Eigen/SparseCore>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "blas.hpp"
#include "common.hpp"

namespace aloocv {

// Bytes of float64 rows that a float32 design widens at once (for_row_blocks).
constexpr Index kWidenBytes = Index(256) * 1024;
// The widest row blocks whose products go to the row kernels or DGEMV (block_gemv,
// DenseView::rows_gemv); wider ones to Eigen.
constexpr Index kBlasGemvMaxCols = 512;

struct DenseView {
  const double* data = nullptr;
  const float* data32 = nullptr;  // float32 storage (then data == nullptr)
  Index n = 0, p = 0;
  Index row_stride = 0, col_stride = 1;  // in elements

  bool is_f32() const { return data32 != nullptr; }
  bool empty() const { return data == nullptr && data32 == nullptr; }

  double operator()(Index i, Index j) const {
    const Index k = i * row_stride + j * col_stride;
    return data32 ? static_cast<double>(data32[k]) : data[k];
  }

  // Calls g(ptr) with the typed base pointer (const double* or const float*).
  template <class G>
  decltype(auto) visit(G&& g) const {
    if (data32) return g(data32);
    return g(data);
  }

  // y = X[i0:i1) x + beta y (transpose false) or X[i0:i1)^T x + beta y (true) straight
  // from the storage through the row kernels (blas::row_gemv: float32 rows widened in
  // registers, no widened copy) where rows are contiguous and at most kBlasGemvMaxCols
  // wide; false (y untouched) otherwise (the caller then goes through with_rows).
  bool rows_gemv(Index i0, Index i1, bool transpose, const double* x, double beta,
                 double* y) const {
    if (col_stride != 1 || p == 0 || p > kBlasGemvMaxCols || i1 <= i0) return false;
    return data32 ? blas::row_gemv(transpose, i1 - i0, p, data32 + i0 * row_stride, row_stride, x,
                                   beta, y)
                  : blas::row_gemv(transpose, i1 - i0, p, data + i0 * row_stride, row_stride, x,
                                   beta, y);
  }

  // Calls f(M) with M an Eigen expression of rows [i0, i1) that keeps unit inner
  // stride where the memory layout has one, so that products vectorize. float32 rows are
  // widened into a float64 buffer of the block (in the storage order of X) first, passed
  // as the float64 maps of that order are (the same types: f is compiled for three dense
  // layouts, not five).
  template <class F>
  decltype(auto) with_rows(Index i0, Index i1, F&& f) const {
    const Index m = i1 - i0;
    if (data32) {
      std::vector<double> buf(static_cast<size_t>(m * p));
      const float* base = data32 + i0 * row_stride;
      if (row_stride == 1 && col_stride != 1) {  // Fortran order: column-major block
        for (Index j = 0; j < p; ++j) {
          const float* col = base + j * col_stride;
          double* o = buf.data() + j * m;
          for (Index k = 0; k < m; ++k) o[k] = static_cast<double>(col[k]);
        }
        return f(Eigen::Map<const Mat, 0, Eigen::OuterStride<>>(buf.data(), m, p,
                                                                Eigen::OuterStride<>(m)));
      }
      for (Index k = 0; k < m; ++k) {
        const float* row = base + k * row_stride;
        double* o = buf.data() + k * p;
        if (col_stride == 1) {
          for (Index j = 0; j < p; ++j) o[j] = static_cast<double>(row[j]);
        } else {
          for (Index j = 0; j < p; ++j) o[j] = static_cast<double>(row[j * col_stride]);
        }
      }
      using M = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      return f(
          Eigen::Map<const M, 0, Eigen::OuterStride<>>(buf.data(), m, p, Eigen::OuterStride<>(p)));
    }
    const double* base = data + i0 * row_stride;
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
};

// The row-block products of the O(n p) passes where the block M (a dense float64 Eigen
// map of rows, as with_rows / for_row_blocks give) has unit inner stride:
// y = M x + beta y (transpose false) or y = M^T x + beta y (true). Row-major blocks
// (C-ordered X) go to the core's row kernels where the CPU has them (blas::row_gemv),
// other blocks and CPUs to the registered DGEMV. False (y untouched) for other blocks
// (sparse, strided) or without either: the caller then uses Eigen. Measured on one
// thread, n=100000, blocks of fused_step's size (X v and X^T g of a row block): scipy's
// OpenBLAS (runtime-dispatched kernels) beats Eigen's portable GEMV (built without
// -march) by 10-30% at p = 50..500 and ties at p = 1000; the row kernels take 0.65-0.72x
// OpenBLAS's time at p = 50..400; wider blocks stay with Eigen (kBlasGemvMaxCols).
template <class M>
bool block_gemv(const M& A, bool transpose, const double* x, double beta, double* y) {
  if constexpr (std::is_base_of_v<Eigen::DenseBase<M>, M>) {
    if constexpr (std::is_same_v<typename M::Scalar, double>) {
      if (A.innerStride() != 1 || A.rows() == 0 || A.cols() == 0 || A.cols() > kBlasGemvMaxCols) {
        return false;
      }
      if constexpr (M::IsRowMajor) {
        if (blas::row_gemv(transpose, A.rows(), A.cols(), A.data(), A.outerStride(), x, beta, y)) {
          return true;
        }
        // the row-major rows x cols block is the column-major cols x rows matrix B = A^T
        return blas::gemv(!transpose, A.cols(), A.rows(), 1.0, A.data(), A.outerStride(), x, beta,
                          y);
      } else {
        return blas::gemv(transpose, A.rows(), A.cols(), 1.0, A.data(), A.outerStride(), x, beta,
                          y);
      }
    } else {
      return false;
    }
  } else {
    return false;
  }
}

struct CsrView {
  const double* data = nullptr;
  const float* data32 = nullptr;  // float32 values (then data == nullptr)
  const int* indices = nullptr;
  const int* indptr = nullptr;  // n + 1 offsets
  Index n = 0, p = 0;

  bool is_f32() const { return data32 != nullptr; }
  double val(Index a) const { return data32 ? static_cast<double>(data32[a]) : data[a]; }
};

// A subset of columns (features): `cols` of length `size`, or all when cols == nullptr.
struct Columns {
  const Index* cols = nullptr;
  Index size = 0;
  bool subset = false;  // false: all columns
  bool all() const { return !subset; }
  static Columns of(const std::vector<Index>& v) {
    return Columns{v.data(), static_cast<Index>(v.size()), true};
  }
};

struct Design {
  DenseView dense;
  CsrView csr;
  bool sparse = false;
  Index n = 0, p = 0;

  static Design from(const DenseView& v) {
    Design d;
    d.dense = v;
    d.n = v.n;
    d.p = v.p;
    return d;
  }
  static Design from(const CsrView& v) {
    Design d;
    d.csr = v;
    d.sparse = true;
    d.n = v.n;
    d.p = v.p;
    return d;
  }

  Index nnz() const { return sparse ? csr.indptr[n] - csr.indptr[0] : n * p; }

  // DenseView::rows_gemv for dense designs; false for sparse ones.
  bool rows_gemv(Index i0, Index i1, bool transpose, const double* x, double beta,
                 double* y) const {
    return !sparse && dense.rows_gemv(i0, i1, transpose, x, beta, y);
  }

  // Calls f(M) with M an Eigen (dense or sparse row-major) expression of rows [i0, i1).
  // f(M, a) on the rows [i0, i1) in consecutive blocks, M the rows from row a on (as
  // with_rows gives them): one block, a view without a copy, except for dense float32
  // storage, which with_rows widens to float64: there blocks of at most kWidenBytes, so
  // that the widened copy stays small whatever the range (a reduction chunk of n / 64
  // rows at p = 200 would be 5 MiB per thread).
  template <class F>
  void for_row_blocks(Index i0, Index i1, F&& f) const {
    if (sparse || !dense.is_f32()) {
      with_rows(i0, i1, [&](const auto& M) { f(M, i0); });
      return;
    }
    const Index B =
        std::max<Index>(16, kWidenBytes / (Index(sizeof(double)) * std::max<Index>(1, p)));
    for (Index a = i0; a < i1; a += B) {
      with_rows(a, std::min(i1, a + B), [&](const auto& M) { f(M, a); });
    }
  }

  template <class F>
  decltype(auto) with_rows(Index i0, Index i1, F&& f) const {
    if (!sparse) return dense.with_rows(i0, i1, f);
    const Index nnz_block = csr.indptr[i1] - csr.indptr[i0];
    // Offsets in indptr are absolute: the map reads indices/data from their bases.
    if (csr.data32) {  // widened entry by entry as the products read them
      using SF = Eigen::SparseMatrix<float, Eigen::RowMajor, int>;
      Eigen::Map<const SF> M(i1 - i0, p, nnz_block, csr.indptr + i0, csr.indices, csr.data32);
      return f(M.template cast<double>());
    }
    using SM = Eigen::SparseMatrix<double, Eigen::RowMajor, int>;
    Eigen::Map<const SM> M(i1 - i0, p, nnz_block, csr.indptr + i0, csr.indices, csr.data);
    return f(M);
  }

  // out (p1 x m, column-major, leading dimension p1) column k = scale[k] * x~_{i0+k}
  // restricted to `cols` (p1 = |cols| + intercept); scale == nullptr means 1.
  // T: double, or float for the float32 SYRK of float32 designs (hessian.cpp).
  template <class T>
  void pack_rows(Index i0, Index i1, const double* scale, bool intercept, T* out,
                 Columns cols = {}) const {
    const Index off = intercept ? 1 : 0;
    const Index q = cols.all() ? p : cols.size;
    const Index p1 = q + off;
    const Index m = i1 - i0;
    if (sparse) {
      std::fill(out, out + p1 * m, T(0));
      const int* pos = nullptr;
      std::vector<int> map;
      if (!cols.all()) {
        map.assign(static_cast<size_t>(p), -1);
        for (Index k = 0; k < q; ++k) map[static_cast<size_t>(cols.cols[k])] = static_cast<int>(k);
        pos = map.data();
      }
      for (Index k = 0; k < m; ++k) {
        const Index i = i0 + k;
        const double s = scale ? scale[k] : 1.0;
        T* o = out + k * p1;
        if (intercept) o[0] = static_cast<T>(s);
        for (Index a = csr.indptr[i]; a < csr.indptr[i + 1]; ++a) {
          const int j = pos ? pos[csr.indices[a]] : csr.indices[a];
          if (j >= 0) o[off + j] += static_cast<T>(s * csr.val(a));
        }
      }
      return;
    }
    const DenseView& X = dense;
    X.visit([&](const auto* data) {
      if (X.row_stride == 1 && X.col_stride != 1) {
        // Fortran order: read columns contiguously.
        if (intercept)
          for (Index k = 0; k < m; ++k) out[k * p1] = static_cast<T>(scale ? scale[k] : 1.0);
        for (Index jj = 0; jj < q; ++jj) {
          const Index j = cols.all() ? jj : cols.cols[jj];
          const auto* col = data + j * X.col_stride + i0;
          T* o = out + off + jj;
          if (scale) {
            for (Index k = 0; k < m; ++k) o[k * p1] = static_cast<T>(scale[k] * col[k]);
          } else {
            for (Index k = 0; k < m; ++k) o[k * p1] = static_cast<T>(col[k]);
          }
        }
        return;
      }
      for (Index k = 0; k < m; ++k) {
        const Index i = i0 + k;
        const double s = scale ? scale[k] : 1.0;
        T* o = out + k * p1;
        if (intercept) o[0] = static_cast<T>(s);
        const auto* row = data + i * X.row_stride;
        if (cols.all()) {
          for (Index j = 0; j < p; ++j) o[off + j] = static_cast<T>(s * row[j * X.col_stride]);
        } else {
          for (Index jj = 0; jj < q; ++jj)
            o[off + jj] = static_cast<T>(s * row[cols.cols[jj] * X.col_stride]);
        }
      }
    });
  }

  // Like pack_rows for the rows idx[0..m) (any order): column k = scale[k] * x~_{idx[k]}.
  void pack_indices(const Index* idx, Index m, const double* scale, bool intercept, double* out,
                    Columns cols = {}) const {
    const Index p1 = (cols.all() ? p : cols.size) + (intercept ? 1 : 0);
    for (Index k = 0; k < m; ++k) {
      pack_rows(idx[k], idx[k] + 1, scale ? scale + k : nullptr, intercept, out + k * p1, cols);
    }
  }

  // The column block [j0, j1) of X (no intercept) into out (n x m, column-major, leading
  // dimension n), column k scaled by scale[k] (scale == nullptr means 1). Reads X in its
  // storage order: whole columns for Fortran order, short row segments for C order.
  void pack_cols(Index j0, Index j1, const double* scale, double* out) const {
    const Index m = j1 - j0;
    if (sparse) {
      std::fill(out, out + n * m, 0.0);
      for (Index i = 0; i < n; ++i) {
        for (Index a = csr.indptr[i]; a < csr.indptr[i + 1]; ++a) {
          const Index j = csr.indices[a];
          if (j < j0 || j >= j1) continue;
          out[(j - j0) * n + i] += (scale ? scale[j - j0] : 1.0) * csr.val(a);
        }
      }
      return;
    }
    const DenseView& X = dense;
    X.visit([&](const auto* data) {
      if (X.row_stride == 1) {
        for (Index k = 0; k < m; ++k) {
          const auto* col = data + (j0 + k) * X.col_stride;
          const double s = scale ? scale[k] : 1.0;
          double* o = out + k * n;
          for (Index i = 0; i < n; ++i) o[i] = s * col[i];
        }
        return;
      }
      constexpr Index tile = 16;  // rows read together: contiguous reads and writes
      for (Index i0 = 0; i0 < n; i0 += tile) {
        const Index i1 = std::min(n, i0 + tile);
        for (Index k = 0; k < m; ++k) {
          const double s = scale ? scale[k] : 1.0;
          const auto* x = data + i0 * X.row_stride + (j0 + k) * X.col_stride;
          double* o = out + k * n;
          for (Index i = i0; i < i1; ++i, x += X.row_stride) o[i] = s * *x;
        }
      }
    });
  }

  // x~_i as a dense vector of length p + intercept.
  void row(Index i, bool intercept, double* out) const {
    pack_rows(i, i + 1, nullptr, intercept, out);
  }
};

}  // namespace aloocv
