// LoRA adapters in PEFT's format (load/adapter.hpp), the merge, and the
// adapted CPU model (load/adapted_model.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/load/adapted_model.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tensor/convert.hpp"

namespace fs = std::filesystem;
using namespace lockstep;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("lockstep_adapter_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string file_bytes(const fs::path& p) { return io::read_file_text(p.string()); }

// A base model from a preset with Philox weights, as the loaders return one.
load::LoadedModel base_model(const std::string& preset = "llama-micro", std::uint64_t seed = 7) {
  auto m = model::make_cpu_model(model::preset(preset));
  m->init(seed);
  return {m->config(), m->params(), "test", {}};
}

// An adapter on `modules` of `base` with N(0, scale) values for A and B.
model::Adapter random_adapter(const load::LoadedModel& base, const std::vector<std::string>& modules, std::size_t rank,
                              double alpha, float scale, std::uint64_t seed) {
  model::Adapter a;
  a.config.rank = rank;
  a.config.alpha = alpha;
  a.config.dropout = 0.0;
  a.config.base_model = "llama-micro";
  a.config.targets.clear();
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> nd(0.0f, scale);
  for (const std::string& m : modules) {
    for (const model::Param& p : base.params)
      if (p.name == m + ".weight") {
        model::LoraTensor t;
        t.module = m;
        t.out = static_cast<std::size_t>(p.shape[0]);
        t.in = static_cast<std::size_t>(p.shape[1]);
        t.a.resize(rank * t.in);
        t.b.resize(t.out * rank);
        for (float& v : t.a) v = nd(rng);
        for (float& v : t.b) v = nd(rng);
        a.tensors.push_back(std::move(t));
      }
    a.config.targets.push_back(m.substr(m.rfind('.') + 1));
  }
  return a;
}

const std::vector<std::string> kModules = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                                           "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj",
                                           "model.layers.1.mlp.down_proj"};

std::vector<std::int32_t> tokens(std::int64_t vocab, int n = 9) {
  std::vector<std::int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<std::int32_t>((i * 37 + 5) % vocab));
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

// The error message of f(), "" if it does not throw.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

}  // namespace

TEST(Adapter, SaveLoadRoundTripIsBitIdentical) {
  const auto base = base_model();
  model::Adapter a = random_adapter(base, kModules, 4, 8.0, 0.3f, 1);
  a.config.dropout = 0.05;
  a.config.rslora = true;
  a.tensors[1].a[3] = -0.0f;  // -0 stays -0
  a.tensors[2].b[0] = std::numeric_limits<float>::denorm_min();
  const fs::path d = temp_dir("roundtrip");
  load::save_adapter(d.string(), a);
  const model::Adapter b = load::load_adapter(d.string());
  EXPECT_EQ(b.config.rank, 4u);
  EXPECT_EQ(b.config.alpha, 8.0);
  EXPECT_EQ(b.config.dropout, 0.05);
  EXPECT_TRUE(b.config.rslora);
  EXPECT_EQ(b.config.targets, a.config.targets);
  EXPECT_EQ(b.config.base_model, "llama-micro");
  ASSERT_EQ(b.tensors.size(), a.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(b.tensors[i].module, a.tensors[i].module);
    EXPECT_EQ(b.tensors[i].in, a.tensors[i].in);
    EXPECT_EQ(b.tensors[i].out, a.tensors[i].out);
    EXPECT_TRUE(same_bits(b.tensors[i].a, a.tensors[i].a)) << a.tensors[i].module;
    EXPECT_TRUE(same_bits(b.tensors[i].b, a.tensors[i].b)) << a.tensors[i].module;
  }
  // PEFT's names and shapes, F32, and the config fields PEFT's LoraConfig reads.
  const auto st = io::SafetensorsFile::read((d / load::kAdapterWeightsFile).string());
  const auto* t = st.find("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, io::DType::F32);
  EXPECT_EQ(t->shape, (std::vector<std::int64_t>{4, 172}));
  t = st.find("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<std::int64_t>{64, 4}));
  const auto j = nlohmann::json::parse(file_bytes(d / load::kAdapterConfigFile));
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(j.at("bias"), "none");
  EXPECT_EQ(j.at("r"), 4);
  EXPECT_TRUE(j.at("lora_alpha").is_number_integer());
  EXPECT_EQ(j.at("use_rslora"), true);
  // Saved again from what was loaded: the same bytes.
  const fs::path d2 = temp_dir("roundtrip2");
  load::save_adapter(d2.string(), b);
  EXPECT_EQ(file_bytes(d / load::kAdapterWeightsFile), file_bytes(d2 / load::kAdapterWeightsFile));
  EXPECT_EQ(file_bytes(d / load::kAdapterConfigFile), file_bytes(d2 / load::kAdapterConfigFile));
  fs::remove_all(d);
  fs::remove_all(d2);
}

TEST(Adapter, ReadsF16AndBf16Tensors) {
  const fs::path d = temp_dir("halves");
  std::vector<std::uint8_t> a16(2 * 2 * 3), b16(2 * 5 * 2);
  std::vector<float> want_a, want_b;
  for (std::size_t i = 0; i < 6; ++i) {
    const std::uint16_t h = tensor::f32_to_f16(0.1f * static_cast<float>(i) - 0.25f);
    a16[2 * i] = static_cast<std::uint8_t>(h);
    a16[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
    want_a.push_back(tensor::f16_to_f32(h));
  }
  for (std::size_t i = 0; i < 10; ++i) {
    const std::uint16_t h = tensor::f32_to_bf16(0.3f * static_cast<float>(i) - 1.0f);
    b16[2 * i] = static_cast<std::uint8_t>(h);
    b16[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
    want_b.push_back(tensor::bf16_to_f32(h));
  }
  io::write_safetensors((d / load::kAdapterWeightsFile).string(),
                        {{"base_model.model.m.lora_A.weight", io::DType::F16, {2, 3}, a16},
                         {"base_model.model.m.lora_B.weight", io::DType::BF16, {5, 2}, b16}});
  write_text(d / load::kAdapterConfigFile, R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4})");
  const model::Adapter a = load::load_adapter(d.string());
  ASSERT_EQ(a.tensors.size(), 1u);
  EXPECT_EQ(a.tensors[0].module, "m");
  EXPECT_EQ(a.tensors[0].in, 3u);
  EXPECT_EQ(a.tensors[0].out, 5u);
  EXPECT_TRUE(same_bits(a.tensors[0].a, want_a));
  EXPECT_TRUE(same_bits(a.tensors[0].b, want_b));
  EXPECT_EQ(a.config.dropout, 0.0);  // PEFT's defaults for absent fields
  EXPECT_FALSE(a.config.rslora);
  fs::remove_all(d);
}

// A NaN or Inf anywhere is refused naming the tensor, before anything is
// written: the directory keeps the previous adapter's bytes.
TEST(Adapter, NonFiniteIsRefusedAndThePreviousDirectoryIsIntact) {
  const auto base = base_model();
  const model::Adapter good = random_adapter(base, kModules, 2, 16.0, 0.1f, 2);
  const fs::path d = temp_dir("nan");
  load::save_adapter(d.string(), good);
  const std::string weights = file_bytes(d / load::kAdapterWeightsFile);
  const std::string config = file_bytes(d / load::kAdapterConfigFile);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    model::Adapter a = random_adapter(base, kModules, 3, 6.0, 0.1f, 3);  // another rank: both files would change
    a.tensors[3].b[5] = bad;
    const std::string e = error_of([&] { load::save_adapter(d.string(), a); });
    EXPECT_NE(e.find("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"), std::string::npos) << e;
    EXPECT_NE(e.find(" at 5"), std::string::npos) << e;
    EXPECT_EQ(file_bytes(d / load::kAdapterWeightsFile), weights);
    EXPECT_EQ(file_bytes(d / load::kAdapterConfigFile), config);
    EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 2);  // no temporary left
  }
  // A file holding a NaN (written by another tool) is refused on load, naming it.
  model::Adapter a = good;
  std::vector<io::TensorRef> refs;
  a.tensors[0].a[1] = std::numeric_limits<float>::quiet_NaN();
  for (const auto& t : a.tensors) {
    refs.push_back(io::TensorRef::f32(load::peft_lora_a_name(t.module), {2, static_cast<std::int64_t>(t.in)}, t.a));
    refs.push_back(io::TensorRef::f32(load::peft_lora_b_name(t.module), {static_cast<std::int64_t>(t.out), 2}, t.b));
  }
  io::write_safetensors((d / load::kAdapterWeightsFile).string(), refs);
  const std::string e = error_of([&] { load::load_adapter(d.string()); });
  EXPECT_NE(e.find("model.layers.0.self_attn.q_proj.lora_A.weight' holds nan at 1"), std::string::npos) << e;
  fs::remove_all(d);
}

// A save interrupted between its two renames (the weights new, the config
// old) is refused on load, not read as a mix of two adapters.
TEST(Adapter, ATornSaveIsRefused) {
  const auto base = base_model();
  const fs::path d = temp_dir("torn");
  load::save_adapter(d.string(), random_adapter(base, kModules, 2, 16.0, 0.1f, 8));
  model::Adapter next = random_adapter(base, kModules, 2, 4.0, 0.1f, 9);  // the same shapes, another alpha
  io::g_before_rename_hook = [](const std::string& tmp) {
    if (tmp.find(load::kAdapterConfigFile) != std::string::npos) throw std::runtime_error("crash before the config");
  };
  EXPECT_NE(error_of([&] { load::save_adapter(d.string(), next); }).find("crash before the config"), std::string::npos);
  io::g_before_rename_hook = nullptr;
  const std::string e = error_of([&] { load::load_adapter(d.string()); });
  EXPECT_NE(e.find("are from different saves"), std::string::npos) << e;
  load::save_adapter(d.string(), next);  // saved again: whole
  EXPECT_EQ(load::load_adapter(d.string()).config.alpha, 4.0);
  fs::remove_all(d);
}

TEST(Adapter, MalformedConfigIsOneClearLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"peft_type\": \"LORA\", \"r\": 8", "not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {"{\"r\": 8}", "'peft_type' is missing"},
      {"{\"peft_type\": \"IA3\", \"r\": 8}", "'peft_type' is 'IA3'"},
      {"{\"peft_type\": \"LORA\"}", "'r' is missing"},
      {"{\"peft_type\": \"LORA\", \"r\": 0}", "'r' is 0"},
      {"{\"peft_type\": \"LORA\", \"r\": -3}", "'r' is -3"},
      {"{\"peft_type\": \"LORA\", \"r\": 8.5}", "'r' is missing or not an integer"},
      {"{\"peft_type\": \"LORA\", \"r\": 1e300}", "'r' is missing or not an integer"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"lora_alpha\": \"16\"}", "'lora_alpha' is not a number"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"lora_dropout\": 1.5}", "'lora_dropout' is 1.5"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"target_modules\": [1]}", "'target_modules' holds a non-string"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"bias\": \"all\"}", "'bias' is 'all'"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"task_type\": \"SEQ_CLS\"}", "'task_type' is \"SEQ_CLS\""},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"use_rslora\": 1}", "'use_rslora' is not true or false"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"use_dora\": true}", "'use_dora' is set"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"rank_pattern\": {\"q_proj\": 4}}", "'rank_pattern' is set"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"modules_to_save\": [\"lm_head\"]}", "'modules_to_save' is set"},
      {"{\"peft_type\": \"LORA\", \"r\": 8, \"lora_bias\": true}", "'lora_bias' is set"},
  };
  for (const auto& [text, want] : cases) {
    const std::string e = error_of([&] { load::parse_adapter_config(text, "dir/adapter_config.json"); });
    EXPECT_NE(e.find(want), std::string::npos) << text << " -> " << e;
    EXPECT_EQ(e.rfind("dir/adapter_config.json: ", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // What PEFT itself writes (fields lockstep does not use, nulls) is read.
  const auto c = load::parse_adapter_config(
      R"({"alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": "tiny", "bias": "none",
          "fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true, "layers_pattern": null,
          "layers_to_transform": null, "loftq_config": {}, "lora_alpha": 16, "lora_dropout": 0.05,
          "megatron_config": null, "megatron_core": "megatron.core", "modules_to_save": null, "peft_type": "LORA",
          "r": 8, "rank_pattern": {}, "revision": null, "target_modules": ["v_proj", "q_proj"],
          "task_type": "CAUSAL_LM", "use_dora": false, "use_rslora": false, "peft_version": "0.21.0",
          "lora_bias": false, "trainable_token_indices": null, "target_parameters": null, "exclude_modules": null})",
      "peft");
  EXPECT_EQ(c.rank, 8u);
  EXPECT_EQ(c.alpha, 16.0);
  EXPECT_EQ(c.targets, (std::vector<std::string>{"v_proj", "q_proj"}));
  EXPECT_EQ(c.base_model, "tiny");
}

TEST(Adapter, MalformedWeightsAreOneClearLine) {
  const fs::path d = temp_dir("badweights");
  write_text(d / load::kAdapterConfigFile, R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4})");
  const std::vector<float> a(6, 0.5f), b(10, 0.25f), a3(9, 0.5f);
  auto expect = [&](const std::vector<io::TensorRef>& refs, const std::string& want) {
    io::write_safetensors((d / load::kAdapterWeightsFile).string(), refs);
    const std::string e = error_of([&] { load::load_adapter(d.string()); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_NE(e.find(load::kAdapterWeightsFile), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  expect({io::TensorRef::f32("base_model.model.m.lora_A.weight", {2, 3}, a)}, "module 'm' has lora_A but no lora_B");
  expect({io::TensorRef::f32("model.m.lora_A.weight", {2, 3}, a)}, "tensor 'model.m.lora_A.weight' is not");
  expect({io::TensorRef::f32("base_model.model.m.lora_embedding_A", {2, 3}, a)}, "is not base_model.model.<module>");
  expect({io::TensorRef::f32("base_model.model.m.lora_A.weight", {3, 3}, a3),
          io::TensorRef::f32("base_model.model.m.lora_B.weight", {5, 2}, b)},
         "'base_model.model.m.lora_A.weight' has shape [3, 3]; expected [r = 2, in]");
  expect({io::TensorRef::f32("base_model.model.m.lora_A.weight", {2, 3}, a),
          io::TensorRef::f32("base_model.model.m.lora_B.weight", {2, 5}, b)},
         "'base_model.model.m.lora_B.weight' has shape [2, 5]; expected [out, r = 2]");
  expect({}, "holds no lora_A/lora_B tensors");
  const std::vector<std::uint8_t> ints(24, 1);
  expect({{"base_model.model.m.lora_A.weight", io::DType::I32, {2, 3}, ints},
          io::TensorRef::f32("base_model.model.m.lora_B.weight", {5, 2}, b)},
         "is I32; lockstep reads F32, F16 and BF16");
  // A truncated file: the safetensors reader's one line.
  io::write_safetensors((d / load::kAdapterWeightsFile).string(),
                        {io::TensorRef::f32("base_model.model.m.lora_A.weight", {2, 3}, a)});
  std::string bytes = file_bytes(d / load::kAdapterWeightsFile);
  write_text(d / load::kAdapterWeightsFile, bytes.substr(0, bytes.size() - 5));
  const std::string e = error_of([&] { load::load_adapter(d.string()); });
  EXPECT_NE(e.find(load::kAdapterWeightsFile), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  fs::remove(d / load::kAdapterWeightsFile);
  EXPECT_NE(error_of([&] { load::load_adapter(d.string()); }).find("has no adapter_model.safetensors"), std::string::npos);
  EXPECT_NE(error_of([&] { load::load_adapter((d / "none").string()); }).find("is not a directory"), std::string::npos);
  fs::remove_all(d);
}

TEST(Adapter, ValidationAgainstTheBaseNamesTheModule) {
  const auto base = base_model();
  model::Adapter a = random_adapter(base, kModules, 2, 16.0, 0.1f, 4);
  EXPECT_EQ(error_of([&] { load::validate_adapter(a, base.config, base.params); }), "");
  a.tensors[2].module = "model.layers.7.self_attn.q_proj";
  std::string e = error_of([&] { load::validate_adapter(a, base.config, base.params); });
  EXPECT_NE(e.find("adapter module 'model.layers.7.self_attn.q_proj' is not in the base model"), std::string::npos) << e;
  a = random_adapter(base, kModules, 2, 16.0, 0.1f, 4);
  a.tensors[1].in = 32;  // v_proj is [32, 64]: in and out swapped
  a.tensors[1].out = 64;
  a.tensors[1].a.resize(2 * 32);
  a.tensors[1].b.resize(64 * 2);
  e = error_of([&] { load::validate_adapter(a, base.config, base.params); });
  EXPECT_NE(e.find("adapter module 'model.layers.0.self_attn.v_proj' is [out 64, in 32] but the base weight"),
            std::string::npos)
      << e;
  // The adapted model and the merge validate first.
  e = error_of([&] { load::make_adapted_model(base, a); });
  EXPECT_NE(e.find("model.layers.0.self_attn.v_proj"), std::string::npos) << e;
  auto params = base.params;
  e = error_of([&] { load::merge_adapter(a, base.config, params); });
  EXPECT_NE(e.find("model.layers.0.self_attn.v_proj"), std::string::npos) << e;
  // An embedding is a weight of the base but no linear projection: refused by the adapted model.
  a = random_adapter(base, {"model.embed_tokens"}, 2, 16.0, 0.1f, 4);
  e = error_of([&] { load::make_adapted_model(base, a); });
  EXPECT_NE(e.find("'model.embed_tokens' is not a linear projection"), std::string::npos) << e;
  // A module the model's LoRA layers do not adapt runs in the spec stand-in:
  // on the CPU only; and the stand-in adapts no BitNet base (the layers do).
  EXPECT_NE(error_of([&] { load::make_adapted_model(base, a, "cuda"); }).find("--device cpu"), std::string::npos);
  const auto bit = base_model("bitnet-micro");
  EXPECT_NE(error_of([&] { load::make_spec_adapted_model(bit, random_adapter(bit, kModules, 2, 16.0, 0.1f, 4)); })
                .find("BitNet"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { load::make_adapted_model(bit, random_adapter(bit, kModules, 2, 16.0, 0.1f, 4)); }), "");
  params = bit.params;
  EXPECT_NE(error_of([&] { load::merge_adapter(random_adapter(bit, kModules, 2, 16.0, 0.1f, 4), bit.config, params); })
                .find("BitNet"),
            std::string::npos);
}

// PEFT's initialization (B = 0) leaves the base's logits, bit for bit: in one
// pass (next_logits) and through the decode session.
TEST(AdaptedModel, ZeroBGivesTheBaseLogitsBitForBit) {
  const auto base = base_model();
  model::Adapter a = random_adapter(base, kModules, 4, 16.0, 0.5f, 5);
  for (auto& t : a.tensors) std::fill(t.b.begin(), t.b.end(), 0.0f);
  auto plain = load::make_loaded_model(base);
  auto adapted = load::make_adapted_model(base, a);
  const auto ids = tokens(base.config.vocab_size);
  EXPECT_TRUE(same_bits(adapted->next_logits(ids, 1), plain->next_logits(ids, 1)));
  auto s1 = plain->decoder(1, 0);
  auto s2 = adapted->decoder(1, 0);
  EXPECT_TRUE(same_bits(s2->prefill(0, ids, true, 2), s1->prefill(0, ids, true, 2)));
}

// A nonzero adapter: the logits move; the decode session (prefill in chunks,
// then token by token) gives next_logits' bits; saved and reloaded, the same
// bits; the merged model is close to (not the bits of) the unmerged one.
TEST(AdaptedModel, UnmergedMergedAndReloaded) {
  const auto base = base_model();
  model::Adapter a = random_adapter(base, kModules, 4, 16.0, 0.3f, 6);
  a.config.rslora = true;  // s = 16 / sqrt(4) = 8 (alpha / r would be 4)
  auto plain = load::make_loaded_model(base);
  auto adapted = load::make_adapted_model(base, a);
  const auto ids = tokens(base.config.vocab_size, 12);
  const auto want = adapted->next_logits(ids, 1);
  const auto base_logits = plain->next_logits(ids, 1);
  // Decode: the first 5 tokens in chunks of 2, then one at a time; each row = next_logits of its prefix.
  auto session = adapted->decoder(1, 0);
  session->set_prefill_chunk(2);
  auto rows = session->prefill(0, std::span(ids).first(5), true, 2);
  for (std::size_t i = 5; i < ids.size(); ++i) {
    const std::size_t slot = 0;
    const auto row = session->decode(std::span(&slot, 1), std::span(ids).subspan(i, 1), 1);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  const std::size_t V = static_cast<std::size_t>(base.config.vocab_size);
  EXPECT_TRUE(same_bits(std::vector<float>(rows.end() - static_cast<std::ptrdiff_t>(V), rows.end()), want));
  EXPECT_TRUE(same_bits(std::vector<float>(rows.begin() + 3 * static_cast<std::ptrdiff_t>(V), rows.begin() + 4 * static_cast<std::ptrdiff_t>(V)),
                        adapted->next_logits(std::span(ids).first(4), 3)));
  // Saved and reloaded: the same bits.
  const fs::path d = temp_dir("reload");
  load::save_adapter(d.string(), a);
  auto reloaded = load::make_adapted_model(base, load::load_adapter(d.string()));
  EXPECT_TRUE(same_bits(reloaded->next_logits(ids, 2), want));
  fs::remove_all(d);
  // Merged: W + BA·s run by the plain CPU model.
  auto merged_params = base;
  load::merge_adapter(a, merged_params.config, merged_params.params);
  auto merged = load::make_loaded_model(merged_params);
  const auto m = merged->next_logits(ids, 1);
  double moved = 0, diff = 0, scale = 0;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < V; ++i) {
    moved = std::max(moved, std::fabs(static_cast<double>(want[i]) - static_cast<double>(base_logits[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(want[i]) - static_cast<double>(m[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    differing += std::memcmp(&want[i], &m[i], 4) != 0;
  }
  std::printf("adapter moved the logits by up to %.4g (max |logit| %.4g); merged vs unmerged: max |diff| %.3g "
              "(%.3g relative to max |logit|), %zu of %zu logits differ in bits\n",
              moved, scale, diff, diff / scale, differing, V);
  EXPECT_GT(moved, 0.05 * scale);  // the adapter does something
  EXPECT_LT(diff, 1e-4 * scale);   // the merge computes the same function
  // The merge refuses a non-finite result and leaves the weights as they were.
  model::Adapter huge = a;
  for (float& v : huge.tensors[4].b) v = 3e38f;
  auto params = base.params;
  const std::string e = error_of([&] { load::merge_adapter(huge, base.config, params); });
  EXPECT_NE(e.find("model.layers.1.mlp.down_proj.weight' would hold"), std::string::npos) << e;
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(same_bits(params[i].value, base.params[i].value));
}

// The model's LoRA layers (what make_adapted_model runs for these modules):
// on a float base the spec stand-in's logits bit for bit (ops::LoraLinear::forward
// itself); on a ternary BitNet base, which the stand-in cannot adapt, the
// decode session token by token gives next_logits' bits at every position.
TEST(AdaptedModel, TheModelsLoraLayersDecodeTheSpecsBits) {
  for (const char* preset : {"llama-micro", "bitnet-micro"}) {
    const auto base = base_model(preset);
    const model::Adapter a = random_adapter(base, kModules, 3, 16.0, 0.3f, 8);
    auto adapted = load::make_adapted_model(base, a);
    auto plain = load::make_loaded_model(base);
    const auto ids = tokens(base.config.vocab_size, 10);
    const std::size_t V = static_cast<std::size_t>(base.config.vocab_size);
    auto session = adapted->decoder(1, 0);
    std::vector<float> rows = session->prefill(0, std::span(ids).first(1), true, 2);
    for (std::size_t i = 1; i < ids.size(); ++i) {
      const std::size_t slot = 0;
      const auto row = session->decode(std::span(&slot, 1), std::span(ids).subspan(i, 1), 2);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::vector<float> row(rows.begin() + static_cast<std::ptrdiff_t>(i * V),
                                   rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
      const auto prefix = std::span(ids).first(i + 1);
      EXPECT_TRUE(same_bits(row, adapted->next_logits(prefix, 1))) << preset << " position " << i;
      EXPECT_FALSE(same_bits(row, plain->next_logits(prefix, 1))) << preset << " position " << i << ": moved";
      if (base.config.family != model::Family::Bitnet) {
        EXPECT_TRUE(same_bits(row, load::make_spec_adapted_model(base, a)->next_logits(prefix, 1)))
            << preset << " position " << i << ": the spec stand-in";
      }
    }
  }
}

// rsLoRA's scale alpha / sqrt(r), and the plain alpha / r.
TEST(AdaptedModel, ScaleFollowsUseRslora) {
  model::LoraConfig c;
  c.rank = 4;
  c.alpha = 16.0;
  EXPECT_EQ(load::adapter_scale(c), 4.0f);
  c.rslora = true;
  EXPECT_EQ(load::adapter_scale(c), 8.0f);
}
