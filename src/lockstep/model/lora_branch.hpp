// The LoRA branch of an adapted projection, run by the engine
// (transformer.hpp's proj_fwd / proj_bwd) on any kernel set: the host ones
// (the CPU kernels, the spec kernels in float and double) and the CUDA set,
// whose buffers live on the device. docs/LORA.md.
//
// For the projection's input x [N, K], output y [N, M], adapter A [r, K],
// B [M, r] and s = T(scale) (one rounding), in ops::LoraLinear's expression
// (ops/lora.hpp) made of the Linear kernels (the same GEMM chains):
//   xd = x, or with dropout p (training): xd[i] = keep(i) ? x[i] * q : 0,
//        q = T(1 / (1 - p)), keep(i) = uniform(seed, stream, i) >= p
//        (model/lora_params.hpp: stream from the pass and the module)
//   h  = Linear(xd, A)   [N, r]     chain_k(xd·A)
//   u  = Linear(h, B)    [N, M]     chain_j(h·B)
//   y  = y + u * s                  (y holds the base's output)
// backward, given dy (the base's backward has written dx):
//   du = dy * s
//   dh, dB = Linear backward(x = h, w = B, dy = du)      chain_m(du·B), chain_n(du·h)
//   dxd, dA = Linear backward(x = xd, w = A, dy = dh)    chain_m(dh·A), chain_n(dh·xd)
//   dxd[i] = keep(i) ? dxd[i] * q : 0   (dropout only; the mask recomputed from its counter)
//   dx = dx + dxd
// Without dropout this is ops::LoraLinear::forward / backward bit for bit
// (tests/model/lora_test.cpp checks it); the base weight gets no gradient.
// The element-wise steps are ops/lora_glue.hpp's: its loops on a host kernel
// set, the kernel set's own lora_scale_add / lora_scale / lora_dropout where
// it has them (cuda::OpKernels: lora.cu, gated against those loops). Without
// dropout the backward reads x itself, the input the base's backward reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lockstep/model/model.hpp"
#include "lockstep/ops/linear.hpp"
#include "lockstep/ops/lora_glue.hpp"

namespace lockstep::model {

std::uint64_t lora_dropout_stream(std::uint64_t pass, const std::string& module);

// T: the scalar; Buf: the kernel set's buffer of T (std::vector<T> on the host).
template <class T, class Buf = std::vector<T>>
class LoraBranch {
 public:
  struct Slot {
    std::size_t w = 0, a = 0, b = 0;  // parameter indices: base weight, lora_A, lora_B
    std::size_t rank = 0;
    std::string module;
    Buf xd, h;  // kept from the forward for the backward (xd: with dropout only)
    bool dropped = false;  // the last forward applied dropout
    std::uint64_t stream = 0;
  };

  // Finds the adapter tensors by name (module + ".lora_A.weight" / ".lora_B.weight")
  // whenever the parameter list changed length. `params`: the engine's.
  template <class PT>
  void prepare(const std::vector<PT>& params, const LoraRun* run) {
    run_ = run;
    if (params.size() == seen_) return;
    seen_ = params.size();
    slots_.clear();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string& n = params[i].name;
      static constexpr std::string_view kA = ".lora_A.weight";
      if (n.size() <= kA.size() || n.compare(n.size() - kA.size(), kA.size(), kA) != 0) continue;
      Slot s;
      s.module = n.substr(0, n.size() - kA.size());
      s.a = i;
      s.w = find(params, s.module + ".weight");
      s.b = find(params, s.module + ".lora_B.weight");
      s.rank = static_cast<std::size_t>(params[i].shape.at(0));
      slots_.push_back(std::move(s));
    }
  }
  bool any() const { return !slots_.empty(); }
  bool active() const { return !slots_.empty() && run_ != nullptr && run_->enabled; }

  // The slot of the projection whose base weight is at `w` (nullptr: not adapted).
  template <class E>
  Slot* slot_for(const E& e, const T* w) {
    if (!active()) return nullptr;
    for (Slot& s : slots_)
      if (e.P(s.w) == w) return &s;
    return nullptr;
  }

  template <class E>
  void forward(E& e, Slot& s, std::size_t N, std::size_t K, std::size_t M, const T* x, T* y) {
    const std::size_t r = s.rank;
    const T* xin = x;
    s.dropped = dropping();
    if (s.dropped) {
      s.stream = lora_dropout_stream(run_->pass, s.module);
      s.xd.resize(N * K);
      dropout(e.k_, N * K, x, s.xd.data(), s.stream);
      xin = s.xd.data();
    }
    s.h.resize(N * r);
    u_.resize(N * M);
    e.k_.template forward<ops::Linear>({N, K, r, false}, {.x = xin, .w = e.P(s.a), .b = nullptr, .y = s.h.data()});
    e.k_.template forward<ops::Linear>({N, r, M, false}, {.x = s.h.data(), .w = e.P(s.b), .b = nullptr, .y = u_.data()});
    const T sc = static_cast<T>(run_->scale);
    if constexpr (requires { e.k_.lora_scale_add(N * M, y, u_.data(), sc); }) {
      e.k_.lora_scale_add(N * M, y, u_.data(), sc);
    } else {
      // The host loop reads host memory: a kernel set over device buffers
      // (a wrapper of the CUDA set, as the decode mode's) must bring its own.
      static_assert(kHostBuffers<E>, "LoRA: a kernel set on device buffers needs lora_scale_add");
      ops::lora_glue::scale_add(N * M, y, u_.data(), sc);
    }
  }

  // x: the projection's input, as the forward read it.
  template <class E>
  void backward(E& e, Slot& s, std::size_t N, std::size_t K, std::size_t M, const T* x, const T* dy, T* dx) {
    const std::size_t r = s.rank;
    const T sc = static_cast<T>(run_->scale);
    du_.resize(N * M);
    dh_.resize(N * r);
    dxd_.resize(N * K);
    if constexpr (requires { e.k_.lora_scale(N * M, du_.data(), dy, sc); })
      e.k_.lora_scale(N * M, du_.data(), dy, sc);
    else
      ops::lora_glue::scale(N * M, du_.data(), dy, sc);
    e.k_.template backward<ops::Linear>({N, r, M, false}, {.x = s.h.data(), .w = e.P(s.b), .dy = du_.data(),
                                                           .dx = dh_.data(), .dw = e.G(s.b), .db = nullptr});
    e.k_.template backward<ops::Linear>({N, K, r, false}, {.x = s.dropped ? s.xd.data() : x, .w = e.P(s.a),
                                                           .dy = dh_.data(), .dx = dxd_.data(), .dw = e.G(s.a),
                                                           .db = nullptr});
    if (s.dropped) dropout(e.k_, N * K, dxd_.data(), dxd_.data(), s.stream);
    e.k_.add_into(N * K, dx, dxd_.data());
  }

 private:
  template <class E>  // (of E: checked where a branch is instantiated)
  static constexpr bool kHostBuffers = std::is_same_v<Buf, std::vector<T>> && sizeof(E) > 0;
  bool dropping() const { return run_->training && run_->dropout > 0.0; }
  // out = keep ? in * q : 0 (ops/lora_glue.hpp), on the kernel set's storage.
  template <class Kernels>
  void dropout(Kernels& k, std::size_t n, const T* in, T* out, std::uint64_t stream) const {
    const float p = static_cast<float>(run_->dropout);  // compared in float in every engine: one mask
    const T q = static_cast<T>(1.0 / (1.0 - run_->dropout));
    if constexpr (requires { k.lora_dropout(n, in, out, run_->seed, stream, p, q); })
      k.lora_dropout(n, in, out, run_->seed, stream, p, q);
    else
      ops::lora_glue::dropout(n, in, out, run_->seed, stream, p, q);
  }
  template <class PT>
  static std::size_t find(const std::vector<PT>& params, const std::string& name) {
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].name == name) return i;
    throw std::invalid_argument("LoRA: adapter tensor without its base or partner: no parameter named " + name);
  }

  const LoraRun* run_ = nullptr;
  std::size_t seen_ = 0;
  std::vector<Slot> slots_;
  Buf u_, du_, dh_, dxd_;
};

}  // namespace lockstep::model
