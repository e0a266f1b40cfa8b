// Bindings of the fit and of the one-pass kernels (used by benchmarks and tests).
#include <pybind11/stl.h>

#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {

// A loss and its per-sample responses and linear predictors (1-d float64, equal lengths).
struct LossInputs {
  Index n;
  const double* y;
  const double* eta;
  LossKind kind;
  LossParams lp;
};

LossInputs loss_inputs(const py::object& loss, const py::array& y, const py::array& eta) {
  const Index n = y.ndim() == 1 ? y.shape(0) : -1;
  const double* yp = vector_ptr(y, n, "y");
  const double* ep = vector_ptr(eta, n, "eta");
  Problem pb;
  const LossKind kind = apply_loss(loss, pb);
  return {n, yp, ep, kind, pb.lp};
}

}  // namespace

void bind_fit(py::module_& m) {
  m.def("loss_names", &loss_names, "Names of the registered losses.");

  m.def(
      "fit",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, const py::array& pen, bool intercept, double tol, Index max_iter,
         int n_threads, const std::optional<py::array>& beta0, const std::optional<py::array>& l1,
         const std::optional<py::array>& offset) {
        Problem pb = make_problem(X, y, w, pen, intercept, l1);
        const LossKind kind = apply_loss(loss, pb);
        apply_offset(offset, pb);
        FitOptions opt{tol, max_iter, n_threads};
        std::optional<Vec> b0;
        if (beta0) b0 = to_vec(*beta0, pb.p1(), "beta0");
        FitState st;
        run_released([&] { st = fit_coefficients(pb, kind, opt, b0 ? &*b0 : nullptr); });
        return fit_out(st, intercept);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::arg("penalty"),
      py::kw_only(), py::arg("fit_intercept"), py::arg("tol"), py::arg("max_iter"),
      py::arg("n_threads"), py::arg("beta0") = py::none(), py::arg("l1") = py::none(),
      py::arg("offset") = py::none(),
      "Damped Newton fit of an L2-penalized GLM; proximal Newton with an L1 term.");

  m.def(
      "hessian",
      [](const py::object& X, const py::array& d, bool intercept, int n_threads) {
        const Design v = make_design(X);
        const double* dp = vector_ptr(d, v.n, "d");
        const Index p1 = v.p + (intercept ? 1 : 0);
        py::array_t<double, py::array::f_style> H({p1, p1});
        double* out = H.mutable_data();
        run_released([&] { hessian(v, dp, intercept, out, n_threads); });
        return H;
      },
      py::arg("X"), py::arg("d"), py::kw_only(), py::arg("fit_intercept"), py::arg("n_threads"),
      "X~^T diag(d) X~ accumulated in parallel row blocks (d of any sign).");

  m.def(
      "first_nonfinite_row",
      [](const py::object& X, int n_threads) {
        const Design v = make_design(X);
        Index row = -1;
        run_released([&] { row = first_nonfinite_row(v, n_threads); });
        return row;
      },
      py::arg("X"), py::kw_only(), py::arg("n_threads"),
      "The first row of a dense X with a NaN or infinity, -1 when all are finite (parallel "
      "row blocks).");

  m.def(
      "loss_eval",
      [](const py::object& loss, const py::array& y, const py::array& eta, bool fused) {
        const LossInputs in = loss_inputs(loss, y, eta);
        const Index n = in.n;
        const double *yp = in.y, *ep = in.eta;
        const LossParams lp = in.lp;
        Vec v(n), g(n), h(n), h3(n), h4(n), mu(n);
        dispatch_loss(in.kind, [&](auto L) {
          using Loss = decltype(L);
          for (Index i = 0; i < n; ++i) {
            if (fused) {
              const LossEval e = aloocv::detail::loss_eval<Loss>(yp[i], ep[i], lp, true);
              v[i] = e.value;
              g[i] = e.d1;
              h[i] = e.d2;
            } else {
              v[i] = Loss::value(yp[i], ep[i], lp);
              g[i] = Loss::d1(yp[i], ep[i], lp);
              h[i] = Loss::d2(yp[i], ep[i], lp);
            }
            h3[i] = Loss::d3(yp[i], ep[i], lp);
            h4[i] = Loss::d4(yp[i], ep[i], lp);
            mu[i] = Loss::mean(ep[i], lp);
          }
        });
        return py::make_tuple(to_numpy(v), to_numpy(g), to_numpy(h), to_numpy(h3), to_numpy(h4),
                              to_numpy(mu));
      },
      py::arg("loss"), py::arg("y"), py::arg("eta"), py::kw_only(), py::arg("fused") = false,
      "Per-sample loss value, its derivatives 1..4 in eta and the mean (inverse link). With "
      "fused, the value and derivatives 1, 2 come from the one evaluation that Newton steps "
      "use (Loss::eval where the loss has one).");

  m.def(
      "loss_derivatives",
      [](const py::object& loss, const py::array& y, const py::array& eta,
         const std::vector<int>& orders) {
        const LossInputs in = loss_inputs(loss, y, eta);
        for (const int k : orders) {
          if (k < 0 || k > 4) {
            throw py::value_error("loss_derivatives: an order is 0 (the value) to 4, got " +
                                  std::to_string(k));
          }
        }
        const Index n = in.n;
        std::vector<py::array_t<double>> outs;
        std::vector<double*> into;
        for (size_t a = 0; a < orders.size(); ++a) {
          outs.emplace_back(static_cast<py::ssize_t>(n));
          into.push_back(outs.back().mutable_data());
        }
        run_released([&] {
          dispatch_loss(in.kind, [&](auto L) {
            using Loss = decltype(L);
            const double *yp = in.y, *ep = in.eta;
            const LossParams lp = in.lp;
            using F = double (*)(double, double, const LossParams&);
            const F by_order[5] = {&Loss::value, &Loss::d1, &Loss::d2, &Loss::d3, &Loss::d4};
            for (size_t a = 0; a < orders.size(); ++a) {
              const F f = by_order[orders[a]];
              double* o = into[a];
              for (Index i = 0; i < n; ++i) o[i] = f(yp[i], ep[i], lp);
            }
          });
        });
        py::tuple t(orders.size());
        for (size_t a = 0; a < orders.size(); ++a) t[a] = outs[a];
        return t;
      },
      py::arg("loss"), py::arg("y"), py::arg("eta"), py::kw_only(), py::arg("orders"),
      "The per-sample loss (order 0) and its derivatives in eta of the given orders (1..4), "
      "one array each in that order: loss_eval's outputs without the others.");

  m.def(
      "loss_value",
      [](const py::object& loss, const py::array& y, const py::array& eta) {
        const LossInputs in = loss_inputs(loss, y, eta);
        const Index n = in.n;
        const double *yp = in.y, *ep = in.eta;
        const LossParams lp = in.lp;
        py::array_t<double> out(static_cast<py::ssize_t>(n));
        double* v = out.mutable_data();
        dispatch_loss(in.kind, [&](auto L) {
          using Loss = decltype(L);
          for (Index i = 0; i < n; ++i) v[i] = Loss::value(yp[i], ep[i], lp);
        });
        return out;
      },
      py::arg("loss"), py::arg("y"), py::arg("eta"),
      "Per-sample loss value (loss_eval's first output, without the derivatives).");

  m.def(
      "loss_valid",
      [](const py::object& loss, const py::array& y, Index index0) {
        const Index n = y.ndim() == 1 ? y.shape(0) : -1;
        const double* yp = vector_ptr(y, n, "y");
        Problem pb;
        const LossKind kind = apply_loss(loss, pb);
        dispatch_loss(kind, [&](auto L) { check_response<decltype(L)>(yp, n, pb.lp, index0); });
      },
      py::arg("loss"), py::arg("y"), py::arg("index0") = 0,
      "Raises ValueError naming the first y outside the domain (index0: the index of y[0] in "
      "the whole response).");
}

}  // namespace aloocv::bind
