// The multinomial problem and fit result of a binding call (bind_multinomial.cpp,
// bind_matrix_free.cpp).
#pragma once

#include "aloocv/multinomial.hpp"
#include "arrays.hpp"
#include "results.hpp"

namespace aloocv::bind {

inline MnProblem make_mn_problem(const py::object& X, const py::array& y,
                                 const std::optional<py::array>& w, Index K, const py::array& pen,
                                 bool intercept) {
  if (K < 2) throw py::value_error("the multinomial loss needs at least 2 classes");
  const Problem base = make_problem(X, y, w, pen, intercept);
  MnProblem pb;
  pb.X = base.X;
  pb.y = base.y;
  pb.w = base.w;
  pb.K = K;
  pb.intercept = intercept;
  pb.pen = base.pen;
  pb.check();
  return pb;
}

inline void fill_mn_fit(MnFitOut& out, const MnProblem& pb, const MnState& st) {
  const Index K = pb.K, p1 = pb.p1(), p = pb.X.p, off = pb.intercept ? 1 : 0;
  py::array_t<double> coef({K, p});
  py::array_t<double> icpt(K);
  for (Index a = 0; a < K; ++a) {
    icpt.mutable_data()[a] = off ? st.beta[a * p1] : 0.0;
    for (Index j = 0; j < p; ++j) coef.mutable_data()[a * p + j] = st.beta[a * p1 + off + j];
  }
  out.coef = coef;
  out.intercept = icpt;
  out.n_iter = st.n_iter;
  out.converged = st.converged;
  out.objective = st.objective;
  out.grad_norm = st.grad_norm;
  out.hessian_passes = st.hessian_passes;
  out.hessian_products = st.hessian_products;
}

}  // namespace aloocv::bind
