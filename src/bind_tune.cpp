// A fitted problem kept alive across calls, for tuning loops: warm-started refits,
// single Newton steps, ALO with its hypergradient, stochastic per-sample gradients.
// Orchestration only; the math lives in cpp/.
#include <pybind11/stl.h>

#include "aloocv/hypergrad.hpp"
#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {

class TuneState {
 public:
  TuneState(py::object X, py::array y, std::optional<py::array> w, const py::object& loss,
            const py::array& pen, bool intercept, double tol, Index max_iter, int n_threads,
            const std::optional<py::array>& l1, const std::optional<py::array>& beta0,
            std::optional<py::array> offset)
      : X_(std::move(X)), y_(std::move(y)), w_(std::move(w)), offset_(std::move(offset)) {
    pb_ = make_problem(X_, y_, w_, pen, intercept, l1);
    kind_ = apply_loss(loss, pb_);
    apply_offset(offset_, pb_);
    opt_ = FitOptions{tol, max_iter, n_threads};
    opt_.fresh_end = true;  // ALO and its derivatives need the Hessian at beta
    opt_.secant = true;     // secant-corrected chord steps along the path
    // the fused end's guard is settled by alo() in its leverage pass (loo), by the
    // gradient routes (fresh_factor), step(), sample_gradient(), state() and
    // set_penalty() in a pass of their own; fit() returns the fit before it settles
    opt_.defer_end_guard = true;
    dispatch_loss(kind_, [&](auto L) { check_response<decltype(L)>(pb_.y, pb_.n(), pb_.lp); });
    if (beta0) {
      st_.beta = to_vec(*beta0, pb_.p1(), "beta0");
    } else {
      st_.beta.resize(0);
    }
  }

  void set_penalty(const py::array& pen, const std::optional<py::array>& l1) {
    Problem fresh = make_problem(X_, y_, w_, pen, pb_.intercept, l1);
    settle();  // a pending guard belongs to the current penalty
    pb_.pen = fresh.pen;
    pb_.l1 = fresh.l1;  // pb_ keeps its loss parameters and offset
  }

  // Keeps a copy of the fitted state (its fit, the factor of the Hessian at beta, its
  // penalty): one slot, O(n + p^2) numbers, e.g. the best point of a search so far.
  void keep() {
    require_fit();
    settle();  // the copy's factor is the Hessian at its beta
    kept_ = Kept{st_, pb_.pen, pb_.l1};
  }

  // Back to the kept state (its penalty included): its factor serves the next alo() there
  // without a refit, or the next fit()'s chord steps after set_penalty. False: none kept.
  bool restore() {
    if (!kept_) return false;
    st_ = kept_->st;
    pb_.pen = kept_->pen;
    pb_.l1 = kept_->l1;
    fitted_ = true;
    return true;
  }

  // Restart the next fit from these coefficients (p + intercept), e.g. those of a point
  // nearer the next penalty than the current state's.
  void set_beta(const py::array& beta) {
    st_.beta = to_vec(beta, pb_.p1(), "beta");
    fitted_ = false;
  }

  FitOut fit() {
    run_released([&] {
      const bool warm = st_.beta.size() == pb_.p1();
      const Vec b0 = st_.beta;
      st_ = fitted_ ? fit_from(pb_, kind_, opt_, st_)
                    : aloocv::fit(pb_, kind_, opt_, warm ? &b0 : nullptr);
    });
    fitted_ = true;
    return fit_out(st_, pb_.intercept);
  }

  double step(bool refresh) {
    require_fit();
    double t = 0.0;
    run_released([&] { t = aloocv::step(pb_, kind_, st_, refresh, opt_.n_threads); });
    return t;
  }

  // With along_l2 and along_l1 (per-feature, both or neither): the exact gradient's
  // derivative along that direction only (LooOut::grad_along; one pass fewer).
  LooOut alo(bool gradient, const std::string& gradient_kind,
             const std::optional<py::array>& along_l2, const std::optional<py::array>& along_l1) {
    require_fit();
    const GradientKind gkind = gradient_kind_from_name(gradient_kind);
    if (along_l2.has_value() != along_l1.has_value()) {
      throw py::value_error("along_l2 and along_l1 go together");
    }
    std::optional<HyperDirection> dir;
    if (along_l2) {
      if (!gradient) throw py::value_error("a direction needs gradient=True");
      dir = HyperDirection{to_vec(*along_l2, pb_.X.p, "along_l2"),
                           to_vec(*along_l1, pb_.X.p, "along_l1")};
    }
    LooResult res;
    HyperGradient hg;
    run_released([&] {
      res = gradient
                ? loo_gradient(pb_, kind_, st_, opt_.n_threads, hg, gkind, dir ? &*dir : nullptr)
                : loo(pb_, kind_, LooMethod::ALO, st_, opt_);
    });
    LooOut out;
    fill_alo(out, res);
    if (hg.along) {
      out.grad_along = py::float_(*hg.along);
    } else if (gradient) {
      out.grad_l1 = to_numpy(hg.l1);
      out.grad_l2 = to_numpy(hg.l2);
    }
    return out;
  }

  // ALO, its exact gradient and the gradient's derivatives along the columns of the
  // per-feature direction matrices d_l2, d_l1 (p x m).
  AloTangentsOut alo_tangents(const py::array& d_l2, const py::array& d_l1) {
    require_fit();
    const Mat D2 = to_mat(d_l2, pb_.X.p, "d_l2"), D1 = to_mat(d_l1, pb_.X.p, "d_l1");
    LooResult res;
    HyperGradient hg;
    HyperTangents tg;
    run_released(
        [&] { res = loo_gradient_tangents(pb_, kind_, st_, opt_.n_threads, hg, D2, D1, tg); });
    AloTangentsOut out;
    fill_alo(out, res);
    out.grad_l1 = to_numpy(hg.l1);
    out.grad_l2 = to_numpy(hg.l2);
    out.tangent_l1 = mat_to_numpy(tg.l1);
    out.tangent_l2 = mat_to_numpy(tg.l2);
    return out;
  }

  py::tuple sample_gradient(
      const py::array_t<Index, py::array::c_style | py::array::forcecast>& idx) {
    require_fit();
    double acv = 0.0;
    HyperGradient hg;
    settle();
    run_released([&] { hg = loo_sample_gradient(pb_, kind_, st_, idx.data(), idx.size(), acv); });
    return py::make_tuple(acv, to_numpy(hg.l1), to_numpy(hg.l2));
  }

  // The fit and the per-sample ALO values (res is spent).
  void fill_alo(LooOut& out, LooResult& res) const {
    fill_fit(out, st_, pb_.intercept);
    out.losses = move_to_numpy(std::move(res.losses));
    out.predictions = move_to_numpy(std::move(res.predictions));
    out.leverages = move_to_numpy(std::move(res.leverages));
    out.downdate = move_to_numpy(std::move(res.den));
    if (!st_.chol.empty()) out.rcond = py::float_(st_.chol.rcond());
    out.n_not_converged = res.n_not_converged;
  }

  // The fit, its fused end's guard settled (fit() returns it before; alo() settles it
  // in its leverage pass).
  FitOut state() {
    if (!fitted_) throw py::value_error("no fit yet");
    settle();
    return fit_out(st_, pb_.intercept);
  }

 private:
  void require_fit() const {
    if (!fitted_) throw py::value_error("call fit() first");
  }
  // Settles a guard fit() left pending (one O(n p) probe pass; none pending: nothing).
  void settle() {
    if (fitted_) run_released([&] { settle_end_guard(pb_, kind_, st_, opt_.n_threads); });
  }
  py::object X_;
  py::array y_;
  std::optional<py::array> w_;
  std::optional<py::array> offset_;
  Problem pb_;
  LossKind kind_{};
  FitOptions opt_;
  FitState st_;
  bool fitted_ = false;
  struct Kept {
    FitState st;
    Vec pen, l1;
  };
  std::optional<Kept> kept_;
};

}  // namespace

void bind_tune(py::module_& m) {
  py::class_<TuneState>(m, "TuneState",
                        "A problem kept alive for tuning: warm-started refits, Newton steps, "
                        "ALO with its hypergradient.")
      .def(py::init<py::object, py::array, std::optional<py::array>, const py::object&,
                    const py::array&, bool, double, Index, int, const std::optional<py::array>&,
                    const std::optional<py::array>&, std::optional<py::array>>(),
           py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"),
           py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("tol"),
           py::arg("max_iter"), py::arg("n_threads"), py::arg("l1") = py::none(),
           py::arg("beta0") = py::none(), py::arg("offset") = py::none())
      .def("set_penalty", &TuneState::set_penalty, py::arg("penalty"), py::arg("l1") = py::none())
      .def("keep", &TuneState::keep,
           "Keep a copy of the fitted state (one slot; its guard settled first).")
      .def("restore", &TuneState::restore,
           "Return to the kept state and its penalty (no refit); False when none is kept.")
      .def("set_beta", &TuneState::set_beta, py::arg("beta"),
           "Start the next fit from these coefficients (intercept first when fitted).")
      .def("fit", &TuneState::fit,
           "Fit to tol, warm-started from the current coefficients (reported before its fused "
           "end's guard settles; state() and alo() report it after).")
      .def("step", &TuneState::step, py::kw_only(), py::arg("refresh"),
           "One damped Newton step (stale factor unless refresh); returns the step length.")
      .def("alo", &TuneState::alo, py::kw_only(), py::arg("gradient") = true,
           py::arg("gradient_kind") = "exact", py::arg("along_l2") = py::none(),
           py::arg("along_l1") = py::none(),
           "ALO at the current state, with the hypergradient ('exact' or the paper's), or "
           "with along_l2 and along_l1 its exact derivative along that direction only.")
      .def("alo_tangents", &TuneState::alo_tangents, py::arg("d_l2"), py::arg("d_l1"),
           "ALO, its exact gradient and the gradient's directional derivatives.")
      .def("sample_gradient", &TuneState::sample_gradient, py::arg("indices"),
           "(batch mean ALO loss, d/dl1, d/dl2): an unbiased estimate of the exact gradient.")
      .def("state", &TuneState::state);
}

}  // namespace aloocv::bind
