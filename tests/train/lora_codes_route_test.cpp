// The engine's codes route for a parameter type that is not the host's Param
// (session 10): the CUDA model's engine reads a TERNARY2 weight through its
// own frozen_value type (model/cuda_model.cpp's DeviceCodes: bytes().data(),
// scales(), numel()), not tensor::Storage, so transformer.hpp's codes_at
// returns the parameter type's own. Here a kernel model over the CPU kernels
// whose storage mirrors the host view the way the CUDA model's does (values
// copied before a pass, a TERNARY2 parameter held as its bytes and scale in a
// codes type of its own, no F32 value; gradients copied back): a finetune on
// a bitnet base held as codes ends on the CPU model's adapter hash, the
// mirror holds no floats for the 14 projections, and a codes type that
// reports another scale (planted, kept: the mirror's scale times 2) moves the
// hash. The device's storage itself runs only on a GPU (CudaLoraCodes.*).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/data/sft.hpp"
#include "lockstep/model/kernel_model.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/tensor/storage.hpp"
#include "lockstep/train/finetune.hpp"

namespace m = lockstep::model;
namespace tr = lockstep::train;
namespace fs = std::filesystem;

namespace {

bool g_plant_scale = false;  // the planted bug: the mirror's codes report twice their scale

// A TERNARY2 weight as a storage other than the host's holds it.
struct MirrorCodes {
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }
  const std::vector<float>& scales() const { return scales_; }
  std::size_t numel() const { return numel_; }
  void copy(const lockstep::tensor::Storage& s) {
    bytes_.assign(s.bytes().begin(), s.bytes().end());  // the same size again: the same address
    scales_.assign(s.scales().begin(), s.scales().end());
    if (g_plant_scale) scales_[0] *= 2.0f;
    numel_ = s.numel();
  }
  std::vector<std::uint8_t> bytes_;
  std::vector<float> scales_;
  std::size_t numel_ = 0;
};

struct MirrorParam {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> value, grad;
  bool decay = true;
  bool trainable = true;
  lockstep::tensor::DType dtype = lockstep::tensor::DType::f32;
  MirrorCodes frozen_value;
};

// Mirrors the host view before every pass (as DeviceStorage::reconcile and
// sync_device_values do) and hands the gradients back after it.
class MirrorStorage {
 public:
  using EngineParam = MirrorParam;
  static constexpr const char* kName = "the mirror model";
  static constexpr bool kRunsCodes = true;
  explicit MirrorStorage(std::vector<m::Param>& host) : host_(host) { before_pass(false); }
  std::vector<MirrorParam>& engine_params() { return mirror_; }
  void host_view_read() const {}
  void host_view_write() {}
  void host_written() {}
  void before_pass(bool) {
    mirror_.resize(host_.size());
    for (std::size_t i = 0; i < host_.size(); ++i) {
      const m::Param& h = host_[i];
      MirrorParam& d = mirror_[i];
      d.name = h.name;
      d.shape = h.shape;
      d.decay = h.decay;
      d.trainable = h.trainable;
      d.dtype = h.dtype;
      if (h.dtype == lockstep::tensor::DType::ternary2) {
        std::vector<float>().swap(d.value);
        d.frozen_value.copy(h.frozen_value);
      } else {
        d.value = h.value;
      }
      d.grad.assign(h.trainable ? h.grad.size() : 0, 0.0f);
    }
  }
  void after_pass(bool wrote_grads, const char*) {
    if (!wrote_grads) return;
    for (std::size_t i = 0; i < host_.size(); ++i)
      if (host_[i].trainable) host_[i].grad = mirror_[i].grad;
  }
  std::size_t floats_held_as_codes() const {
    std::size_t n = 0, codes = 0;
    for (const MirrorParam& p : mirror_)
      if (p.dtype == lockstep::tensor::DType::ternary2) {
        n += p.value.size();
        ++codes;
      }
    return n + (codes == 0 ? 1 : 0);  // none held as codes counts as a failure too
  }

 private:
  std::vector<m::Param>& host_;
  std::vector<MirrorParam> mirror_;
};

class MirrorModel final : public m::KernelModel<lockstep::cpu::OpKernels, MirrorStorage> {
 public:
  using KernelModel::KernelModel;
  std::size_t floats_held_as_codes() const { return storage_.floats_held_as_codes(); }
  std::size_t codes_held() const {
    std::size_t n = 0;
    for (const auto& p : params_) n += p.dtype == lockstep::tensor::DType::ternary2;
    return n;
  }
};

std::vector<lockstep::data::SftExample> records(std::int64_t vocab) {
  std::vector<lockstep::data::SftExample> out(4);
  for (std::size_t r = 0; r < out.size(); ++r) {
    for (std::uint64_t t = 0; t < 20 + 3 * r; ++t)
      out[r].tokens.push_back(
          static_cast<std::int32_t>(lockstep::num::rng::bits32(5, r, t) % static_cast<std::uint32_t>(vocab)));
    out[r].scored.assign(out[r].tokens.size(), 1);
    out[r].scored[0] = out[r].scored[1] = 0;  // a masked prompt
    out[r].line = r + 1;
  }
  return out;
}

tr::FinetuneConfig config() {
  tr::FinetuneConfig c;
  c.lora.rank = 4;
  c.lora.alpha = 12;
  c.lora.dropout = 0.05;
  c.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  c.batch = 2;
  c.steps = 3;
  c.lr = 1e-2;
  c.threads = 1;
  c.log_every = 1000;
  return c;
}

std::uint64_t finetune_hash(m::Model& model, const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_codes_route_" + tag + "_" + std::to_string(::getpid()));
  const auto rep = tr::finetune(model, records(model.config().vocab_size), config(), dir.string());
  fs::remove_all(dir);
  return rep.adapter_hash;
}

}  // namespace

TEST(LoraCodesRoute, AnotherParamTypesCodesRunTheEnginesCodesRoute) {
  const m::ModelConfig cfg = m::preset("bitnet-micro");
  auto cpu = m::make_cpu_model(cfg);
  cpu->init(3);
  const std::uint64_t want = finetune_hash(*cpu, "cpu");
  MirrorModel mirror(cfg);
  mirror.init(3);
  EXPECT_EQ(finetune_hash(mirror, "mirror"), want);
  EXPECT_EQ(mirror.codes_held(), 14u);
  EXPECT_EQ(mirror.floats_held_as_codes(), 0u) << "a weight held as codes kept floats in the mirror";
  // Planted: the mirror's codes report another scale; the route reads it, so the hash moves.
  g_plant_scale = true;
  MirrorModel planted(cfg);
  planted.init(3);
  const std::uint64_t moved = finetune_hash(planted, "planted");
  g_plant_scale = false;
  EXPECT_NE(moved, want) << "the codes route did not read the mirror's scale";
}
