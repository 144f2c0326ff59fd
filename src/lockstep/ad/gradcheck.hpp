// The gradient checker: an op's backward against the vector-Jacobian product
// computed by central finite differences in double precision.
//
// For an op F with inputs x, a random cotangent dy for its outputs, and the
// scalar L(x) = <dy, F(x)> (summed over the primary outputs), the VJP is
// ∇L(x) = J_F(x)ᵀ dy — exactly what the backward must return. For every entry
// i of every differentiated input:
//   fd_i = (L(x + h_i e_i) - L(x - h_i e_i)) / (x_i⁺ - x_i⁻),  h_i = 1e-5·max(1, |x_i|)
// (the denominator is the difference of the two perturbed values as actually
// stored, so the rounding of x ± h does not count as error), and the field
// passes when
//   max_i |fd_i - g_i| <= rtol · max(scale, noise / rtol),
//   scale = max_i max(|g_i|, |fd_i|),  noise = 64·2^-53·Σ|dy·y| / h   (rtol = 1e-6).
// docs/VERIFIED_AD.md derives these numbers. Quantized ops are differentiated
// through their straight-through surrogate (ops/quant.hpp).
//
// The backward is a parameter, so the mutants (ad/mutants.cpp) can hand the
// checker wrong backwards and watch it reject them. The checker also enforces
// the backward's contract: a gradient for every differentiated input, with its
// shape; none for frozen or integer inputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/op_concepts.hpp"
#include "lockstep/ad/rng.hpp"

namespace lockstep::ad {

struct GradCheckOptions {
  double step = 1e-5;            // relative finite-difference step
  double rtol = 1e-6;            // allowed error relative to the field's gradient scale
  double noise_roundings = 64;   // forward rounding budget, in units of 2^-53·Σ|dy·y|
};

template <class Op>
using Backward = std::function<InputsOf<Op, double>(const ConfigOf<Op>&, const InputsOf<Op, double>&,
                                                    const OutputsOf<Op, double>&,
                                                    const OutputsOf<Op, double>&)>;

template <class Op>
Backward<Op> true_backward() {
  return [](const ConfigOf<Op>& c, const InputsOf<Op, double>& in,
            const OutputsOf<Op, double>& out, const OutputsOf<Op, double>& dout) {
    return Op::template backward<double>(c, in, out, dout);
  };
}

// The fields of an Inputs/Outputs struct as a list (const-ness follows S).
template <class T, class S>
auto fields_of(S& s) {
  using TP = std::conditional_t<std::is_const_v<S>, const Tensor<T>*, Tensor<T>*>;
  using IP = std::conditional_t<std::is_const_v<S>, const Tensor<ops::Index>*, Tensor<ops::Index>*>;
  struct View {
    std::string_view name;
    ops::Arg arg;
    TP values;   // float fields
    IP indices;  // index fields
  };
  std::vector<View> v;
  ops::for_each_field(s, [&](std::string_view n, auto& t, ops::Arg a) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, Tensor<T>>)
      v.push_back(View{n, a, &t, nullptr});
    else
      v.push_back(View{n, a, nullptr, &t});
  });
  return v;
}

// The function the checker differentiates: the op, or for a quantized op its
// straight-through surrogate with the detached corrections taken at `base`.
template <class Op>
OutputsOf<Op, double> evaluate(const ConfigOf<Op>& c, const InputsOf<Op, double>& base,
                               const InputsOf<Op, double>& x) {
  if constexpr (HasSurrogate<Op>)
    return Op::template surrogate<double>(c, base, x);
  else
    return Op::template forward<double>(c, x);
}

// <dy, y> over the primary outputs, Neumaier-compensated; *abs_sum = Σ|dy·y|.
template <class Op>
double pairing(const OutputsOf<Op, double>& dout, const OutputsOf<Op, double>& y,
               double* abs_sum = nullptr) {
  const auto dv = fields_of<double>(dout);
  const auto yv = fields_of<double>(y);
  double s = 0.0, comp = 0.0, a = 0.0;
  for (std::size_t f = 0; f < dv.size(); ++f) {
    if (dv[f].arg != ops::Arg::output) continue;
    for (std::size_t i = 0; i < yv[f].values->numel(); ++i) {
      const double term = (*dv[f].values)[i] * (*yv[f].values)[i];
      const double t = s + term;
      comp += std::fabs(s) >= std::fabs(term) ? (s - t) + term : (term - t) + s;
      s = t;
      a += std::fabs(term);
    }
  }
  if (abs_sum) *abs_sum = a;
  return s + comp;
}

// Random standard-normal cotangents for the primary outputs of `out`.
template <class Op>
OutputsOf<Op, double> random_cotangent(const OutputsOf<Op, double>& out, Rng& rng) {
  OutputsOf<Op, double> d;
  const auto ov = fields_of<double>(out);
  auto dv = fields_of<double>(d);
  for (std::size_t f = 0; f < ov.size(); ++f)
    if (ov[f].arg == ops::Arg::output) *dv[f].values = rng.normal(ov[f].values->shape);
  return d;
}

// The cotangent an op is checked with: the op's own (Op::cotangent: the int8
// unit backward's cotangents on the int8 grid, ops/units.hpp) or standard normal.
template <class Op>
OutputsOf<Op, double> cotangent_for(const ConfigOf<Op>& c, const OutputsOf<Op, double>& out, Rng& rng) {
  if constexpr (requires { Op::cotangent(c, out, rng); })
    return Op::cotangent(c, out, rng);
  else
    return random_cotangent<Op>(out, rng);
}

// Whether a quantized op's surrogate at its own point is its forward (the
// forward's quantizers); an op whose backward uses other quantizers says
// otherwise per config (Op::surrogate_is_forward).
template <class Op>
bool surrogate_is_forward(const ConfigOf<Op>& c) {
  if constexpr (requires { Op::surrogate_is_forward(c); })
    return Op::surrogate_is_forward(c);
  else
    return true;
}

struct FieldReport {
  std::string field;
  std::size_t entries = 0;
  double max_abs = 0.0;  // max |fd - g|
  double max_rel = 0.0;  // max_abs / max(scale, noise/rtol)
  double scale = 0.0;
  bool pass = true;
  std::string note;
};

struct VjpReport {
  std::vector<FieldReport> fields;
  std::vector<std::string> contract;  // violations of the backward's contract
  bool pass() const {
    return contract.empty() &&
           std::all_of(fields.begin(), fields.end(), [](const FieldReport& f) { return f.pass; });
  }
  double max_rel() const {
    double m = 0.0;
    for (const FieldReport& f : fields) m = std::isnan(f.max_rel) || f.max_rel > m ? f.max_rel : m;
    return m;
  }
  std::size_t entries() const {
    std::size_t n = 0;
    for (const FieldReport& f : fields) n += f.entries;
    return n;
  }
};

template <class Op>
VjpReport check_vjp(const ConfigOf<Op>& c, const InputsOf<Op, double>& x0,
                    const OutputsOf<Op, double>& dout, const Backward<Op>& backward,
                    const GradCheckOptions& o = {}) {
  VjpReport rep;
  const auto out0 = Op::template forward<double>(c, x0);
  const auto g = backward(c, x0, out0, dout);
  const auto xv = fields_of<double>(x0);
  const auto gv = fields_of<double>(g);

  // The contract: which fields carry a gradient, and of which shape.
  std::vector<bool> checkable(xv.size(), false);
  for (std::size_t f = 0; f < xv.size(); ++f) {
    const std::string name(xv[f].name);
    if (xv[f].indices) {
      if (!gv[f].indices->empty())
        rep.contract.push_back("gradient written into integer input '" + name + "'");
    } else if (xv[f].arg == ops::Arg::frozen) {
      if (!gv[f].values->empty())
        rep.contract.push_back("gradient written into frozen input '" + name + "'");
    } else if (xv[f].values->empty()) {
      if (!gv[f].values->empty())
        rep.contract.push_back("gradient written for absent input '" + name + "'");
    } else if (gv[f].values->shape != xv[f].values->shape) {
      rep.contract.push_back("gradient of '" + name + "' has shape " +
                             shape_str(gv[f].values->shape) + ", input has " +
                             shape_str(xv[f].values->shape));
    } else {
      checkable[f] = true;
    }
  }

  // Central differences, entry by entry.
  double abs_sum = 0.0;
  pairing<Op>(dout, evaluate<Op>(c, x0, x0), &abs_sum);
  InputsOf<Op, double> x = x0;
  auto xm = fields_of<double>(x);
  for (std::size_t f = 0; f < xv.size(); ++f) {
    if (!checkable[f]) continue;
    Tensor<double>& t = *xm[f].values;
    const Tensor<double>& gt = *gv[f].values;
    FieldReport fr;
    fr.field = std::string(xv[f].name);
    fr.entries = t.numel();
    std::vector<double> fd(t.numel());
    double hmin = std::numeric_limits<double>::infinity();
    for (std::size_t e = 0; e < t.numel(); ++e) {
      const double xi = t[e];
      const double h = o.step * std::max(1.0, std::fabs(xi));
      t[e] = xi + h;
      const double xp = t[e];
      const double lp = pairing<Op>(dout, evaluate<Op>(c, x0, x));
      t[e] = xi - h;
      const double xn = t[e];
      const double ln = pairing<Op>(dout, evaluate<Op>(c, x0, x));
      t[e] = xi;
      fd[e] = (lp - ln) / (xp - xn);
      hmin = std::min(hmin, (xp - xn) / 2);
    }
    for (std::size_t e = 0; e < t.numel(); ++e)
      fr.scale = std::max({fr.scale, std::fabs(fd[e]), std::fabs(gt[e])});
    const double noise = o.noise_roundings * 0x1p-53 * abs_sum / hmin;
    const double denom = std::max(fr.scale, noise / o.rtol);
    std::size_t worst = 0;
    bool nan = false;
    for (std::size_t e = 0; e < t.numel(); ++e) {
      const double err = std::fabs(fd[e] - gt[e]);
      if (std::isnan(err)) nan = true;
      if (err > fr.max_abs) fr.max_abs = err, worst = e;
    }
    fr.max_rel = nan ? std::numeric_limits<double>::quiet_NaN()
                     : (denom > 0.0 ? fr.max_abs / denom : 0.0);
    fr.pass = !nan && fr.max_rel <= o.rtol;
    if (!fr.pass)
      fr.note = nan ? "NaN in gradient or finite difference"
                    : fmt::format("d{}[{}]: finite difference {:.9g}, backward {:.9g}", fr.field,
                                  worst, fd[worst], gt[worst]);
    rep.fields.push_back(std::move(fr));
  }
  return rep;
}

// Records a VJP report as check rows ("vjp = fd: dx", ...).
inline void record(Checks& k, const VjpReport& r, double rtol) {
  for (const FieldReport& f : r.fields)
    k.add("vjp = finite differences: d" + f.field, f.entries, f.max_abs, f.max_rel, rtol, f.pass,
          f.note);
  std::string why;
  for (const std::string& s : r.contract) {
    if (!why.empty()) why.append("; ");
    why.append(s);
  }
  k.expect("backward contract (shapes, frozen inputs)", 1, r.contract.empty() ? 0 : 1, why);
}

// The canonical float code against the same code in double on the same
// (float-representable) inputs: forward outputs and backward gradients.
template <class Op>
void check_float(const ConfigOf<Op>& c, const InputsOf<Op, double>& x0,
                 const OutputsOf<Op, double>& dout, double rtol, Checks& k) {
  const auto xf = ops::cast_fields<Op::template Inputs, float>(x0);
  const auto xd = ops::cast_fields<Op::template Inputs, double>(xf);
  const auto df = ops::cast_fields<Op::template Outputs, float>(dout);
  const auto dd = ops::cast_fields<Op::template Outputs, double>(df);
  const auto of = Op::template forward<float>(c, xf);
  const auto od = Op::template forward<double>(c, xd);
  const auto ofv = fields_of<float>(of);
  const auto odv = fields_of<double>(od);
  for (std::size_t f = 0; f < ofv.size(); ++f)
    if (ofv[f].arg == ops::Arg::output)
      k.close("float = double: " + std::string(ofv[f].name), *ofv[f].values, *odv[f].values, rtol);
  // A gradient can be much smaller than the cotangent it comes from, through
  // cancellation that is part of the expression (softmax near one-hot:
  // dx = y∘(dy - <dy, y>)), where the float error is ~2^-24·|dy|: gradients
  // are compared relative to the larger of their own scale and the cotangents'.
  double dscale = 0.0;
  for (const auto& f : fields_of<double>(dd))
    if (f.arg == ops::Arg::output)
      for (double v : f.values->data) dscale = std::max(dscale, std::fabs(v));
  const auto gf = Op::template backward<float>(c, xf, of, df);
  const auto gd = Op::template backward<double>(c, xd, od, dd);
  const auto gfv = fields_of<float>(gf);
  const auto gdv = fields_of<double>(gd);
  for (std::size_t f = 0; f < gfv.size(); ++f)
    if (gfv[f].arg == ops::Arg::diff && gfv[f].values && !gdv[f].values->empty())
      k.close("float = double: d" + std::string(gfv[f].name), *gfv[f].values, *gdv[f].values,
              rtol, dscale);
}

struct RunOptions {
  std::uint64_t seed = 1;
  double effort = 1.0;  // trials per case = max(1, round(effort))
  GradCheckOptions grad;
  double float_rtol = 1e-4;  // see docs/VERIFIED_AD.md, "float against double"
};

inline int trials_of(double effort) {
  return std::max(1, static_cast<int>(std::lround(effort)));
}

// Every check of one op: for each declared case and trial, fresh random inputs
// and cotangents (seed derived from the run's seed, the op and the case), the
// VJP check, float-vs-double agreement (not for quantized ops: a last-bit
// difference before rounding can move a code), the surrogate's agreement with
// the op, and the op's own algebraic checks.
template <class Op>
std::vector<CheckResult> run_checks(const RunOptions& o) {
  Checks k{std::string(Op::name)};
  const auto cases = Op::cases();
  const int trials = trials_of(o.effort);
  for (std::size_t ci = 0; ci < cases.size(); ++ci)
    for (int trial = 0; trial < trials; ++trial) {
      Rng rng(derive_seed(o.seed, Op::name, ci * 1000 + static_cast<std::size_t>(trial)));
      const auto& c = cases[ci];
      const auto x0 = Op::sample(c, rng);
      const auto dout = cotangent_for<Op>(c, Op::template forward<double>(c, x0), rng);
      record(k, check_vjp<Op>(c, x0, dout, true_backward<Op>(), o.grad), o.grad.rtol);
      if constexpr (HasSurrogate<Op>) {
        const auto of = Op::template forward<double>(c, x0);
        const auto os = Op::template surrogate<double>(c, x0, x0);
        const auto yf = fields_of<double>(of);
        const auto ys = fields_of<double>(os);
        for (std::size_t f = 0; f < yf.size() && surrogate_is_forward<Op>(c); ++f)
          if (yf[f].arg == ops::Arg::output)
            k.close("surrogate = forward at the point (double)", *ys[f].values, *yf[f].values,
                    1e-12);
      } else {
        check_float<Op>(c, x0, dout, o.float_rtol, k);
      }
      if constexpr (HasAlgebra<Op>) Op::algebra(c, rng, k);
    }
  return k.results();
}

}  // namespace lockstep::ad
