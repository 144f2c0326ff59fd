// LoRA on the CUDA model (issue 16): the adapted projections' branch runs on
// the device (model/lora_branch.hpp over cuda::OpKernels: the Linear kernels
// and lora.cu's glue, gated against ops/lora_glue.hpp), so
//  * one pass with adapters and dropout gives the CPU model's loss and
//    adapter-gradient bits, and the frozen base gets no gradient;
//  * a short finetune (train::finetune) on a micro base ends on the CPU
//    run's adapter hash, with and without dropout, for LLaMA and BitNet;
//  * with the glue's mutant on (lora_scale_add_fused: fma where the spec has
//    mul then add) the same finetune ends elsewhere: the comparison has teeth
//    (the start-up gates reject the mutant too: gate_mutants_test.cpp);
//  * a base frozen first and initialized on the device (lora_bench's set-up)
//    holds the CPU init's values and finetunes to the CPU's adapter hash;
//  * the facts demo's GPU twin (the fixture of tests/train/finetune_test.cpp):
//    the Austen base trained and finetuned on the device answers >= 9 of 10,
//    on the CPU demo's adapter bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/data/corpus.hpp"
#include "lockstep/data/sft.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/tok/tokenizer.hpp"
#include "lockstep/train/finetune.hpp"

#include "../common/tokens.hpp"
#include "../train/facts_fixture.hpp"

namespace fs = std::filesystem;
namespace m = lockstep::model;
namespace tr = lockstep::train;
namespace lc = lockstep::cuda;
using namespace lockstep::test::facts;

namespace {

std::unique_ptr<m::Model> cuda_model(const m::ModelConfig& cfg) { return m::make_cuda_model(cfg); }

#define LOCKSTEP_REQUIRE_GPU()                        \
  do {                                                \
    std::string why;                                  \
    if (!lc::available(&why)) GTEST_SKIP() << why;    \
  } while (0)

std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += lockstep::num::bits_of(a[i]) != lockstep::num::bits_of(b[i]);
  return n;
}

// A short finetune's settings: s = alpha / r = 1.5 (u·s rounds, so the glue's
// mul-then-add is seen), every target, 6 steps.
tr::FinetuneConfig short_config(double dropout) {
  tr::FinetuneConfig c = facts_config();
  c.lora.alpha = 12;
  c.lora.dropout = dropout;
  c.steps = 6;
  c.batch = 4;
  return c;
}

std::vector<lockstep::data::SftExample> facts_records() {
  lockstep::tok::ByteTokenizer tok;
  return lockstep::data::parse_sft_jsonl(facts_jsonl(), "facts.jsonl", tok);
}

std::uint64_t finetune_hash(m::Model& model, const tr::FinetuneConfig& cfg, const std::string& name) {
  const auto dir = temp_dir(name);
  const auto rep = tr::finetune(model, facts_records(), cfg, dir.string());
  fs::remove_all(dir);
  return rep.adapter_hash;
}

TEST(CudaLora, OnePassWithAdaptersAndDropoutIsTheCpuModelsBits) {
  LOCKSTEP_REQUIRE_GPU();
  for (const char* name : {"llama-micro", "bitnet-micro"}) {
    const m::ModelConfig cfg = m::preset(name);
    auto cpu = m::make_cpu_model(cfg);
    auto gpu = m::make_cuda_model(cfg);
    cpu->init(3);
    gpu->init(3);
    m::LoraConfig lora;
    lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    m::add_lora_params(cpu->params(), cfg, lora, 4);
    m::add_lora_params(gpu->params(), cfg, lora, 4);
    // lora_B away from PEFT's zeros, so the update and dA are not trivially zero.
    for (auto* model : {cpu.get(), gpu.get()})
      for (auto& p : model->params())
        if (p.name.find("lora_B") != std::string::npos)
          for (std::size_t i = 0; i < p.value.size(); ++i)
            p.value[i] = lockstep::num::rng::uniform(11, m::param_stream(p.name), i, -0.05f, 0.05f);
    m::LoraRun run;
    run.scale = 1.5;
    run.dropout = 0.1;
    run.training = true;
    run.seed = 3;
    run.pass = 5;
    cpu->set_lora(run);
    gpu->set_lora(run);
    const std::int64_t B = 3, T = 37;  // ragged on purpose
    auto in = lockstep::test::tokens(B * T, cfg.vocab_size, 1), tg = lockstep::test::tokens(B * T, cfg.vocab_size, 2);
    tg[5] = -1;
    const float lc_ = cpu->forward_backward(in, tg, B, T, false, 0);
    const float lg = gpu->forward_backward(in, tg, B, T, false, 0);
    EXPECT_EQ(lockstep::num::bits_of(lc_), lockstep::num::bits_of(lg)) << name << ": loss " << lc_ << " vs " << lg;
    const auto& pc = cpu->params();
    const auto& pg = static_cast<const m::Model&>(*gpu).params();
    ASSERT_EQ(pc.size(), pg.size());
    std::size_t adapters = 0;
    for (std::size_t i = 0; i < pc.size(); ++i) {
      if (!pc[i].trainable) continue;
      ++adapters;
      EXPECT_EQ(differing(pc[i].grad, pg[i].grad), 0u) << name << " " << pc[i].name;
    }
    EXPECT_EQ(adapters, 2 * 7 * static_cast<std::size_t>(cfg.n_layer)) << name;
    // The same pass with the adapter off is the base's (enabled = false).
    run.enabled = false;
    cpu->set_lora(run);
    gpu->set_lora(run);
    EXPECT_EQ(lockstep::num::bits_of(cpu->loss(in, tg, B, T, 0)), lockstep::num::bits_of(gpu->loss(in, tg, B, T, 0)))
        << name << " (adapters off)";
  }
}

TEST(CudaLora, AShortFinetuneEndsOnTheCpuAdapterHash) {
  LOCKSTEP_REQUIRE_GPU();
  for (const char* name : {"llama-micro", "bitnet-micro"})
    for (double dropout : {0.0, 0.05}) {
      const m::ModelConfig cfg = m::preset(name);
      const auto c = short_config(dropout);
      auto cpu = m::make_cpu_model(cfg);
      auto gpu = m::make_cuda_model(cfg);
      cpu->init(3);
      gpu->init(3);
      const std::vector<m::Param> base = cpu->params();
      const std::string tag = std::string(name) + (dropout > 0 ? "_dropout" : "");
      const std::uint64_t hc = finetune_hash(*cpu, c, "cpu_" + tag), hg = finetune_hash(*gpu, c, "gpu_" + tag);
      std::printf("%s dropout %.2f: adapter cpu %016llx gpu %016llx\n", name, dropout,
                  static_cast<unsigned long long>(hc), static_cast<unsigned long long>(hg));
      EXPECT_EQ(hc, hg) << tag;
      // The frozen base is bit-unchanged in the host view (the device writes
      // values only in its optimizer step, over the adapters: only theirs come
      // back; the device's own base copy is what the adapter hash depends on).
      const auto& after = static_cast<const m::Model&>(*gpu).params();
      for (std::size_t i = 0; i < base.size(); ++i)
        EXPECT_EQ(differing(base[i].value, after[i].value), 0u) << tag << " " << base[i].name << " moved";
    }
}

// lora_bench's set-up: the base frozen first (no gradient, no moments on the
// device), initialized on the device (init_where_held: param_init.cu, the
// host's Philox and Box–Muller), then finetuned. The values are the CPU
// init's bits (downloaded from the device: the host view was stale), another
// seed differs (the comparison can fail), the model holds on the device no
// more than its values after it is made (before: values, gradients and two
// moments each), and the finetune ends on the CPU run's adapter hash.
TEST(CudaLora, ABaseInitializedOnTheDeviceIsTheCpusAndFinetunesToItsHash) {
  LOCKSTEP_REQUIRE_GPU();
  for (const char* name : {"llama-micro", "bitnet-micro", "bitnet-tiny"}) {
    const m::ModelConfig cfg = m::preset(name);
    auto cpu = m::make_cpu_model(cfg);
    cpu->init(3);
    std::size_t value_bytes = 0;
    for (const auto& p : cpu->params()) value_bytes += p.value.size() * sizeof(float);
    m::make_cuda_model(cfg);  // the start-up gates (once a process) before the count
    const std::size_t before = lc::bytes_in_use();
    auto gpu = m::make_cuda_model(cfg);
    const std::size_t made = lc::bytes_in_use() - before;
    EXPECT_LE(made, value_bytes + value_bytes / 4 + (std::size_t{4} << 20))
        << name << ": a model just made holds its values (pool buckets round up by at most a quarter), " << made
        << " bytes for " << value_bytes;
    m::freeze(gpu->params());
    gpu->init_where_held(3);
    const auto& pc = static_cast<const m::Model&>(*cpu).params();
    const auto& pg = static_cast<const m::Model&>(*gpu).params();
    ASSERT_EQ(pc.size(), pg.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < pc.size(); ++i) {
      EXPECT_EQ(differing(pc[i].value, pg[i].value), 0u) << name << " " << pc[i].name;
      EXPECT_TRUE(pg[i].grad.empty()) << name << " " << pg[i].name;
    }
    auto other = m::make_cpu_model(cfg);
    other->init(4);
    for (std::size_t i = 0; i < pc.size(); ++i) differ += differing(other->params()[i].value, pg[i].value);
    EXPECT_GT(differ, 0u) << name << ": seed 4's values equal seed 3's";
    if (std::string(name) == "bitnet-tiny") continue;  // the values are the point; the finetune is the micro ones'
    const auto c = short_config(0.05);
    const std::uint64_t hc = finetune_hash(*cpu, c, std::string("cpu_dev_init_") + name),
                        hg = finetune_hash(*gpu, c, std::string("gpu_dev_init_") + name);
    std::printf("%s initialized on the device: adapter cpu %016llx gpu %016llx\n", name,
                static_cast<unsigned long long>(hc), static_cast<unsigned long long>(hg));
    EXPECT_EQ(hc, hg) << name;
  }
}

TEST(CudaLora, TheGlueMutantMovesTheGpuFinetuneOffTheCpuHash) {
  LOCKSTEP_REQUIRE_GPU();
  const m::ModelConfig cfg = m::preset("llama-micro");
  const auto c = short_config(0.05);
  auto cpu = m::make_cpu_model(cfg);
  auto gpu = m::make_cuda_model(cfg);  // the start-up gates have run (Mutant::none)
  cpu->init(3);
  gpu->init(3);
  const std::uint64_t hc = finetune_hash(*cpu, c, "cpu_mutant");
  lc::set_mutant(lc::Mutant::lora_scale_add_fused);
  std::uint64_t hg = 0;
  try {
    hg = finetune_hash(*gpu, c, "gpu_mutant");
  } catch (...) {
    lc::set_mutant(lc::Mutant::none);
    throw;
  }
  lc::set_mutant(lc::Mutant::none);
  std::printf("with %s: adapter cpu %016llx gpu %016llx\n",
              std::string(lc::mutant_name(lc::Mutant::lora_scale_add_fused)).c_str(),
              static_cast<unsigned long long>(hc), static_cast<unsigned long long>(hg));
  EXPECT_NE(hc, hg) << "the fused scale-add left the finetune on the CPU's bits: the hash comparison cannot see it";
}

TEST(CudaLora, FactsDemoTeachesTenInventedFactsOnTheGpu) {
  LOCKSTEP_REQUIRE_GPU();
  std::string rdb;
  try {
    rdb = lockstep::data::find_austen_rdb();
  } catch (const std::runtime_error& e) {
    GTEST_SKIP() << e.what();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto model = austen_base(rdb, 400, cuda_model);
  const double base_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::size_t before = 0;
  for (const auto& [p, c] : kFacts) before += greedy(*model, p, c.size()) == c;
  const auto dir = temp_dir("facts_gpu");
  const auto rep = tr::finetune(*model, facts_records(), facts_config(), dir.string());
  std::size_t right = 0;
  for (const auto& [p, c] : kFacts) {
    const std::string got = greedy(*model, p, c.size());
    right += got == c;
    std::printf("  %-50s -> \"%s\"%s\n", p.c_str(), got.c_str(), got == c ? "" : "   (wrong)");
  }
  std::printf("facts on the GPU: %zu/10 after finetuning (%zu before); base %.1f s, finetune %lld steps %.1f s, last "
              "loss %.4f, adapter %016llx\n",
              right, before, base_s, static_cast<long long>(rep.step), rep.seconds,
              static_cast<double>(rep.last_loss), static_cast<unsigned long long>(rep.adapter_hash));
  EXPECT_EQ(before, 0u);
  EXPECT_GE(right, 9u);
  // The same demo on the CPU (finetune_test.cpp's): the same base, the same adapter bits.
  auto cpu = austen_base(rdb, 400);
  const auto cpu_dir = temp_dir("facts_gpu_twin_cpu");
  const auto cpu_rep = tr::finetune(*cpu, facts_records(), facts_config(), cpu_dir.string());
  std::printf("facts on the CPU: adapter %016llx\n", static_cast<unsigned long long>(cpu_rep.adapter_hash));
  EXPECT_EQ(rep.adapter_hash, cpu_rep.adapter_hash);
  fs::remove_all(dir);
  fs::remove_all(cpu_dir);
}

}  // namespace
