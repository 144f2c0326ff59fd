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
//  * a BitNet base held on the device as its codes (session 10, docs/LORA.md
//    "The base as codes on the CUDA model"): the CUDA finetune on TERNARY2
//    codes (cuda::OpKernels::bitlinear_codes_*) ends on the CPU finetune's
//    adapter hash and on the CUDA finetune's on F32 masters, with Ŵ
//    re-quantized in the backward (the default) and kept
//    (LOCKSTEP_CUDA_BITLINEAR_KEEP_W's old way); the host view holds the
//    masters' own codes; and the device pool's high-water falls by what is no
//    longer held (Ŵ; the masters less their codes, and x̂), at bitnet-tiny's
//    shapes with 8 blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/device_pool.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/data/corpus.hpp"
#include "lockstep/data/sft.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/storage.hpp"
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
      // A BitNet base's projections are held as codes since session 10
      // (hold_frozen_ternary_as_codes on the CUDA model): the masters' own codes and scale.
      const auto& after = static_cast<const m::Model&>(*gpu).params();
      for (std::size_t i = 0; i < base.size(); ++i) {
        if (after[i].dtype == lockstep::tensor::DType::ternary2) {
          const auto q = lockstep::ops::quantize_ternary(base[i].value.data(), base[i].value.size());
          EXPECT_EQ(lockstep::tensor::codes_of(after[i].frozen_value), q.q) << tag << " " << base[i].name;
          EXPECT_EQ(lockstep::num::bits_of(after[i].frozen_value.scales()[0]), lockstep::num::bits_of(q.scale))
              << tag << " " << base[i].name;
          continue;
        }
        EXPECT_EQ(differing(base[i].value, after[i].value), 0u) << tag << " " << base[i].name << " moved";
      }
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
        << name << ": a model just made holds at most its values (pool buckets round up by at most a quarter; "
        << "since session 10 nothing: they are allocated at the first use), " << made
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

// The Ŵ mode for one scope (restored on the way out, also on a throw).
struct KeepW {
  explicit KeepW(bool keep) : was(lc::OpKernels::bitlinear_keeps_w()) { lc::OpKernels::set_bitlinear_keeps_w(keep); }
  ~KeepW() { lc::OpKernels::set_bitlinear_keeps_w(was); }
  bool was;
};

// short_config with the base held as codes (the default, as on the CPU) or as F32 masters.
tr::FinetuneConfig codes_config(bool codes) {
  tr::FinetuneConfig c = short_config(0.05);
  c.base_as_codes = codes;
  return c;
}

struct Outcome {
  std::uint64_t hash = 0;
  std::size_t peak = 0;  // the pool's high-water of the finetune (the base uploaded inside it)
};

Outcome finetuned(m::Model& model, const std::vector<lockstep::data::SftExample>& records,
                  const tr::FinetuneConfig& cfg, const std::string& name) {
  const auto dir = temp_dir(name);
  lc::reset_peak_bytes_in_use();
  const auto rep = tr::finetune(model, records, cfg, dir.string());
  Outcome r{rep.adapter_hash, lc::peak_bytes_in_use()};
  fs::remove_all(dir);
  return r;
}

TEST(CudaLoraCodes, ABaseHeldAsCodesFinetunesToTheCpusHash) {
  LOCKSTEP_REQUIRE_GPU();
  for (const char* name : {"bitnet-micro", "bitnet-tiny"}) {
    const m::ModelConfig cfg = m::preset(name);
    auto cpu = m::make_cpu_model(cfg);
    cpu->init(3);
    const std::vector<m::Param> base = cpu->params();
    const Outcome c = finetuned(*cpu, facts_records(), codes_config(true), std::string("cpu_codes_") + name);
    auto run_gpu = [&](bool codes, bool keep_w, const char* tag) {
      const KeepW mode(keep_w);
      auto gpu = m::make_cuda_model(cfg);
      gpu->init(3);
      const Outcome r = finetuned(*gpu, facts_records(), codes_config(codes), std::string("gpu_") + tag + "_" + name);
      std::printf("%s %s: adapter cpu %016llx gpu %016llx (pool high-water %.2f MiB)\n", name, tag,
                  static_cast<unsigned long long>(c.hash), static_cast<unsigned long long>(r.hash),
                  static_cast<double>(r.peak) / (1 << 20));
      EXPECT_EQ(c.hash, r.hash) << name << " " << tag;
      std::size_t held_as_codes = 0;
      const auto& after = static_cast<const m::Model&>(*gpu).params();
      for (std::size_t i = 0; i < base.size(); ++i) {
        if (after[i].dtype != lockstep::tensor::DType::ternary2) continue;
        ++held_as_codes;
        const auto q = lockstep::ops::quantize_ternary(base[i].value.data(), base[i].value.size());
        EXPECT_EQ(lockstep::tensor::codes_of(after[i].frozen_value), q.q) << name << " " << base[i].name;
        EXPECT_EQ(lockstep::num::bits_of(after[i].frozen_value.scales()[0]), lockstep::num::bits_of(q.scale))
            << name << " " << base[i].name;
      }
      EXPECT_EQ(held_as_codes, codes ? 7 * static_cast<std::size_t>(cfg.n_layer) : 0u) << name << " " << tag;
    };
    run_gpu(true, false, "base as codes");
    run_gpu(false, false, "F32 masters, W-hat re-quantized");
    run_gpu(false, true, "F32 masters, W-hat kept");
  }
}

TEST(CudaLoraCodes, ThePoolHighWaterFallsByWhatIsNoLongerHeld) {
  LOCKSTEP_REQUIRE_GPU();
  m::ModelConfig cfg = m::preset("bitnet-tiny");
  cfg.n_layer = 8;
  const std::int64_t batch = 2, seq = 64;
  const std::size_t N = static_cast<std::size_t>(batch * seq);
  std::vector<lockstep::data::SftExample> records(static_cast<std::size_t>(batch));
  for (std::size_t r = 0; r < records.size(); ++r) {
    for (std::int64_t t = 0; t <= seq; ++t)
      records[r].tokens.push_back(static_cast<std::int32_t>(
          lockstep::num::rng::bits32(7, r, static_cast<std::uint64_t>(t)) % static_cast<std::uint32_t>(cfg.vocab_size)));
    records[r].scored.assign(records[r].tokens.size(), 1);
    records[r].line = r + 1;
  }
  tr::FinetuneConfig c = codes_config(true);
  c.steps = 2;
  c.batch = batch;
  c.max_seq = seq;
  c.lora.targets = {"q_proj", "v_proj"};
  auto run = [&](bool codes, bool keep_w) {
    const KeepW mode(keep_w);
    auto gpu = m::make_cuda_model(cfg);
    gpu->init(3);
    tr::FinetuneConfig cc = c;
    cc.base_as_codes = codes;
    return finetuned(*gpu, records, cc, codes ? "mem_codes" : keep_w ? "mem_keep" : "mem_f32");
  };
  m::make_cuda_model(cfg);  // the start-up gates (once a process) before any count
  const Outcome keep = run(false, true), f32 = run(false, false), codes = run(true, false);
  EXPECT_EQ(keep.hash, f32.hash);
  EXPECT_EQ(keep.hash, codes.hash);
  // What each way holds, by the pool's blocks (device_pool.hpp's pool_block_bytes).
  std::size_t w_hat = 0, masters = 0, packed = 0, x_hat = 0, nw_max = 0, nk_max = 0;
  auto block = [](std::size_t bytes) { return lc::pool_block_bytes(bytes); };
  const auto D = static_cast<std::size_t>(cfg.d_model), F = static_cast<std::size_t>(cfg.d_ff);
  const std::size_t q = static_cast<std::size_t>(cfg.n_head * cfg.head_dim),
                    kv = static_cast<std::size_t>(cfg.n_kv_head * cfg.head_dim);
  const std::size_t shapes[7][2] = {{q, D}, {kv, D}, {kv, D}, {D, q}, {F, D}, {F, D}, {D, F}};  // [out, in]
  for (std::int64_t l = 0; l < cfg.n_layer; ++l)
    for (const auto& [out, in] : shapes) {
      const std::size_t nw = out * in;
      w_hat += block(4 * nw);
      masters += block(4 * nw);
      packed += block((nw + 3) / 4);
      x_hat += block(4 * N * in);
      nw_max = std::max(nw_max, nw);
      nk_max = std::max(nk_max, N * in);
    }
  // The scratch each way grows to (one matrix at a time: the forward's operands, the backward's Ŵ) and slack.
  const std::size_t scratch = block(4 * (2 * nw_max + 2 * nk_max + N + 64) + 65536) + block(4 * nw_max) + (1u << 20);
  const auto mib = [](double b) { return b / (1 << 20); };
  const double drop_w = static_cast<double>(keep.peak) - static_cast<double>(f32.peak);
  const double drop_codes = static_cast<double>(f32.peak) - static_cast<double>(codes.peak);
  std::printf("bitnet-tiny x 8 blocks, %zu rows: pool high-water W-hat kept %.2f MiB, re-quantized %.2f MiB, base as "
              "codes %.2f MiB\n  no W-hat: -%.2f MiB (expected -%.2f, less up to %.2f of scratch); codes: -%.2f MiB "
              "(expected -%.2f = masters %.2f - codes %.2f + x-hat %.2f, up to %.2f either way)\n",
              N, mib(keep.peak), mib(f32.peak), mib(codes.peak), mib(drop_w), mib(w_hat), mib(scratch),
              mib(drop_codes), mib(masters - packed + x_hat), mib(masters), mib(packed), mib(x_hat), mib(scratch));
  EXPECT_LE(drop_w, static_cast<double>(w_hat));
  EXPECT_GE(drop_w, static_cast<double>(w_hat) - static_cast<double>(scratch));
  const double want = static_cast<double>(masters - packed + x_hat);
  EXPECT_LE(drop_codes, want + static_cast<double>(scratch));
  EXPECT_GE(drop_codes, want - static_cast<double>(scratch));
}

}  // namespace
