// make_cuda_model: the float engine (model/transformer.hpp) over the CUDA
// kernel set: the one model over a kernel set (kernel_model.hpp), the CPU
// model's code, with DeviceStorage below as where its parameters live. The
// parameters, their gradients and the AdamW moments live on the device; the
// trainer's view (Model::params(), read by checkpoints, generation and tests)
// is synced lazily in either direction. The engine, its glue and its
// order of kernel calls are the CPU model's; every kernel is gated against the
// CPU's at start-up; so the loss and the gradients are the CPU model's bits,
// and the optimizer kernels (optim_launch.hpp) are the host loop's expressions.
// A training step (its stages: model/step_stages.hpp, run by train::run_step)
// waits for the device once, at its end.
// It lives in model/, beside the CPU model: it is the model layer over the
// CUDA kernel set, and backend/ includes nothing from model/ (docs/ARCHITECTURE.md
// "Layers"). CMake compiles it only in a build with the CUDA backend.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "lockstep/backend/cuda/act_norm_launch.hpp"
#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/col_quant.hpp"
#include "lockstep/backend/cuda/core_launch.hpp"
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/decode_linear_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/graph.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/optim_launch.hpp"
#include "lockstep/backend/cuda/param_init_launch.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/backend/cuda/profile.hpp"
#include "lockstep/backend/cuda/rope_store_launch.hpp"
#include "lockstep/model/kernel_model.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/ops/optim.hpp"

namespace lockstep::model {
namespace {

namespace launch = cuda::launch;

// A frozen BitLinear weight held on the device as its TERNARY2 bytes (the
// host's Param::frozen_value, copied) and its scale (kept on the host: the
// codes kernels take it as an argument). What the engine reads of it
// (transformer.hpp's codes_at): bytes().data(), a device pointer that is the
// weight's key, scales() and numel().
struct DeviceCodes {
  const cuda::DeviceBuffer<std::uint8_t>& bytes() const { return bytes_; }
  const std::vector<float>& scales() const { return scales_; }
  std::size_t numel() const { return numel_; }
  // The host's codes to the device (the same size again: the same address).
  void upload(const tensor::Storage& s) {
    bytes_.upload(s.bytes().data(), s.bytes().size());
    scales_.assign(s.scales().begin(), s.scales().end());
    numel_ = s.numel();
  }

 private:
  cuda::DeviceBuffer<std::uint8_t> bytes_;
  std::vector<float> scales_;
  std::size_t numel_ = 0;
};

// A parameter whose value and gradient live on the device; a frozen BitLinear
// weight the host holds as TERNARY2 codes (model::hold_frozen_ternary_as_codes)
// holds them here too (frozen_value), and no F32 value.
struct DeviceParam {
  std::string name;
  std::vector<std::int64_t> shape;
  cuda::DeviceBuffer<float> value, grad;
  bool decay = true;
  bool trainable = true;
  tensor::DType dtype = tensor::DType::f32;
  DeviceCodes frozen_value;  // dtype ternary2 only
};

// Nothing is allocated here: the values at the first pass, sync or device
// init (DeviceStorage::reconcile), in the form the host holds them then (a
// base converted to codes before then never holds F32 values on the device),
// and the gradients then too, when it is known which parameters train (a base
// frozen before then, LoRA, never holds a device gradient).
std::vector<DeviceParam> device_params(const std::vector<Param>& host) {
  std::vector<DeviceParam> d(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    d[i].name = host[i].name;
    d[i].shape = host[i].shape;
    d[i].decay = host[i].decay;
    d[i].trainable = host[i].trainable;
  }
  return d;
}

// The CUDA model's storage (kernel_model.hpp's Storage): every parameter's
// value and gradient on the device, the host view synced lazily — brought up
// to date when read, and uploaded before the next pass after a host write.
class DeviceStorage {
 public:
  using EngineParam = DeviceParam;
  static constexpr const char* kName = "the CUDA model";
  // Frozen BitLinear projections held as TERNARY2 codes run on
  // cuda::OpKernels::bitlinear_codes_* (CudaModel::runs_ternary_codes says
  // whether hold_frozen_ternary_as_codes converts a base: cuda::OpKernels::runs_codes).
  static constexpr bool kRunsCodes = true;
  explicit DeviceStorage(std::vector<Param>& host) : host_(host), device_(device_params(host)) {}
  std::vector<DeviceParam>& engine_params() { return device_; }
  void host_view_read() const { sync_host(); }
  // After non-const access the caller may have written the host view, so the
  // device copy is refreshed before its next use.
  void host_view_write() {
    sync_host();
    device_values_ = device_grads_ = false;
  }
  void host_written() {
    host_values_ = host_grads_ = true;
    value_stale_.assign(value_stale_.size(), 0);
    device_values_ = device_grads_ = false;
  }
  void before_pass(bool accumulate) {
    sync_device_values();
    if (accumulate && !device_grads_) upload_grads();
  }
  void after_pass(bool wrote_grads, const char* what) {
    cuda::synchronize(what);
    if (wrote_grads) device_wrote(true, false);
  }
  // The device holds newer gradients (and values) than the host view. The
  // device writes values only in the optimizer step, whose table is the
  // trainable parameters: only theirs come back (a frozen base is never
  // downloaded).
  void device_wrote(bool grads, bool values) {
    if (grads) {
      device_grads_ = true;
      host_grads_ = false;
    }
    if (values) {
      host_values_ = false;
      value_stale_.resize(device_.size(), 0);
      for (std::size_t i = 0; i < device_.size(); ++i)
        if (device_[i].trainable) value_stale_[i] = 1;
    }
  }
  // init's values (params.hpp's scheme) filled on the device: the host view's
  // values are then stale until read (its gradients stay the host's, zero).
  void init_values(const std::vector<ParamSpec>& specs, std::uint64_t seed) {
    reconcile();
    for (std::size_t i = 0; i < device_.size(); ++i) {
      float* v = device_[i].value.data();
      const std::size_t n = device_[i].value.size();
      switch (specs.at(i).init) {
        case Init::Normal:
          launch::fill_normal(v, n, seed, param_stream(specs[i].name), 0.0f, specs[i].init_std);
          break;
        case Init::One:
          launch::fill(v, n, 1.0f);
          break;
        case Init::Zero:
          launch::fill(v, n, 0.0f);
          break;
      }
    }
    cuda::synchronize("init");
    device_values_ = true;
    host_values_ = false;
    value_stale_.assign(device_.size(), 1);
    host_grads_ = true;
    device_grads_ = false;
  }
  // Every device buffer the host view asks for allocated (not filled): what
  // the device tables hand out (CudaModel::device_table) points somewhere
  // even before the first pass.
  void ensure_allocated() { reconcile(); }
  void sync_device_values() {
    reconcile();
    if (device_values_) return;
    for (std::size_t i = 0; i < host_.size(); ++i) {
      if (host_[i].dtype == tensor::DType::ternary2)
        device_[i].frozen_value.upload(host_[i].frozen_value);  // the same size: the same address (its key)
      else
        device_[i].value.upload(host_[i].value);
    }
    device_values_ = true;
  }

 private:
  // The host list may have changed through params() since the device list was
  // made: LoRA's adapter tensors appended, the base frozen (lora_params.hpp).
  // The device list follows (a new or reshaped entry is allocated; its values
  // come with the upload that follows any host write) before a pass reads it.
  void reconcile() {
    if (device_.size() > host_.size())
      throw std::logic_error("the CUDA model: parameters were removed from its list (only appending is supported)");
    for (std::size_t i = 0; i < host_.size(); ++i) {
      if (i == device_.size()) device_.emplace_back();
      DeviceParam& d = device_[i];
      const Param& h = host_[i];
      const bool codes = h.dtype == tensor::DType::ternary2;
      if (d.name != h.name || d.shape != h.shape || d.dtype != h.dtype ||
          (codes ? d.frozen_value.numel() != h.frozen_value.numel() : d.value.size() != h.value.size())) {
        d.name = h.name;
        d.shape = h.shape;
        d.dtype = h.dtype;
        if (codes) {
          cuda::DeviceBuffer<float>().swap(d.value);  // a weight held as codes holds no floats here either
        } else {
          d.frozen_value = DeviceCodes();
          d.value.resize(h.value.size());
        }
        device_values_ = false;
      }
      // A frozen parameter's gradient is never written on the device (the
      // engine gives it a discarded destination, or none): no buffer.
      const std::size_t grad_n = h.trainable ? h.grad.size() : 0;
      if (d.grad.size() != grad_n) {
        if (grad_n == 0)
          cuda::DeviceBuffer<float>().swap(d.grad);
        else
          d.grad.resize(grad_n);
        device_grads_ = false;
      }
      d.decay = h.decay;
      d.trainable = h.trainable;
    }
  }
  void upload_grads() {
    for (std::size_t i = 0; i < device_.size(); ++i)
      if (host_[i].trainable) device_[i].grad.upload(host_[i].grad);
  }
  // Entries the host appended since the last pass are the host's newest (the
  // device has none of them yet).
  void sync_host() const {
    const std::size_t n = std::min(host_.size(), device_.size());
    if (!host_values_) {
      for (std::size_t i = 0; i < n && i < value_stale_.size(); ++i)
        if (value_stale_[i]) device_[i].value.download(host_[i].value.data());
      value_stale_.assign(value_stale_.size(), 0);
      host_values_ = true;
    }
    if (!host_grads_) {
      for (std::size_t i = 0; i < n; ++i)
        if (host_[i].trainable) device_[i].grad.download(host_[i].grad.data());
      host_grads_ = true;
    }
  }

  std::vector<Param>& host_;
  std::vector<DeviceParam> device_;
  // Where the newest values and gradients are.
  mutable bool host_values_ = true, host_grads_ = true;
  bool device_values_ = false, device_grads_ = false;
  mutable std::vector<char> value_stale_;  // per parameter: the device's value is newer (host_values_ false)
};

}  // namespace

// ---- decode (owned by the decode work; model/decode.hpp) ---------------------
// The decode kernels on the device: RoPE, the cache writes and the cached
// attention of backend/cuda/decode.cu, one launch each for all the pass's
// rows, their slots and positions uploaded when they change (once a pass, not
// once a layer or a segment; RoPE's table covers positions 0..ctx-1, uploaded
// once a session), and the projections of a pass of at
// most kGemvRows rows as GEMVs reading each weight once (decode_linear.cu):
// BitLinear on its 2-bit codes, packed at the session's first use of the
// weight (ternary_quantize, the training kernels' quantizer, then
// ternary_pack), and a wide Linear (the LM head) as one fma chain per output
// reading the weights as f16 where f16 holds them exactly. The same bits as
// K's kernels (exact integer sums; the same chains): tests/infer
// (DecodeGpu, DecodeKernelsGpu). A session reads each matrix as it was at its
// first use, as the CPU's does.
template <>
struct DecodeBackend<cuda::OpKernels> {
  static constexpr std::size_t kGemvRows = 32;       // at most this many rows: the GEMVs
  static constexpr std::size_t kChainMinOut = 4096;  // a Linear this wide or wider: chain_gemv
  static constexpr std::size_t kGemvMaxIn = 96 * 1024;  // ternary_gemv holds a row's K codes in 128 KiB of shared memory
  struct Ternary {
    cuda::DeviceBuffer<std::uint32_t> words;
    cuda::DeviceBuffer<float> params;  // ternary_quantize's: [0] the scale, [1] its inverse
  };
  struct Half {
    cuda::DeviceBuffer<std::uint16_t> half;
    bool exact = false;
  };
  static constexpr bool kRowsAt = true;  // RoPE, the cache writes and the cached attention at the rows' device positions
  struct State {
    cuda::DeviceBuffer<std::int32_t> rows;          // the pass's rows: slots, then positions
    std::vector<std::int32_t> rows_host;            // what rows holds
    std::size_t row_count = 0;
    cuda::DeviceBuffer<float> rope_table;  // ops::Rope::table for positions 0..ctx-1
    ops::Rope::Config rope_key;
    bool rope_valid = false;
    std::unordered_map<const float*, Ternary> ternary;
    std::unordered_map<const float*, Half> half;
    cuda::DeviceBuffer<std::int8_t> xq;
    cuda::DeviceBuffer<float> step;
    cuda::DeviceBuffer<int> flag;
    bool bitlinear_seen = false;  // a BitLinear ran on the GEMVs: the norms' outputs are worth quantizing
    // BitLinears on the held codes st.xq [pending_rows, pending_in] not yet
    // launched: joined into one ternary_gemv_parts launch at the next kernel
    // of any other kind (flush, which the decode kernel set calls first).
    std::vector<cuda::launch::TernaryPart> pending;
    std::size_t pending_in = 0, pending_rows = 0;
    // ReLU²·up not yet launched (the BitNet FFN's activation, relu2mul): the
    // FFN sub-norm reading its output next runs both in one launch (act_norm);
    // any other kernel launches it first (flush).
    bool act_pending = false;
    ops::ReluSqMul::Config act_config;
    ops::ReluSqMul::FwdArgs<float> act_args{};
    // RoPE of q and of k not yet launched (defer_rope): the attention after
    // them runs both with its cache writes in one launch (rope_store); any
    // other kernel launches them first (flush).
    struct PendingRope {
      ops::Rope::Config c;
      ops::Rope::FwdArgs<float> a;
      std::size_t rows, ctx;
    };
    std::vector<PendingRope> ropes;
    // The RMSNorm + codes not yet launched (session 11, LOCKSTEP_DECODE_NORM_GEMV,
    // cuda::launch::decode_norm_gemv): the BitLinears that read its codes next
    // run it in their launch's prologue (ternary_gemv_parts_norm, flush_gemvs);
    // any other kernel launches it first (flush). st.xq/st.step are still its
    // codes and steps afterwards (the fused launch's CTA 0 writes them).
    bool norm_pending = false;
    ops::NormConfig norm_config;
    ops::RmsNorm::FwdArgs<float> norm_args{};
  };
  static const Ternary& ternary(State& st, const float* w, std::size_t out, std::size_t in) {
    auto it = st.ternary.find(w);
    if (it != st.ternary.end()) return it->second;
    const std::size_t n = out * in;
    Ternary t;
    cuda::DeviceBuffer<float> codes(n), dequant(n), scratch(launch::ternary_scratch(n));
    t.params.resize(2);
    launch::ternary_quantize(w, n, static_cast<float>(n), static_cast<float>(1e-5), codes.data(), dequant.data(),
                             t.params.data(), scratch.data());
    t.words.resize(out * 4 * launch::ternary_units(in));
    launch::ternary_pack(codes.data(), out, in, t.words.data());
    return st.ternary.emplace(w, std::move(t)).first->second;
  }
  static const Half& half(State& st, const float* w, std::size_t n) {
    auto it = st.half.find(w);
    if (it != st.half.end()) return it->second;
    Half h;
    h.half.resize(n);
    st.flag.resize(1);
    h.exact = launch::f16_pack(w, n, h.half.data(), st.flag.data());
    if (!h.exact) cuda::DeviceBuffer<std::uint16_t>().swap(h.half);  // the f32 weights serve
    return st.half.emplace(w, std::move(h)).first->second;
  }
  static void linear(cuda::OpKernels& k, State& st, const ops::Linear::Config& c, const ops::Linear::FwdArgs<float>& a) {
    if (c.rows > kGemvRows || c.out < kChainMinOut) return k.run(c, a);
    const Half& h = half(st, a.w, c.out * c.in);
    launch::chain_gemv(h.exact ? nullptr : a.w, h.exact ? h.half.data() : nullptr, a.x, c.bias ? a.b : nullptr, c.rows,
                       c.out, c.in, a.y);
  }
  // Returns whether st.xq/st.step hold the codes of a.x afterwards; `held`: they
  // do already (the decode kernel set's promise: the same input, unchanged).
  // With the session-8 changes on (cuda::launch::decode_fusion), a BitLinear
  // on held codes joins the ones before it (q, k and v; gate and up: one
  // ternary_gemv_parts launch, each part's cells as its own launch computes
  // them); the launch waits for the next kernel of another kind (flush).
  static bool linear(cuda::OpKernels& k, State& st, const ops::QuantLinearConfig& c,
                     const ops::BitLinear::FwdArgs<float>& a, cuda::Aux& aux, bool held) {
    if (c.rows > kGemvRows || c.in > kGemvMaxIn) {
      flush(k, st);
      k.run(c, a, aux);
      return false;
    }
    ops::BitLinear::validate(c);
    const Ternary& t = ternary(st, a.w, c.out, c.in);  // a first use packs: kernels on buffers of its own
    st.bitlinear_seen = true;
    if (!held || st.pending.size() == launch::kTernaryMaxParts) flush(k, st);
    if (!held) {
      st.xq.resize(c.rows * c.in);
      st.step.resize(c.rows);
      launch::row_quantize_i8(a.x, c.rows, c.in, static_cast<float>(ops::BitLinear::kActFloor), st.xq.data(),
                              st.step.data(), nullptr);
    }
    if (!launch::decode_fusion()) {
      launch::ternary_gemv(t.words.data(), c.out, c.in, st.xq.data(), c.rows, st.step.data(), t.params.data(), a.y);
      return true;
    }
    st.pending.push_back({t.words.data(), c.out, t.params.data(), a.y});
    st.pending_in = c.in;
    st.pending_rows = c.rows;
    return true;
  }
  // Launches the deferred ReLU²·up and the joined BitLinears (nothing when none wait).
  static void flush(cuda::OpKernels& k, State& st) {
    if (st.act_pending) {
      st.act_pending = false;
      k.run(st.act_config, st.act_args);
    }
    for (const State::PendingRope& r : st.ropes) launch_rope(st, r.c, r.a, r.rows, r.ctx);
    st.ropes.clear();
    flush_gemvs(st);
  }
  static void flush_gemvs(State& st) {
    if (st.norm_pending) {
      st.norm_pending = false;
      if (norm_in_prologue(st)) {
        const ops::RmsNorm::FwdArgs<float>& a = st.norm_args;
        launch::NormPrologue np;
        np.x = a.x;
        np.w = a.w;
        np.eps = static_cast<float>(st.norm_config.eps);
        np.floor_x = static_cast<float>(ops::BitLinear::kActFloor);
        np.y = a.y;
        np.rstd = a.rstd;
        np.codes = st.xq.data();
        np.step = st.step.data();
        launch::ternary_gemv_parts_norm(st.pending.data(), st.pending.size(), st.pending_in, np, st.pending_rows);
        st.pending.clear();
        return;
      }
      launch_norm(st, st.norm_config, st.norm_args);
    }
    if (st.pending.empty()) return;
    launch::ternary_gemv_parts(st.pending.data(), st.pending.size(), st.pending_in, st.xq.data(), st.pending_rows,
                               st.step.data());
    st.pending.clear();
  }
  // Whether the pending BitLinears may run the deferred norm in their
  // prologue: they read exactly its codes (its rows, its width), and nothing
  // a CTA writes (the parts' y and sums; CTA 0's y, rstd) overlaps what
  // another CTA reads (the norm's x and w, the residuals' other operands).
  static bool norm_in_prologue(const State& st) {
    const ops::NormConfig& c = st.norm_config;
    const ops::RmsNorm::FwdArgs<float>& a = st.norm_args;
    if (st.pending.empty() || st.pending_rows != c.rows || st.pending_in != c.dim) return false;
    const std::size_t n = c.rows * c.dim;
    for (const launch::TernaryPart& p : st.pending) {
      const std::size_t m = c.rows * p.M;
      for (const float* out : {static_cast<const float*>(p.y), static_cast<const float*>(p.sum)})
        if (out != nullptr && (!disjoint(out, m, a.x, n) || !disjoint(out, m, a.w, c.dim) ||
                               !disjoint(out, m, a.y, n) || !disjoint(out, m, a.rstd, c.rows)))
          return false;
      if (p.add != nullptr && (!disjoint(p.add, m, a.y, n) || !disjoint(p.add, m, a.rstd, c.rows))) return false;
    }
    return true;
  }
  // rmsnorm_quantize_i8 of the norm into st.xq/st.step (sized by the caller).
  static void launch_norm(State& st, const ops::NormConfig& c, const ops::RmsNorm::FwdArgs<float>& a) {
    cuda::launch::rmsnorm_quantize_i8(c.rows, c.dim, static_cast<float>(c.eps), a.x, a.w, a.y, a.rstd,
                                      static_cast<float>(ops::BitLinear::kActFloor), st.xq.data(), st.step.data());
  }
  // Whether np floats at p and nq at q share no byte.
  static bool disjoint(const float* p, std::size_t np, const float* q, std::size_t nq) {
    const auto u = reinterpret_cast<std::uintptr_t>(p), v = reinterpret_cast<std::uintptr_t>(q);
    return u + np * sizeof(float) <= v || v + nq * sizeof(float) <= u;
  }
  static bool disjoint(const float* p, const float* q, std::size_t n) { return disjoint(p, n, q, n); }
  // The residual add y = a + b after a deferred BitLinear that wrote a or b
  // (o_proj, down_proj: the pending launch of one part) folded into that
  // launch's epilogue (TernaryPart::sum: the same __fadd_rn on the same values,
  // the BitLinear's y still written), with the session-10 epilogues on
  // (LOCKSTEP_DECODE_EPILOGUES, cuda::launch::decode_epilogues). Declines
  // (false: the caller flushes and launches residual_fwd) for anything else:
  // no pending part or joined parts, a shape that is not the part's, the
  // other operand overlapping the part's output, or an output that overlaps
  // an operand without being it.
  static bool residual(cuda::OpKernels&, State& st, const ops::ResidualAdd::Config& c,
                       const ops::ResidualAdd::FwdArgs<float>& a) {
    if (!launch::decode_epilogues() || st.pending.size() != 1) return false;
    launch::TernaryPart& part = st.pending.back();
    if (part.sum != nullptr || c.n != st.pending_rows * part.M || c.n == 0) return false;
    const bool b_is_y = a.b == part.y && a.a != part.y, a_is_y = a.a == part.y && a.b != part.y;
    if (!b_is_y && !a_is_y) return false;
    const float* other = b_is_y ? a.a : a.b;
    const auto apart = [n = c.n](const float* p, const float* q) { return disjoint(p, q, n); };
    if (!apart(other, part.y) || !(a.y == other || apart(a.y, other)) || !(a.y == part.y || apart(a.y, part.y)))
      return false;
    part.add = other;
    part.sum = a.y;
    part.add_first = b_is_y;
    return true;
  }
  // A pass starts: nothing of a pass that threw is launched later.
  static void drop_pending(State& st) {
    st.pending.clear();
    st.act_pending = false;
    st.ropes.clear();
    st.norm_pending = false;
  }
  // ReLU²·up deferred (true) where the norm after it may take it in
  // (act_norm): the session-10 epilogues and the session-8 changes on, in a
  // model whose BitLinears run on the GEMVs. The decode kernel set has
  // launched everything pending before it.
  static bool relu2mul(cuda::OpKernels&, State& st, const ops::ReluSqMul::Config& c,
                       const ops::ReluSqMul::FwdArgs<float>& a) {
    if (!launch::decode_epilogues() || !launch::decode_fusion() || !st.bitlinear_seen || c.n == 0) return false;
    st.act_pending = true;
    st.act_config = c;
    st.act_args = a;
    return true;
  }
  // The RMSNorm of the deferred ReLU²·up's output h, the two in one launch
  // (relu2mul_rmsnorm_quantize_i8: relu2mul_fwd's h, still written, then
  // rmsnorm_quantize_i8's y, rstd, codes and steps of h, the same bits):
  // true, with st.xq/st.step the codes of a.y. False (nothing launched) where
  // the norm reads anything else, the shape is outside the fused kernel's
  // rows/width, or h overlaps gate, up or y without being y.
  static bool act_norm(cuda::OpKernels&, State& st, const ops::NormConfig& c, const ops::RmsNorm::FwdArgs<float>& a) {
    if (!st.act_pending || !st.pending.empty() || st.act_args.y != a.x || st.act_config.n != c.rows * c.dim ||
        c.rows > kGemvRows || !launch::act_norm_fused(c.rows, c.dim))
      return false;
    const ops::ReluSqMul::FwdArgs<float>& h = st.act_args;
    const auto apart = [n = st.act_config.n](const float* p, const float* q) { return disjoint(p, q, n); };
    if (!apart(h.y, h.gate) || !apart(h.y, h.up) || !(a.y == h.y || (apart(a.y, h.y) && apart(a.y, h.gate) &&
                                                                   apart(a.y, h.up))))
      return false;
    st.act_pending = false;
    st.xq.resize(c.rows * c.dim);
    st.step.resize(c.rows);
    launch::relu2mul_rmsnorm_quantize_i8(c.rows, c.dim, static_cast<float>(c.eps), h.gate, h.up, h.y, a.w, a.y,
                                         a.rstd, static_cast<float>(ops::BitLinear::kActFloor), st.xq.data(),
                                         st.step.data());
    return true;
  }
  // RMSNorm with the int8 codes of its output fused in (rmsnorm_quantize_i8:
  // rmsnorm_fwd's y and rstd, row_quantize_i8's codes and steps of y, in one
  // launch), where the GEMVs would quantize y next: few rows, a model whose
  // BitLinears run on the GEMVs (one ran already), and the fusion not turned
  // off (LOCKSTEP_DECODE_FUSION=0, cuda::launch::set_decode_fusion). Returns
  // whether st.xq/st.step hold the codes of a.y afterwards; else K's norm ran.
  // With the session-11 norm in the GEMV's prologue on (decode_norm_gemv) and
  // 1-2 rows (norm_gemv_fits) of an x apart from y and rstd, nothing is
  // launched yet: the norm waits for the BitLinears on its codes
  // (flush_gemvs), and any other kernel launches it first (flush).
  static bool rmsnorm(cuda::OpKernels& k, State& st, const ops::NormConfig& c,
                      const ops::RmsNorm::FwdArgs<float>& a) {
    flush(k, st);  // (the decode kernel set has flushed already; a norm writes st.xq)
    if (!st.bitlinear_seen || !cuda::launch::decode_fusion() || c.rows > kGemvRows ||
        !cuda::launch::rmsnorm_quantize_fused(c.rows, c.dim)) {
      k.run(c, a);
      return false;
    }
    st.xq.resize(c.rows * c.dim);
    st.step.resize(c.rows);
    const std::size_t n = c.rows * c.dim;
    if (launch::decode_norm_gemv() && launch::norm_gemv_fits(c.rows, c.dim) && disjoint(a.x, n, a.y, n) &&
        disjoint(a.x, n, a.rstd, c.rows) && disjoint(a.w, c.dim, a.y, n)) {
      st.norm_pending = true;
      st.norm_config = c;
      st.norm_args = a;
      return true;
    }
    launch_norm(st, c, a);
    return true;
  }
  static void store_rows(cuda::OpKernels&, const float* src, std::size_t ld, std::size_t rows, std::size_t width,
                         float* dst) {
    launch::store_rows(src, ld, rows, width, dst);
  }
  static void begin_pass(cuda::OpKernels&, State& st, const std::vector<std::int32_t>& slot,
                         const std::vector<std::int32_t>& pos) {
    std::vector<std::int32_t> both(slot);
    both.insert(both.end(), pos.begin(), pos.end());
    st.row_count = slot.size();
    if (both == st.rows_host) return;
    st.rows.upload(both);
    st.rows_host = std::move(both);
  }
  static void rope(cuda::OpKernels&, State& st, const ops::Rope::Config& c, const ops::Rope::FwdArgs<float>& a,
                   std::size_t rows, std::size_t ctx) {
    launch_rope(st, c, a, rows, ctx);
  }
  // RoPE deferred (true) with the session-10 epilogues on: the attention after
  // q's and k's (rope_store) takes both in with its cache writes. What waits
  // before it (the q/k/v GEMVs) launches now; the table is uploaded now (a
  // first use: outside any capture, as before).
  static bool defer_rope(cuda::OpKernels&, State& st, const ops::Rope::Config& c,
                         const ops::Rope::FwdArgs<float>& a, std::size_t rows, std::size_t ctx) {
    if (!launch::decode_epilogues() || !launch::decode_fusion() || st.act_pending || st.ropes.size() >= 2)
      return false;  // (the caller settles)
    flush_gemvs(st);
    rope_table(st, c, ctx);
    st.ropes.push_back({c, a, rows, ctx});
    return true;
  }
  // The attention's cache writes of k and v with the deferred RoPE of q and k
  // in one launch (rope_store_rows: rope_rows's and store_rows_at's values):
  // true, nothing of them left to run. False (nothing launched) unless the
  // two ropes wait and wrote exactly the attention's q and k rows (contiguous,
  // the pass's rows, one table), with k, v and the caches apart from q.
  static bool rope_store(cuda::OpKernels&, State& st, const ops::Attention::FwdArgs<float>& a, std::size_t rows,
                         std::size_t kvdim, float* k_cache, float* v_cache, std::size_t ctx) {
    if (st.ropes.size() != 2 || !st.pending.empty() || st.act_pending) return false;
    const State::PendingRope& q = st.ropes[0].a.y == a.q ? st.ropes[0] : st.ropes[1];
    const State::PendingRope& kr = &q == &st.ropes[0] ? st.ropes[1] : st.ropes[0];
    const std::size_t dh = q.c.head_dim;
    if (q.a.y != a.q || kr.a.y != a.k || q.rows != rows || kr.rows != rows || q.ctx != ctx || kr.ctx != ctx ||
        kr.c.head_dim != dh || kr.c.layout != q.c.layout || kr.c.base != q.c.base || a.ldq != q.c.heads * dh ||
        a.ldkv != kvdim || kr.c.heads * dh != kvdim || rows != st.row_count)
      return false;
    const std::size_t nq = rows * a.ldq, nk = rows * kvdim;
    if (!disjoint(a.q, nq, a.k, nk) || !disjoint(a.q, nq, a.v, nk) || !disjoint(q.a.x, nq, a.k, nk))
      return false;
    const launch::RopeStoreShape s{.rows = rows, .q_heads = q.c.heads, .kv_heads = kr.c.heads, .head_dim = dh,
                                   .interleaved = q.c.layout == ops::RopeLayout::interleaved, .tab_seq = ctx,
                                   .ldv = a.ldkv, .ctx = ctx};
    launch::rope_store_rows(s, st.rope_table.data(), st.rows.data(), st.rows.data() + st.row_count, q.a.x, q.a.y,
                            kr.a.x, kr.a.y, a.v, k_cache, v_cache);
    st.ropes.clear();
    return true;
  }
  // The cos/sin table of positions 0..ctx-1 on the device (uploaded when its key changes).
  static void rope_table(State& st, const ops::Rope::Config& c, std::size_t ctx) {
    ops::Rope::Config t = c;
    t.batch = 1;
    t.seq = ctx;
    t.offset = 0;
    ops::Rope::validate(t);
    const auto& k = st.rope_key;
    if (!(st.rope_valid && k.seq == t.seq && k.head_dim == t.head_dim && k.base == t.base)) {
      const ops::Rope::Table<float> tab = ops::Rope::table<float>(t);
      std::vector<float> both(tab.cos);
      both.insert(both.end(), tab.sin.begin(), tab.sin.end());
      st.rope_table.upload(both);
      st.rope_key = t;
      st.rope_valid = true;
    }
  }
  static void launch_rope(State& st, const ops::Rope::Config& c, const ops::Rope::FwdArgs<float>& a, std::size_t rows,
                          std::size_t ctx) {
    rope_table(st, c, ctx);
    launch::rope_rows(rows, c.heads, c.head_dim, c.layout == ops::RopeLayout::interleaved, ctx, st.rope_table.data(),
                      st.rows.data() + st.row_count, a.x, a.y);
  }
  static void store_rows_at(cuda::OpKernels&, State& st, const float* src, std::size_t ld, std::size_t rows,
                            std::size_t width, float* layer_cache, std::size_t ctx) {
    launch::store_rows_at(src, ld, rows, width, st.rows.data(), st.rows.data() + st.row_count, ctx, layer_cache);
  }
  // The cached attention of the pass's rows first_row.. (a.slot, a.pos: their
  // slots and positions, which the pass's rows on the device hold already:
  // nothing is uploaded, so a graph of the pass reads each pass's own).
  static void attention(cuda::OpKernels&, State& st, const ops::CachedAttention::Config& c,
                        const ops::CachedAttention::Args<float>& a, std::size_t first_row) {
    ops::CachedAttention::validate(c, a.slot, a.pos);
    const std::size_t n = st.row_count;
    if (first_row + c.rows > n || !std::equal(a.slot, a.slot + c.rows, st.rows_host.begin() + first_row) ||
        !std::equal(a.pos, a.pos + c.rows, st.rows_host.begin() + n + first_row))
      throw std::logic_error("decode: the cached attention's rows are not the pass's rows on the device");
    launch::CachedAttentionShape s;
    s.rows = c.rows;
    s.q_heads = c.q_heads;
    s.kv_heads = c.kv_heads;
    s.head_dim = c.head_dim;
    s.ctx = c.ctx;
    s.key_block = c.key_block;
    s.ldq = a.ldq;
    s.scale = ops::Attention::scale_of<float>(c.attention());
    launch::cached_attention(s, a.q, a.k_cache, a.v_cache, st.rows.data() + first_row,
                             st.rows.data() + n + first_row, a.o);
  }

  // CUDA graphs of the decode passes (model/decode.hpp, DecodeGraphs): on
  // unless LOCKSTEP_CUDA_GRAPHS=0, and never under the step profile (it times
  // each launch; a replay launches nothing from the host). The live audits
  // keep every launch they would audit: with a budget of 1 each audited launch
  // copies its operands to the host, which no capture survives (the pattern is
  // abandoned and stays launched, audited as before), and the decode GEMVs,
  // RoPE, cache writes and cached attention are not audited; with a smaller
  // budget an audit skipped while a pass is captured would be skipped in every
  // replay, so then there are no graphs.
  using Graph = cuda::graph::Graph;
  static bool graphs_on() {
    const cuda::audit::Options& a = cuda::audit::options();
    return cuda::graph::enabled() && !cuda::profile::active() && (!a.enabled || a.budget >= 1.0);
  }
  static bool early_launch() { return cuda::graph::early_launch(); }
  static void note_replayed_pass(double walk_s, double tail_s) { cuda::graph::note_replayed_pass(walk_s, tail_s); }
  static std::uint64_t memory_epoch() { return cuda::memory_epoch(); }
  static std::size_t host_waits() { return cuda::host_waits(); }
  static std::size_t allocations() { return cuda::allocation_count(); }
  static bool mutant_key_ignores_rows() { return cuda::graph::mutant() == cuda::graph::Mutant::key_ignores_rows; }
  static bool mutant_rows_not_restaged() { return cuda::graph::mutant() == cuda::graph::Mutant::rows_not_restaged; }
  static bool mutant_early_before_ids() { return cuda::graph::mutant() == cuda::graph::Mutant::early_before_ids; }
  static bool mutant_no_epoch_check() { return cuda::graph::mutant() == cuda::graph::Mutant::no_epoch_check; }
};
// ---- end of decode -----------------------------------------------------------

namespace {

// The start-up gates, once per process; what they proved, for report().
std::string g_gates_passed;
void gate_once() {
  static std::once_flag once;
  static std::string refused;
  std::call_once(once, [] {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      cuda::gate::require_all();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      g_gates_passed = fmt::format("start-up gates: {} kernel cases bit-identical to the CPU on a clean and a poisoned "
                                   "pool ({:.1f} s)",
                                   cuda::gate::all_cases().size(), s);
      // The int8 GEMMs' verdict and the race per shape class (int8_gemm.hpp): one line.
      g_gates_passed += "\n" + cuda::int8_report();
      // Which column quantizer the unit backward runs (col_quant.hpp): one line.
      g_gates_passed += "\n" + cuda::col_quantize_report();
    } catch (const std::exception& e) {
      refused = e.what();
    }
  });
  if (!refused.empty()) throw std::runtime_error(refused);
}

class CudaModel final : public KernelModel<cuda::OpKernels, DeviceStorage>, public StepStages {
 public:
  // The AdamW moments and the optimizer's table are made at the first step or
  // set_moments (ensure_table_current), for the parameters trainable then: a
  // base frozen before (LoRA) never holds moments on the device.
  explicit CudaModel(const ModelConfig& cfg) : KernelModel(cfg), dparams_(storage_.engine_params()) {}

  // A frozen BitNet base is held on the device as its codes (DeviceCodes)
  // unless LOCKSTEP_CUDA_BASE_CODES=0 (the base then stays F32 masters on the
  // device, the session-8 way; the same bits).
  bool runs_ternary_codes() const override { return cuda::OpKernels::runs_codes(); }

  // --- the step's stages (model/step_stages.hpp) on the device ---------------
  // One wait for the device per step, in finish(): the batch goes over in one
  // asynchronous copy, each micro-batch's mean loss stays on the device, and
  // the clip and the decision to update (finite loss and norm) are made there
  // (optim_launch.hpp); then the control block is read.
  StepStages* step_stages() override { return this; }

  void stage_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
                   std::int64_t seq, std::int64_t accum, int) override {
    if (accum < 1) throw std::invalid_argument(fmt::format("step: accum must be >= 1, got {}", accum));
    const auto micro = static_cast<std::size_t>(batch * seq);
    const auto A = static_cast<std::size_t>(accum);
    check_batch(inputs.subspan(0, std::min(inputs.size(), micro)),
                targets.subspan(0, std::min(targets.size(), micro)), batch, seq);
    if (inputs.size() != micro * A || targets.size() != inputs.size())
      throw std::invalid_argument(fmt::format("step: inputs ({}) and targets ({}) must hold accum*batch*seq = {} tokens",
                                              inputs.size(), targets.size(), micro * A));
    require_runnable_params();
    storage_.sync_device_values();
    ensure_table_current();
    step_inputs_ = inputs;
    step_targets_ = targets;
    step_batch_ = batch;
    step_seq_ = seq;
    losses_.resize(A);
    step_profile_.staged();
    kernels_.stage_step(inputs.data(), targets.data(), inputs.size());
  }

  void micro_batch(std::int64_t a, bool accumulate) override {
    const auto micro = static_cast<std::size_t>(step_batch_ * step_seq_);
    const auto off = static_cast<std::size_t>(a) * micro;
    kernels_.defer_loss_to = losses_.data() + a;
    try {
      engine_.run(step_inputs_.data() + off, step_targets_.data() + off, static_cast<std::size_t>(step_batch_),
                  static_cast<std::size_t>(step_seq_), true, accumulate);
    } catch (...) {
      kernels_.defer_loss_to = nullptr;
      kernels_.end_stage_step();
      throw;
    }
    kernels_.defer_loss_to = nullptr;
    storage_.device_wrote(true, false);
  }

  // One float each way (a replica's host staging waits for the device anyway).
  float micro_batch_loss(std::int64_t a) override {
    float x = 0;
    cuda::copy_to_host(&x, losses_.data() + a, sizeof x);
    return x;
  }
  void set_micro_batch_loss(std::int64_t a, float loss) override {
    cuda::copy_to_device(losses_.data() + a, &loss, sizeof loss);
  }

  TensorTable gradients() override { return device_table(true); }
  TensorTable weights() override { return device_table(false); }

  void update(float max_norm, const ops::AdamWScalars& s) override {
    kernels_.end_stage_step();
    launch_update(ops::accum_grad_scale(losses_.size()), max_norm, s, losses_.data(), losses_.size());
  }

  ops::StepDecision finish() override {
    std::array<float, launch::kControlSize> c{};
    control_.download(c.data());  // waits for the whole step
    step_profile_.finished();
    storage_.device_wrote(true, true);
    ops::StepDecision d;
    d.loss = c[launch::kLoss];
    d.norm = c[launch::kNorm];
    d.clip = c[launch::kClip];
    d.update = c[launch::kUpdate] != 0.0f;
    if (!d.update && !std::isfinite(d.loss)) d.norm = std::numeric_limits<float>::quiet_NaN();
    return d;
  }

  std::string report() const override {
    const cuda::audit::Stats s = cuda::audit::stats();
    const std::string gates = g_gates_passed.empty() ? "" : g_gates_passed + "\n";
    if (!cuda::audit::options().enabled) return gates + "audits: off";
    const double budget = cuda::audit::options().budget;
    const std::string skipped =
        budget < 1.0 ? fmt::format(" ({} more skipped: over the {:g}% time budget)", s.skipped, budget * 100) : "";
    return gates + fmt::format("audits: {} launches{}, {} cells recomputed on the CPU, {} mismatches, {:.2f} s spent "
                               "auditing",
                               s.launches, skipped, s.cells, s.mismatches, s.seconds);
  }

  // --- the optimizer on the device -------------------------------------------
  void set_moments(const std::vector<std::vector<float>>& m, const std::vector<std::vector<float>>& v) override {
    storage_.sync_device_values();
    ensure_table_current();
    if (m.size() != params_.size() || v.size() != params_.size())
      throw std::invalid_argument("set_moments: one moment vector per parameter expected");
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const std::size_t want = params_[i].trainable ? params_[i].value.size() : 0;
      if (m[i].size() != want || v[i].size() != want)
        throw std::invalid_argument("set_moments: moments of '" + params_[i].name + "' have the wrong size");
      m_[i].upload(m[i]);
      v_[i].upload(v[i]);
    }
  }
  void get_moments(std::vector<std::vector<float>>& m, std::vector<std::vector<float>>& v) const override {
    if (!table_built_) {  // no step yet: the moments are zero
      m.resize(params_.size());
      v.resize(params_.size());
      for (std::size_t i = 0; i < params_.size(); ++i) {
        m[i].assign(params_[i].trainable ? params_[i].value.size() : 0, 0.0f);
        v[i] = m[i];
      }
      return;
    }
    require_table_current();
    m.resize(params_.size());
    v.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      m[i] = m_[i].download();
      v[i] = v_[i].download();
    }
  }

 private:
  // LOCKSTEP_CUDA_PROFILE=FILE.json[:STEP]: that step runs under the step profile (profile.hpp).
  cuda::profile::StepOnRequest step_profile_;

  // The trainer's host loop (trainer.cpp, optim.cpp) on the device, step for
  // step: grads *= grad_scale, per-tensor sums of squares, their canonical
  // sum, sqrt, the clip scale, AdamW with the clip applied in place — all
  // skipped by the kernels themselves when the loss or the norm is not
  // finite. Nothing waits: finish() reads the control block.
  void launch_update(float grad_scale, float max_norm, const ops::AdamWScalars& s, const float* losses,
                     std::size_t accum) {
    if (grad_scale != 1.0f) launch::scale_all(table_.data(), table_count_, max_n_, grad_scale);
    launch::grad_norms(table_.data(), table_count_, total_chunks_, partials_.data(), norms_.data());
    launch::step_control(norms_.data(), table_count_, losses, accum, max_norm, control_.data());
    launch::adamw_all(table_.data(), table_count_, max_n_, control_.data(), s);
  }

  TensorTable device_table(bool grads) {
    storage_.ensure_allocated();
    TensorTable t;
    t.on_device = true;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].trainable)
        t.tensors.push_back({&params_[i].name, grads ? dparams_[i].grad.data() : dparams_[i].value.data(),
                             dparams_[i].value.size()});
    return t;
  }

  // No update was made and the norm is not finite: name the tensor as
  // train::clip_grad_norm does (the first non-finite gradient in slot order).
  [[noreturn]] void refuse_non_finite_gradient(float norm) override {
    const std::vector<float> per_tensor = norms_.download();
    for (std::size_t k = 0; k < per_tensor.size(); ++k)
      if (!std::isfinite(per_tensor[k])) {
        const std::size_t i = slots_[k];
        for (float x : dparams_[i].grad.download())
          if (!std::isfinite(x))
            throw std::runtime_error(fmt::format("non-finite gradient ({}) in '{}': the step is refused", x,
                                                 params_[i].name));
      }
    throw std::runtime_error(fmt::format("gradient norm overflowed to {}: the step is refused", norm));
  }

  // What the optimizer table was built for: per parameter, trainable and decay.
  std::vector<int> table_key() const {
    std::vector<int> k;
    for (const Param& p : params_) k.push_back((p.trainable ? 2 : 0) + (p.decay ? 1 : 0));
    return k;
  }
  // The moments are read only against the list the table was built for.
  void require_table_current() const {
    if (table_key() != table_key_)
      throw std::logic_error("the CUDA model's moments: its parameter list changed since its last step (adapter "
                             "tensors added or parameters frozen); a step or set_moments rebuilds the tables first");
  }
  // A parameter list changed through params() since the table was built
  // (LoRA's adapter tensors appended and the base frozen, lora_params.hpp; the
  // device list is reconciled before this, DeviceStorage::sync_device_values):
  // the moments follow (a tensor that stays trainable keeps them, a new one
  // starts at zero, a frozen one has none) and the table is built again.
  void ensure_table_current() {
    if (table_built_ && table_key() == table_key_) return;
    m_.resize(params_.size());
    v_.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const std::size_t n = params_[i].trainable ? params_[i].value.size() : 0;
      if (m_[i].size() == n && v_[i].size() == n) continue;
      if (n == 0) {
        cuda::DeviceBuffer<float>().swap(m_[i]);
        cuda::DeviceBuffer<float>().swap(v_[i]);
      } else {
        m_[i].assign(n, 0.0f);
        v_[i].assign(n, 0.0f);
      }
    }
    build_table();
  }

  // The optimizer kernels' table of trainable tensors (device pointers never
  // move: the buffers are sized once, here, or when the list changes:
  // ensure_table_current).
  void build_table() {
    table_built_ = true;
    table_key_ = table_key();
    slots_.clear();
    max_n_ = 0;
    std::vector<launch::TensorSlot> t;
    std::size_t chunk = 0;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i].trainable) continue;
      slots_.push_back(i);
      const std::size_t n = dparams_[i].value.size();
      t.push_back({dparams_[i].value.data(), dparams_[i].grad.data(), m_[i].data(), v_[i].data(), n, chunk,
                   params_[i].decay ? 1 : 0});
      chunk += launch::chunks_of(n);
      max_n_ = std::max(max_n_, n);
    }
    table_count_ = t.size();
    total_chunks_ = chunk;
    table_.upload(t);
    partials_.resize(std::max<std::size_t>(1, total_chunks_));
    norms_.resize(std::max<std::size_t>(1, table_count_));
    control_.resize(launch::kControlSize);
  }

  std::vector<DeviceParam>& dparams_;  // storage_'s device parameters
  std::vector<cuda::DeviceBuffer<float>> m_, v_;  // AdamW moments (empty for frozen parameters)
  // The optimizer's device state: the tensor table, the per-tensor sums of
  // squares and their chunk partials, the control block, the micro-batch losses.
  cuda::DeviceBuffer<launch::TensorSlot> table_;
  std::vector<std::size_t> slots_;  // table row -> parameter index
  std::vector<int> table_key_;  // table_key() when the table was built
  bool table_built_ = false;
  std::size_t table_count_ = 0, total_chunks_ = 0, max_n_ = 0;
  cuda::DeviceBuffer<float> norms_, partials_, control_, losses_;
  // The staged step's batch (stage_batch .. finish).
  std::span<const std::int32_t> step_inputs_, step_targets_;
  std::int64_t step_batch_ = 0, step_seq_ = 0;
};

}  // namespace

bool cuda_device_available(std::string* why) {
  std::string reason;
  if (cuda::available(&reason)) return true;
  if (why) *why = "no usable CUDA device here (" + reason + "); --device cpu computes the same bits";
  return false;
}

std::unique_ptr<Model> make_cuda_model(const ModelConfig& cfg, const std::string& audit, double audit_budget) {
  std::string why;
  if (!cuda_device_available(&why)) throw std::runtime_error("--device cuda: " + why);
  gate_once();
  cuda::audit::Options o = cuda::audit::options();
  o.enabled = audit != "off";
  o.on_mismatch = audit == "warn" ? cuda::audit::OnMismatch::warn : cuda::audit::OnMismatch::stop;
  o.budget = audit_budget;
  cuda::audit::configure(o);
  return std::make_unique<CudaModel>(cfg);
}

}  // namespace lockstep::model
