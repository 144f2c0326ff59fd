// Start-up gates of the kernels a training step launches beside the ops'
// (gate.hpp): the optimizer (optim_launch.hpp: scale_all, grad_norms,
// step_control, adamw_all, one by one and in the step's sequence), the mean
// loss and the fill (core_launch.hpp, through cuda::OpKernels as the engine
// calls them) and the live audits' gather (gather_launch.hpp). Each case
// compares the device's bits with the CPU specification: the optimizer op
// (ops/optim.hpp, reference_step and its steps), the engine's host expression
// of the mean loss, std::fill, a host gather.
//
// The tensor tables are ragged: many tensors of odd sizes, sizes on and around
// the 4096-lane chunks of the sums of squares (4095, 4096, 4097, 8193, ...), an
// empty tensor, a table of more tensors than one 4096-chunk (the norm's sum
// over tensors then has two levels), decay on some tensors only; gradients
// with -0, +0, large values, and in some cases +-inf or NaN; the clip active,
// inactive (scale > 1) and off; accumulation scale 1 and 1/accum.
//
// Cells are compared by bit pattern, except that a NaN matches any NaN: the
// sign and payload of a NaN are not part of the numeric contract
// (docs/NUMERICS.md; ieee::same_value), and a NaN that meets arithmetic here
// (a NaN gradient times 1/accum, the square root of a NaN sum, a NaN loss
// divided by accum) comes out of the device as 0x7fffffff and out of the host
// with its payload kept. The reductions write the canonical NaN on both.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cuda/core_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gather_launch.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/optim_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/ops/optim.hpp"

namespace lockstep::cuda::gate {
namespace {

using Vec = std::vector<float>;
namespace launch = cuda::launch;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<Case> g_cases;
void add(std::string kernel, std::string shape, std::function<std::string(std::uint64_t)> run) {
  Case c;  // by member: Case may carry more fields (they keep their defaults)
  c.kernel = std::move(kernel);
  c.shape = std::move(shape);
  c.op = "train";  // gate::cases_of({"train"})
  c.run = std::move(run);
  g_cases.push_back(std::move(c));
}

// first_difference, with any NaN matching any NaN (see the top). The copies
// (fill, gather) and the canonical sums are compared by first_difference itself.
std::string difference(std::string_view tensor, const float* cpu, const float* gpu, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (num::bits_of(cpu[i]) == num::bits_of(gpu[i]) || (cpu[i] != cpu[i] && gpu[i] != gpu[i])) continue;
    return fmt::format("{}[{}]: cpu 0x{:08x} ({}) vs cuda 0x{:08x} ({})", tensor, i, num::bits_of(cpu[i]), cpu[i],
                       num::bits_of(gpu[i]), gpu[i]);
  }
  return "";
}
std::string difference(std::string_view tensor, const Vec& cpu, const Vec& gpu) {
  if (cpu.size() != gpu.size()) return fmt::format("{}: cpu has {} cells, cuda {}", tensor, cpu.size(), gpu.size());
  return difference(tensor, cpu.data(), gpu.data(), cpu.size());
}

// What goes wrong first, over several comparisons.
struct First {
  std::string what;
  void operator()(const std::string& d) {
    if (what.empty()) what = d;
  }
};

// --- Tensor tables --------------------------------------------------------------

// Which non-finite values a table's gradients carry.
enum class NonFinite { none, inf, nan };

struct HostTable {
  std::vector<Vec> value, grad, m, v;
  std::vector<bool> decay;
  std::size_t size() const { return value.size(); }
  std::vector<ops::OptimTensor> views() {
    std::vector<ops::OptimTensor> t;
    for (std::size_t k = 0; k < size(); ++k)
      t.push_back({value[k].data(), grad[k].data(), m[k].data(), v[k].data(), value[k].size(), decay[k]});
    return t;
  }
};

// Gradients like a model's: small normals, with -0, +0 and large values mixed in.
float gradient(ad::Rng& rng) {
  switch (rng.below(64)) {
    case 0: return -0.0f;
    case 1: return 0.0f;
    case 2: return static_cast<float>(rng.uniform(50.0, 400.0));
    case 3: return -static_cast<float>(rng.uniform(50.0, 400.0));
    default: return static_cast<float>(0.05 * rng.normal());
  }
}

HostTable make_table(ad::Rng& rng, const std::vector<std::size_t>& sizes, NonFinite bad) {
  HostTable h;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::size_t n = sizes[k];
    Vec value(n), grad(n), m(n), v(n);
    for (std::size_t i = 0; i < n; ++i) {
      value[i] = static_cast<float>(rng.normal());
      grad[i] = gradient(rng);
      m[i] = static_cast<float>(0.01 * rng.normal());
      v[i] = static_cast<float>(1e-4 * std::fabs(rng.normal()));  // a second moment is >= 0
      if (rng.below(97) == 0) m[i] = -0.0f, v[i] = 0.0f;
    }
    h.value.push_back(std::move(value));
    h.grad.push_back(std::move(grad));
    h.m.push_back(std::move(m));
    h.v.push_back(std::move(v));
    h.decay.push_back(k % 3 != 1);  // decay on two tensors in three (matrices; not norms or biases)
  }
  // One non-finite gradient, in the first non-empty tensor from the middle of the table on.
  if (bad != NonFinite::none)
    for (std::size_t k = h.size() / 2; k < h.size(); ++k)
      if (!h.grad[k].empty()) {
        h.grad[k][rng.below(h.grad[k].size())] = bad == NonFinite::inf ? -kInf : num::float_of(0x7FC00000u);
        break;
      }
  return h;
}

// The device copy of a table and its optimizer table (as the CUDA model
// builds it; here each array of all tensors is one allocation, so that a table
// of thousands of tensors costs four copies, not thousands).
struct DeviceTable {
  std::vector<std::size_t> offset;  // tensor k's first element in the flat arrays
  DeviceBuffer<float> value, grad, m, v;
  DeviceBuffer<launch::TensorSlot> table;
  DeviceBuffer<float> partials, norms, control;
  std::size_t count = 0, total_chunks = 0, max_n = 0;

  static Vec flat(const std::vector<Vec>& parts) {
    Vec all;
    for (const Vec& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  }

  explicit DeviceTable(const HostTable& h) {
    value.upload(flat(h.value));
    grad.upload(flat(h.grad));
    m.upload(flat(h.m));
    v.upload(flat(h.v));
    std::vector<launch::TensorSlot> rows;
    std::size_t at = 0;
    for (std::size_t k = 0; k < h.size(); ++k) {
      const std::size_t n = h.value[k].size();
      offset.push_back(at);
      rows.push_back({value.data() + at, grad.data() + at, m.data() + at, v.data() + at, n, total_chunks,
                      h.decay[k] ? 1 : 0});
      at += n;
      total_chunks += launch::chunks_of(n);
      max_n = std::max(max_n, n);
    }
    count = rows.size();
    table.upload(rows);
    partials.resize(std::max<std::size_t>(1, total_chunks));
    norms.resize(std::max<std::size_t>(1, count));
    control.resize(launch::kControlSize);
  }

  // Every tensor compared with the host table's, bit for bit.
  std::string compare(const HostTable& h) const {
    const Vec dv = value.download(), dg = grad.download(), dm = m.download(), dvv = v.download();
    First first;
    for (std::size_t k = 0; k < h.size() && first.what.empty(); ++k) {
      const std::size_t at = offset[k], n = h.value[k].size();
      first(difference(fmt::format("value of tensor {}", k), h.value[k].data(), dv.data() + at, n));
      first(difference(fmt::format("grad of tensor {}", k), h.grad[k].data(), dg.data() + at, n));
      first(difference(fmt::format("m of tensor {}", k), h.m[k].data(), dm.data() + at, n));
      first(difference(fmt::format("v of tensor {}", k), h.v[k].data(), dvv.data() + at, n));
    }
    return first.what;
  }
};

// The ragged tables.
struct TableShape {
  std::string name;
  std::vector<std::size_t> sizes;
};
const std::vector<TableShape>& table_shapes() {
  static const std::vector<TableShape> shapes = [] {
    std::vector<TableShape> s;
    s.push_back({"chunk edges", {1, 31, 4095, 4096, 4097, 0, 8192, 8193, 300, 12289, 7}});
    // GPT-2's table shape (embeddings, then per block ln, attention, ln, mlp;
    // then ln_f) at odd sizes: 4 blocks.
    std::vector<std::size_t> gpt;
    gpt.push_back(50257 * 3);  // wte
    gpt.push_back(1027 * 5);   // wpe
    for (int b = 0; b < 4; ++b)
      for (std::size_t n : {97, 97, 97 * 291, 291, 97 * 97, 97, 97, 97, 97 * 389, 389, 389 * 97, 97}) gpt.push_back(n);
    gpt.push_back(97);
    gpt.push_back(97);
    s.push_back({"gpt2-like, 51 tensors", gpt});
    // More tensors than one 4096-chunk: the sum over tensors has two levels,
    // and sum_partials and step_control run past their first chunk.
    std::vector<std::size_t> many(4100);
    for (std::size_t k = 0; k < many.size(); ++k) many[k] = 1 + (k * 7919) % 37;
    many[4099] = 4097;
    s.push_back({"4100 tensors", many});
    return s;
  }();
  return shapes;
}

// The AdamW scalars of update t at learning rate lr (the expressions of
// train::adamw_scalars, defaults beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1).
ops::AdamWScalars scalars(double lr, int t) {
  const double bc1 = 1.0 - std::pow(0.9, t), bc2 = 1.0 - std::pow(0.95, t);
  ops::AdamWScalars s{};
  s.beta1 = 0.9f;
  s.one_minus_beta1 = static_cast<float>(1.0 - 0.9);
  s.beta2 = 0.95f;
  s.one_minus_beta2 = static_cast<float>(1.0 - 0.95);
  s.step_size = static_cast<float>(lr / bc1);
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  s.eps = 1e-8f;
  s.decay = static_cast<float>(1.0 - lr * 0.1);
  return s;
}

Vec control_of(const ops::StepDecision& d) { return {d.loss, d.norm, d.clip, d.update ? 1.0f : 0.0f}; }

const char* non_finite_name(NonFinite p) {
  return p == NonFinite::none ? "" : p == NonFinite::inf ? ", an -inf gradient" : ", a NaN gradient";
}

// --- The optimizer's kernels one by one -----------------------------------------

void scale_all_cases() {
  for (std::size_t t = 0; t < table_shapes().size(); ++t)
    for (float s : {ops::accum_grad_scale(3), 0.5f, ops::accum_grad_scale(7)})
        for (NonFinite p : {NonFinite::none, NonFinite::inf, NonFinite::nan}) {
        add("scale_all", fmt::format("{}, scale {}{}", table_shapes()[t].name, s, non_finite_name(p)),
            [t, s, p](std::uint64_t seed) -> std::string {
              ad::Rng rng(seed);
              HostTable h = make_table(rng, table_shapes()[t].sizes, p);
              DeviceTable d(h);
              launch::scale_all(d.table.data(), d.count, d.max_n, s);
              for (auto& g : h.grad)
                for (float& x : g) x = ops::scale_grad(x, s);
              return d.compare(h);
            });
      }
}

void grad_norms_cases() {
  for (std::size_t t = 0; t < table_shapes().size(); ++t)
    for (NonFinite p : {NonFinite::none, NonFinite::inf, NonFinite::nan}) {
      add("grad_norms", table_shapes()[t].name + non_finite_name(p), [t, p](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        HostTable h = make_table(rng, table_shapes()[t].sizes, p);
        DeviceTable d(h);
        launch::grad_norms(d.table.data(), d.count, d.total_chunks, d.partials.data(), d.norms.data());
        Vec sums(h.size());
        for (std::size_t k = 0; k < h.size(); ++k) sums[k] = ops::tensor_sumsq(h.grad[k].data(), h.grad[k].size());
        First first;
        first(first_difference("per-tensor sums of squares", sums, d.norms.download()));
        first(d.compare(h));  // nothing else written
        return first.what;
      });
    }
}

void step_control_cases() {
  struct Losses {
    std::string name;
    Vec values;
  };
  const std::vector<Losses> losses = {
      {"no loss (accum 0)", {}},
      {"accum 1", {3.25f}},
      {"accum 3", {10.9f, -0.0f, 7.0000005f}},
      {"accum 4 with a NaN loss", {2.0f, num::float_of(0x7FC00000u), 1.0f, 3.0f}},
      {"accum 2 with an inf loss", {kInf, 1.0f}},
  };
  for (std::size_t count : {std::size_t{1}, std::size_t{148}, std::size_t{4100}})
    for (float max_norm : {0.0f, 1.0f, 1e6f})
      for (std::size_t l = 0; l < losses.size(); ++l)
        for (NonFinite p : {NonFinite::none, NonFinite::inf, NonFinite::nan}) {
          if (p != NonFinite::none && (l > 2 || max_norm == 0.0f)) continue;
          add("step_control",
              fmt::format("{} tensors, max_norm {}, {}{}", count, max_norm, losses[l].name,
                          p == NonFinite::none ? "" : p == NonFinite::inf ? ", an inf sum" : ", a NaN sum"),
              [count, max_norm, l, p, losses](std::uint64_t seed) -> std::string {
                ad::Rng rng(seed);
                Vec sums(count);  // sums of squares: >= 0, some +0, totals above and below max_norm²
                const double scale = rng.below(2) ? 4.0 : 1e-3;
                for (float& x : sums) x = rng.below(31) == 0 ? 0.0f : static_cast<float>(scale * rng.uniform());
                if (p != NonFinite::none)
                  sums[rng.below(count)] = p == NonFinite::inf ? kInf : num::float_of(0x7FC00000u);
                const Vec& ls = losses[l].values;
                DeviceBuffer<float> d_sums, d_losses, d_control(launch::kControlSize);
                d_sums.upload(sums);
                if (!ls.empty()) d_losses.upload(ls);
                launch::step_control(d_sums.data(), count, ls.empty() ? nullptr : d_losses.data(), ls.size(), max_norm,
                                     d_control.data());
                ops::StepDecision want;
                want.loss = ops::step_loss(ls.data(), ls.size());
                want.norm = ops::global_norm(sums.data(), sums.size());
                want.clip = ops::clip_scale(max_norm, want.norm);
                want.update = ops::step_updates(want.loss, want.norm);
                return difference("control [loss, norm, clip, update]", control_of(want), d_control.download());
              });
        }
}

void adamw_all_cases() {
  struct Control {
    float clip;
    bool update;
  };
  for (std::size_t t = 0; t < table_shapes().size(); ++t)
    for (Control c : {Control{0.37f, true}, Control{1.0f, true}, Control{3.5f, true}, Control{0.5f, false}})
      for (int step : {1, 1000}) {
        add("adamw_all",
            fmt::format("{}, clip {}{}, update {}", table_shapes()[t].name, c.clip, c.update ? "" : ", no update",
                        step),
            [t, c, step](std::uint64_t seed) -> std::string {
              ad::Rng rng(seed);
              HostTable h = make_table(rng, table_shapes()[t].sizes, NonFinite::none);
              DeviceTable d(h);
              const ops::AdamWScalars s = scalars(6e-4, step);
              const Vec control = {1.5f, 2.0f, c.clip, c.update ? 1.0f : 0.0f};
              d.control.upload(control);
              launch::adamw_all(d.table.data(), d.count, d.max_n, d.control.data(), s);
              if (c.update)
                for (const ops::OptimTensor& x : h.views())
                  for (std::size_t i = 0; i < x.n; ++i)
                    ops::update_element(x.value[i], x.grad[i], x.m[i], x.v[i], c.clip, s, x.decay);
              return d.compare(h);
            });
      }
}

// --- The optimizer's step, its four launches in sequence (the CUDA model's update) ---

void optimizer_step_cases() {
  for (std::size_t t = 0; t < table_shapes().size(); ++t)
    for (std::size_t accum : {std::size_t{1}, std::size_t{3}})
      for (float max_norm : {0.0f, 1.0f, 1e4f})
        for (int variant = 0; variant < 4; ++variant) {  // clean, -inf gradient, NaN gradient, NaN loss
          const NonFinite p = variant == 1 ? NonFinite::inf : variant == 2 ? NonFinite::nan : NonFinite::none;
          if (variant > 0 && max_norm == 0.0f) continue;
          const bool nan_loss = variant == 3;
          add("optimizer_step",
              fmt::format("{}, accum {}, max_norm {}{}{}", table_shapes()[t].name, accum, max_norm, non_finite_name(p),
                          nan_loss ? ", a NaN loss" : ""),
              [t, accum, max_norm, p, nan_loss](std::uint64_t seed) -> std::string {
                ad::Rng rng(seed);
                HostTable h = make_table(rng, table_shapes()[t].sizes, p);
                Vec losses(accum);
                for (float& l : losses) l = static_cast<float>(rng.uniform(2.0, 11.0));
                if (nan_loss) losses[accum - 1] = num::float_of(0x7FC00000u);
                DeviceTable d(h);
                DeviceBuffer<float> d_losses;
                d_losses.upload(losses);
                const float grad_scale = ops::accum_grad_scale(accum);
                const ops::AdamWScalars s = scalars(3e-4, 7);
                if (grad_scale != 1.0f) launch::scale_all(d.table.data(), d.count, d.max_n, grad_scale);
                launch::grad_norms(d.table.data(), d.count, d.total_chunks, d.partials.data(), d.norms.data());
                launch::step_control(d.norms.data(), d.count, d_losses.data(), accum, max_norm, d.control.data());
                launch::adamw_all(d.table.data(), d.count, d.max_n, d.control.data(), s);
                std::vector<float> sums;
                const ops::StepDecision want =
                    ops::reference_step(h.views(), losses.data(), accum, grad_scale, max_norm, s, &sums);
                First first;
                first(difference("control [loss, norm, clip, update]", control_of(want), d.control.download()));
                first(first_difference("per-tensor sums of squares", sums, d.norms.download()));
                first(d.compare(h));
                return first.what;
              });
        }
}

// --- The engine's glue: the mean loss and the fill --------------------------------

void loss_mean_cases() {
  for (std::size_t n : {0, 1, 31, 32, 33, 4095, 4096, 4097, 8193, 16384, 4096 * 40 + 17}) {
    std::vector<std::size_t> valid = {0};  // rows with a target: none, one, all, all but 3
    for (std::size_t v : {std::size_t{1}, n, n > 3 ? n - 3 : 0})
      if (v <= n && std::find(valid.begin(), valid.end(), v) == valid.end()) valid.push_back(v);
    for (std::size_t n_valid : valid) {
      for (int special = 0; special < 3; ++special)  // none, an inf, an inf and a NaN
        for (bool deferred : {false, true}) {
          if (special && (n < 2 || deferred)) continue;  // the slot is the same store: clean values suffice
          add("canonical_mean",
              fmt::format("n {} n_valid {}{}{}", n, n_valid,
                          special == 0 ? "" : special == 1 ? ", an inf" : ", an inf and a NaN",
                          deferred ? ", into a device slot" : ""),
              [n, n_valid, special, deferred](std::uint64_t seed) -> std::string {
                ad::Rng rng(seed);
                Vec x(n);  // row losses: >= 0, +0 for rows without a target
                for (float& v : x) v = rng.below(9) == 0 ? 0.0f : static_cast<float>(rng.uniform(0.0, 12.0));
                if (special >= 1) x[rng.below(n)] = kInf;
                if (special == 2) x[rng.below(n)] = num::float_of(0x7FC00001u);  // a payload: the sum is canonical
                // The engine's host expression (model/transformer.hpp, Engine::run).
                const float want = n_valid == 0 ? 0.0f : num::reduce::sum(x.data(), n) / static_cast<float>(n_valid);
                DeviceBuffer<float> d_x, slot(1);
                d_x.upload(x);
                OpKernels k;
                if (deferred) k.defer_loss_to = slot.data();
                float got = k.loss_mean(d_x.data(), n, n_valid);
                if (deferred) got = slot.download()[0];
                return difference("mean loss", &want, &got, 1);
              });
        }
    }
  }
}

void fill_cases() {
  for (std::size_t n : {1, 5, 255, 256, 257, 4097, 1048576 + 3, 16384})
    for (std::uint32_t bits : {0x38800000u /* 1/16384 */, 0x80000000u /* -0 */, 0x00000000u, 0x7FC00001u,
                               0xFF800000u, 0x00000001u /* the smallest subnormal */}) {
      add("fill", fmt::format("n {} value 0x{:08x}", n, bits), [n, bits](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        // n cells to fill and 7 beyond them that must keep what they hold.
        Vec cells(n + 7);
        for (float& c : cells) c = static_cast<float>(rng.normal());
        DeviceBuffer<float> d;
        d.upload(cells);
        OpKernels().fill(d.data(), n, num::float_of(bits));
        std::fill(cells.begin(), cells.begin() + static_cast<std::ptrdiff_t>(n), num::float_of(bits));
        return first_difference("x", cells, d.download());  // a copy of bits: NaN payloads too
      });
    }
}

// --- The audits' gather --------------------------------------------------------------

void gather_cases() {
  for (int segments : {1, 5, launch::kMaxGatherSegments})
    add("audit gather", fmt::format("{} segments: rows, strided columns, single cells", segments),
        [segments](std::uint64_t seed) -> std::string {
          ad::Rng rng(seed);
          Vec src(300 * 311);
          for (float& x : src) x = static_cast<float>(rng.normal());
          DeviceBuffer<float> d_src;
          d_src.upload(src);
          launch::GatherList list;
          std::size_t total = 0;
          for (int s = 0; s < segments; ++s) {
            launch::GatherSegment g;
            g.rows = 1 + rng.below(40);
            g.row_elems = 1 + rng.below(50);
            g.elem_stride = rng.below(3) == 0 ? 1 + rng.below(5) : 1;  // a column when row_elems 1
            g.row_stride = g.row_elems * g.elem_stride + rng.below(30);
            const std::size_t span = (g.rows - 1) * g.row_stride + (g.row_elems - 1) * g.elem_stride + 1;
            const std::size_t start = rng.below(src.size() - span + 1);
            g.src = d_src.data() + start;
            g.dst_offset = total;
            total += g.rows * g.row_elems;
            list.seg[list.n++] = g;
          }
          // The gathered cells, and 5 beyond them that must keep what they hold.
          Vec want(total + 5);
          for (float& x : want) x = static_cast<float>(rng.normal());
          DeviceBuffer<float> dst;
          dst.upload(want);
          launch::gather(list, dst.data());
          for (int s = 0; s < list.n; ++s) {
            const launch::GatherSegment& g = list.seg[s];
            const std::size_t start = static_cast<std::size_t>(g.src - d_src.data());
            for (std::size_t r = 0; r < g.rows; ++r)
              for (std::size_t e = 0; e < g.row_elems; ++e)
                want[g.dst_offset + r * g.row_elems + e] = src[start + r * g.row_stride + e * g.elem_stride];
          }
          return first_difference("dst", want, dst.download());  // a copy of bits
        });
}

}  // namespace

std::vector<Case> train_cases() {
  g_cases.clear();
  scale_all_cases();
  grad_norms_cases();
  step_control_cases();
  adamw_all_cases();
  optimizer_step_cases();
  loss_mean_cases();
  fill_cases();
  gather_cases();
  return std::move(g_cases);
}

}  // namespace lockstep::cuda::gate
