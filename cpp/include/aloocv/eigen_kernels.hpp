// Eigen's double-precision product and triangular kernels (and the LLT factorization),
// instantiated once (in blas.cpp, at -O3) instead of in every source that multiplies,
// solves or factors with Eigen matrices: each source compiled them again (the GEMM
// micro-kernel gebp_kernel alone about 6 kB of code, in 12 objects), compile time that the
// linker then threw away (-8.5% of loo.cpp's).
// Explicit instantiation declarations below; definitions with ALOOCV_EIGEN_KERNELS_DEFINE.
//
// The kernels' template parameters are Eigen's internals: the list is written against
// Eigen 3.4 (the version that CMakeLists.txt requires), and another version compiles without
// it (each source then instantiates the kernels itself, as before). A kernel missing from
// the list is instantiated implicitly where it is used; one listed but never used costs
// only its one instantiation in blas.cpp.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>

#if EIGEN_WORLD_VERSION == 3 && EIGEN_MAJOR_VERSION == 4 && !defined(ALOOCV_NO_EIGEN_KERNELS)

#ifdef ALOOCV_EIGEN_KERNELS_DEFINE
#define ALOOCV_EIGEN_KERNEL template
#else
#define ALOOCV_EIGEN_KERNEL extern template
#endif

namespace Eigen::internal {
namespace aloocv_kernels {
using I = Eigen::Index;
using Tr = gebp_traits<double, double>;
using Res = blas_data_mapper<double, I, ColMajor, Unaligned, 1>;
template <int Order>
using In = const_blas_data_mapper<double, I, Order>;
}  // namespace aloocv_kernels

// GEMM: the micro-kernel, the packing of its operands and the blocked driver
// (column- and row-major operands, unit inner stride of the result)
ALOOCV_EIGEN_KERNEL struct gebp_kernel<double, double, aloocv_kernels::I, aloocv_kernels::Res,
                                       aloocv_kernels::Tr::mr, aloocv_kernels::Tr::nr, false,
                                       false>;
ALOOCV_EIGEN_KERNEL struct gemm_pack_lhs<double, aloocv_kernels::I, aloocv_kernels::In<ColMajor>,
                                         aloocv_kernels::Tr::mr, aloocv_kernels::Tr::LhsProgress,
                                         aloocv_kernels::Tr::LhsPacket4Packing, ColMajor>;
ALOOCV_EIGEN_KERNEL struct gemm_pack_lhs<double, aloocv_kernels::I, aloocv_kernels::In<RowMajor>,
                                         aloocv_kernels::Tr::mr, aloocv_kernels::Tr::LhsProgress,
                                         aloocv_kernels::Tr::LhsPacket4Packing, RowMajor>;
ALOOCV_EIGEN_KERNEL struct gemm_pack_rhs<double, aloocv_kernels::I, aloocv_kernels::In<ColMajor>,
                                         aloocv_kernels::Tr::nr, ColMajor>;
ALOOCV_EIGEN_KERNEL struct gemm_pack_rhs<double, aloocv_kernels::I, aloocv_kernels::In<RowMajor>,
                                         aloocv_kernels::Tr::nr, RowMajor>;
// panel-mode packings of the triangular solves and products
ALOOCV_EIGEN_KERNEL struct gemm_pack_rhs<double, aloocv_kernels::I, aloocv_kernels::In<RowMajor>,
                                         aloocv_kernels::Tr::nr, RowMajor, false, true>;
ALOOCV_EIGEN_KERNEL struct gemm_pack_rhs<double, aloocv_kernels::I, aloocv_kernels::Res,
                                         aloocv_kernels::Tr::nr, ColMajor, false, true>;
ALOOCV_EIGEN_KERNEL struct general_matrix_matrix_product<aloocv_kernels::I, double, ColMajor, false,
                                                         double, ColMajor, false, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct general_matrix_matrix_product<aloocv_kernels::I, double, RowMajor, false,
                                                         double, ColMajor, false, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct general_matrix_matrix_product<aloocv_kernels::I, double, ColMajor, false,
                                                         double, RowMajor, false, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct general_matrix_matrix_product<aloocv_kernels::I, double, RowMajor, false,
                                                         double, RowMajor, false, ColMajor, 1>;
// GEMV: column- and row-major matrices, contiguous vectors (and a strided right-hand side of
// a row-major matrix)
ALOOCV_EIGEN_KERNEL struct general_matrix_vector_product<
    aloocv_kernels::I, double, aloocv_kernels::In<ColMajor>, ColMajor, false, double,
    aloocv_kernels::In<RowMajor>, false, 0>;
ALOOCV_EIGEN_KERNEL struct general_matrix_vector_product<
    aloocv_kernels::I, double, aloocv_kernels::In<ColMajor>, ColMajor, false, double,
    aloocv_kernels::In<ColMajor>, false, 0>;
ALOOCV_EIGEN_KERNEL struct general_matrix_vector_product<
    aloocv_kernels::I, double, aloocv_kernels::In<RowMajor>, RowMajor, false, double,
    aloocv_kernels::In<ColMajor>, false, 0>;
ALOOCV_EIGEN_KERNEL struct general_matrix_vector_product<
    aloocv_kernels::I, double, aloocv_kernels::In<RowMajor>, RowMajor, false, double,
    aloocv_kernels::In<RowMajor>, false, 1>;
// rank-k updates of a lower triangle (selfadjointView<Lower>().rankUpdate)
ALOOCV_EIGEN_KERNEL struct general_matrix_matrix_triangular_product<
    aloocv_kernels::I, double, ColMajor, false, double, RowMajor, false, ColMajor, 1, Lower>;
// triangular solves with a matrix right-hand side (Cholesky factors, both sides)
ALOOCV_EIGEN_KERNEL struct triangular_solve_matrix<double, aloocv_kernels::I, OnTheRight, Upper,
                                                   false, RowMajor, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct triangular_solve_matrix<double, aloocv_kernels::I, OnTheLeft, Lower,
                                                   false, ColMajor, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct triangular_solve_matrix<double, aloocv_kernels::I, OnTheLeft, Upper,
                                                   false, RowMajor, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct triangular_solve_matrix<double, aloocv_kernels::I, OnTheLeft, UnitLower,
                                                   false, ColMajor, ColMajor, 1>;
// triangular matrix products
ALOOCV_EIGEN_KERNEL struct product_triangular_matrix_matrix<
    double, aloocv_kernels::I, Upper, true, RowMajor, false, ColMajor, false, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct product_triangular_matrix_matrix<
    double, aloocv_kernels::I, UnitLower, true, ColMajor, false, ColMajor, false, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct product_triangular_matrix_matrix<
    double, aloocv_kernels::I, UnitUpper, true, RowMajor, false, ColMajor, false, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct product_triangular_matrix_matrix<
    double, aloocv_kernels::I, Lower, true, ColMajor, false, RowMajor, false, ColMajor, 1>;
ALOOCV_EIGEN_KERNEL struct product_triangular_matrix_matrix<
    double, aloocv_kernels::I, Lower, true, ColMajor, false, ColMajor, false, ColMajor, 1>;
// the blocking sizes of those products (one function template, not a class: in 10 objects)
ALOOCV_EIGEN_KERNEL void
evaluateProductBlockingSizesHeuristic<double, double, 1, aloocv_kernels::I>(aloocv_kernels::I&,
                                                                            aloocv_kernels::I&,
                                                                            aloocv_kernels::I&,
                                                                            aloocv_kernels::I);
ALOOCV_EIGEN_KERNEL void
evaluateProductBlockingSizesHeuristic<double, double, 4, aloocv_kernels::I>(aloocv_kernels::I&,
                                                                            aloocv_kernels::I&,
                                                                            aloocv_kernels::I&,
                                                                            aloocv_kernels::I);
// Eigen::LLT<Mat>'s factorization (blocked, and unblocked on the diagonal blocks)
ALOOCV_EIGEN_KERNEL aloocv_kernels::I llt_inplace<double, Lower>::blocked<
    Matrix<double, Dynamic, Dynamic>>(Matrix<double, Dynamic, Dynamic>&);
ALOOCV_EIGEN_KERNEL aloocv_kernels::I llt_inplace<double, Lower>::unblocked<
    Matrix<double, Dynamic, Dynamic>>(Matrix<double, Dynamic, Dynamic>&);
ALOOCV_EIGEN_KERNEL aloocv_kernels::I llt_inplace<double, Lower>::unblocked<
    Block<Matrix<double, Dynamic, Dynamic>, Dynamic, Dynamic, false>>(
    Block<Matrix<double, Dynamic, Dynamic>, Dynamic, Dynamic, false>&);
}  // namespace Eigen::internal

#undef ALOOCV_EIGEN_KERNEL
#endif
