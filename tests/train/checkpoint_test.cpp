// Checkpoints: HF layout (Conv1D transposes, tied head, RoPE permutation),
// round trips, NaN refusal, atomic saves that survive a crash, pruning, and
// corruption detection.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fake_model.hpp"
#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/model/config.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace fs = std::filesystem;
using namespace lockstep;
using namespace lockstep::train;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("lockstep_ckpt_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

model::ModelConfig micro_config() {
  model::ModelConfig c = model::preset("gpt2-micro");
  c.vocab_size = 300;
  return c;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A model and optimizer state with distinct, non-trivial values.
struct Fixture {
  std::unique_ptr<model::Model> model = fake::make_fake(micro_config());
  OptimizerState opt;
  explicit Fixture(std::uint64_t seed, std::int64_t step = 1) {
    model->init(seed);
    opt.init(*model);
    opt.step = step;
    float x = 0.001f * static_cast<float>(seed);
    for (auto& m : opt.m)
      for (float& v : m) v = (x += 1e-4f);
    for (auto& m : opt.v)
      for (float& v : m) v = (x += 2e-4f);
  }
  CheckpointMeta meta() const {
    CheckpointMeta m;
    m.step = opt.step;
    m.seed = 5;
    m.tokens_seen = 1234;
    m.run_config_json = R"({"lr": 0.001})";
    m.corpus_json = R"({"key": "0123456789abcdef"})";
    return m;
  }
};

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST(Checkpoint, RoundTripRestoresEveryBit) {
  const fs::path run = temp_dir("roundtrip");
  Fixture f(3, 7);
  const std::string dir = save_checkpoint(run.string(), *f.model, f.opt, f.meta(), R"({"tok": 1})");
  EXPECT_EQ(fs::path(dir).filename(), "step-00000007");
  EXPECT_EQ(read(run / "latest"), "step-00000007\n");
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json", "optimizer.safetensors",
                           "trainer_state.json"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / file)) << file;

  LoadedCheckpoint ck = load_checkpoint_into(run.string(), fake::make_fake(micro_config()), true);
  EXPECT_EQ(ck.dir, dir);
  EXPECT_EQ(weights_hash(*ck.model), weights_hash(*f.model));
  EXPECT_EQ(optimizer_hash(*ck.model, ck.opt), optimizer_hash(*f.model, f.opt));
  EXPECT_EQ(ck.opt.step, 7);
  EXPECT_EQ(ck.meta.step, 7);
  EXPECT_EQ(ck.meta.seed, 5u);
  EXPECT_EQ(ck.meta.tokens_seen, 1234u);
  EXPECT_EQ(nlohmann::json::parse(ck.meta.run_config_json)["lr"], 0.001);
  EXPECT_EQ(ck.tokenizer_json, R"({"tok": 1})");
  std::printf("weights %s, optimizer %s\n", num::hash_hex(weights_hash(*f.model)).c_str(),
              num::hash_hex(optimizer_hash(*f.model, f.opt)).c_str());

  // A model of another shape is refused, naming both.
  model::ModelConfig other = micro_config();
  other.vocab_size = 301;
  EXPECT_NE(message_of([&] { load_checkpoint_into(run.string(), fake::make_fake(other), true); })
                .find("different model"),
            std::string::npos);
  fs::remove_all(run);
}

TEST(Checkpoint, Gpt2TensorsAreInHuggingFaceLayout) {
  const fs::path dir = temp_dir("hf");
  Fixture f(4);
  save_hf_model(dir.string(), *f.model);
  const io::SafetensorsFile file = io::SafetensorsFile::read((dir / "model.safetensors").string());
  EXPECT_EQ(file.metadata().at("format"), "pt");  // transformers refuses files without it
  EXPECT_EQ(file.find("lm_head.weight"), nullptr);  // tied: GPT2LMHeadModel ties it on load
  const model::ModelConfig cfg = micro_config();
  const std::int64_t d = cfg.d_model, ff = cfg.d_ff;
  int transposed = 0;
  for (const model::Param& p : f.model->params()) {
    const io::TensorInfo* t = file.find(p.name);
    ASSERT_NE(t, nullptr) << p.name;
    const std::vector<float> v = file.f32(p.name);
    const bool conv1d = p.name.find("c_attn.weight") != std::string::npos ||
                        p.name.find("c_proj.weight") != std::string::npos ||
                        p.name.find("c_fc.weight") != std::string::npos;
    if (!conv1d) {
      EXPECT_EQ(t->shape, p.shape) << p.name;
      EXPECT_EQ(v, p.value) << p.name;
      continue;
    }
    ++transposed;
    ASSERT_EQ(t->shape.size(), 2u);
    EXPECT_EQ(t->shape[0], p.shape[1]) << p.name;  // [in, out]
    EXPECT_EQ(t->shape[1], p.shape[0]) << p.name;
    const std::int64_t out = p.shape[0], in = p.shape[1];
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i)
        ASSERT_EQ(num::bits_of(v[static_cast<std::size_t>(i * out + o)]),
                  num::bits_of(p.value[static_cast<std::size_t>(o * in + i)]))
            << p.name << " [" << o << "," << i << "]";
  }
  EXPECT_EQ(transposed, 4 * static_cast<int>(cfg.n_layer));
  // HF's shapes for GPT-2: c_attn [d, 3d], c_fc [d, ff], mlp.c_proj [ff, d].
  EXPECT_EQ(file.find("transformer.h.0.attn.c_attn.weight")->shape, (std::vector<std::int64_t>{d, 3 * d}));
  EXPECT_EQ(file.find("transformer.h.0.mlp.c_fc.weight")->shape, (std::vector<std::int64_t>{d, ff}));
  EXPECT_EQ(file.find("transformer.h.0.mlp.c_proj.weight")->shape, (std::vector<std::int64_t>{ff, d}));
  const auto cfg_json = nlohmann::json::parse(read(dir / "config.json"));
  EXPECT_EQ(cfg_json["model_type"], "gpt2");
  EXPECT_EQ(cfg_json["vocab_size"], 300);

  // Loading transposes back; a file that also holds the tied head loads too.
  auto back = fake::make_fake(micro_config());
  load_hf_weights(dir.string(), *back);
  EXPECT_EQ(weights_hash(*back), weights_hash(*f.model));
  fs::remove_all(dir);
}

TEST(Checkpoint, LoadRefusesMissingExtraAndMisshapenTensors) {
  const fs::path dir = temp_dir("bad_tensors");
  Fixture f(5);
  const auto& ps = f.model->params();
  auto write_without = [&](const std::string& skip, const std::string& extra, bool wrong_shape) {
    std::vector<HfTensor> hf;
    std::vector<io::TensorRef> refs;
    for (const auto& p : ps) hf.push_back(to_hf_tensor(f.model->config(), p));
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].name == skip) continue;
      auto shape = hf[i].shape;
      if (wrong_shape && ps[i].name == "transformer.h.0.attn.c_attn.weight") std::swap(shape[0], shape[1]);
      refs.push_back(io::TensorRef::f32(ps[i].name, shape, hf[i].value));
    }
    const std::vector<float> junk(4, 1.0f);
    if (!extra.empty()) refs.push_back(io::TensorRef::f32(extra, {4}, junk));
    io::write_safetensors((dir / "model.safetensors").string(), refs, {{"format", "pt"}});
  };
  auto m = fake::make_fake(micro_config());
  write_without("transformer.wpe.weight", "", false);
  EXPECT_NE(message_of([&] { load_hf_weights(dir.string(), *m); }).find("'transformer.wpe.weight' is missing"),
            std::string::npos);
  write_without("", "transformer.h.9.mystery", false);
  EXPECT_NE(message_of([&] { load_hf_weights(dir.string(), *m); }).find("'transformer.h.9.mystery' is not a parameter"),
            std::string::npos);
  write_without("", "", true);
  EXPECT_NE(message_of([&] { load_hf_weights(dir.string(), *m); }).find("has shape [192, 64], expected [64, 192]"),
            std::string::npos)
      << message_of([&] { load_hf_weights(dir.string(), *m); });
  write_without("", "lm_head.weight", false);  // the tied head: accepted, ignored
  EXPECT_NO_THROW(load_hf_weights(dir.string(), *m));
  fs::remove_all(dir);
}

TEST(Checkpoint, InterleavedRopeRowsArePermutedToRotateHalf) {
  model::ModelConfig c = model::preset("llama-micro");
  c.rope_layout = model::RopeLayout::Interleaved;
  const std::int64_t hd = c.head_dim, heads = c.n_head, cols = 3;
  model::Param q{"model.layers.0.self_attn.q_proj.weight", {heads * hd, cols}, {}, {}, true, true};
  for (std::int64_t i = 0; i < heads * hd * cols; ++i) q.value.push_back(static_cast<float>(i));
  const HfTensor t = to_hf_tensor(c, q);
  // Interleaved row 2i+c of a head is rotate-half row c·hd/2 + i.
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t j = 0; j < hd; ++j) {
      const std::int64_t to = h * hd + (j % 2) * (hd / 2) + j / 2;
      EXPECT_EQ(t.value[static_cast<std::size_t>(to * cols)], q.value[static_cast<std::size_t>((h * hd + j) * cols)]);
    }
  EXPECT_EQ(from_hf_tensor(c, q, t), q.value);
  // Rotate-half models (the default) and other tensors are stored as they are.
  c.rope_layout = model::RopeLayout::RotateHalf;
  EXPECT_EQ(to_hf_tensor(c, q).value, q.value);
  c.rope_layout = model::RopeLayout::Interleaved;
  model::Param v{"model.layers.0.self_attn.v_proj.weight", q.shape, q.value, {}, true, true};
  EXPECT_EQ(to_hf_tensor(c, v).value, v.value);
}

TEST(Checkpoint, NonFiniteModelIsRefusedAndThePreviousKept) {
  const fs::path run = temp_dir("nan");
  Fixture f(6, 1);
  save_checkpoint(run.string(), *f.model, f.opt, f.meta(), "");
  const std::uint64_t good = weights_hash(*f.model);
  f.opt.step = 2;
  f.model->params()[3].value[17] = NAN;
  const std::string msg = message_of([&] { save_checkpoint(run.string(), *f.model, f.opt, f.meta(), ""); });
  std::printf("%s\n", msg.c_str());
  EXPECT_NE(msg.find("refusing to save step-00000002 (the previous checkpoint, step-00000001, is kept)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'" + f.model->params()[3].name + "' holds NaN at index 17"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(run / "step-00000002"));
  f.model->params()[3].value[17] = 1.0f;
  f.opt.v[0][4] = INFINITY;
  EXPECT_NE(message_of([&] { save_checkpoint(run.string(), *f.model, f.opt, f.meta(), ""); }).find("exp_avg_sq' holds Inf"),
            std::string::npos);
  EXPECT_EQ(read(run / "latest"), "step-00000001\n");
  EXPECT_EQ(weights_hash(*load_checkpoint_into(run.string(), fake::make_fake(micro_config()), true).model), good);
  fs::remove_all(run);
}

TEST(Checkpoint, CrashBeforeRenameKeepsTheOldCheckpoint) {
  const fs::path run = temp_dir("crash");
  Fixture a(7, 1);
  save_checkpoint(run.string(), *a.model, a.opt, a.meta(), "");
  const std::uint64_t old_hash = weights_hash(*a.model);
  Fixture b(8, 2);
  ASSERT_NE(weights_hash(*b.model), old_hash);

  // Crash in the middle of each file of the new checkpoint (after its temp
  // file is complete, before its rename), and before `latest` moves.
  for (const std::string victim : {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json",
                                   "latest"}) {
    int crashes = 0;
    io::g_before_rename_hook = [&](const std::string& tmp) {
      // io::write_file_atomic's temporary file is ".<name>.tmpXXXXXX" beside the target.
      if (fs::path(tmp).filename().string().rfind("." + victim + ".tmp", 0) == 0) {
        ++crashes;
        throw std::runtime_error("simulated crash before renaming " + tmp);
      }
    };
    EXPECT_THROW(save_checkpoint(run.string(), *b.model, b.opt, b.meta(), ""), std::runtime_error) << victim;
    io::g_before_rename_hook = nullptr;
    EXPECT_EQ(crashes, 1) << victim;
    EXPECT_EQ(read(run / "latest"), "step-00000001\n") << victim;
    const auto ck = load_checkpoint_into(run.string(), fake::make_fake(micro_config()), true);
    EXPECT_EQ(weights_hash(*ck.model), old_hash) << victim;
    EXPECT_EQ(ck.meta.step, 1) << victim;
    // The half-written directory is not a training checkpoint: without its
    // weights it is no checkpoint at all, without trainer_state.json an incomplete one.
    if (victim != "latest") {
      const std::string m = message_of(
          [&] { load_checkpoint_into((run / "step-00000002").string(), fake::make_fake(micro_config()), true); });
      EXPECT_TRUE(m.find("not a complete training checkpoint") != std::string::npos ||
                  m.find("neither a run directory") != std::string::npos)
          << victim << ": " << m;
    }
    std::printf("crash at %-22s -> latest still step-00000001, weights %s\n", victim.c_str(),
                num::hash_hex(old_hash).c_str());
  }
  // The next save succeeds and replaces the debris.
  save_checkpoint(run.string(), *b.model, b.opt, b.meta(), "");
  EXPECT_EQ(weights_hash(*load_checkpoint_into(run.string(), fake::make_fake(micro_config()), true).model),
            weights_hash(*b.model));
  fs::remove_all(run);
}

TEST(Checkpoint, KeepsTheNewestAndDetectsCorruption) {
  const fs::path run = temp_dir("prune");
  for (std::int64_t s = 1; s <= 4; ++s) {
    Fixture f(10 + static_cast<std::uint64_t>(s), s);
    save_checkpoint(run.string(), *f.model, f.opt, f.meta(), "", 2);
  }
  int dirs = 0;
  for (const auto& e : fs::directory_iterator(run)) dirs += e.is_directory();
  EXPECT_EQ(dirs, 2);
  EXPECT_TRUE(fs::exists(run / "step-00000004"));
  EXPECT_TRUE(fs::exists(run / "step-00000003"));

  // One flipped byte in the weights: the recorded hash catches it.
  const fs::path st = run / "step-00000004" / "model.safetensors";
  std::string bytes = read(st);
  bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x01);
  std::ofstream(st, std::ios::binary) << bytes;
  const std::string msg =
      message_of([&] { load_checkpoint_into(run.string(), fake::make_fake(micro_config()), true); });
  EXPECT_NE(msg.find("the weights hash to"), std::string::npos) << msg;

  EXPECT_NE(message_of([&] { resolve_checkpoint((run / "nothing").string()); }).find("does not exist"),
            std::string::npos);
  fs::create_directories(run / "empty");
  EXPECT_NE(message_of([&] { resolve_checkpoint((run / "empty").string()); }).find("neither a run directory"),
            std::string::npos);
  fs::remove_all(run);
}

// The real models: every parameter lands under its HF name with HF's shape
// and comes back bit for bit.
TEST(Checkpoint, RealModelsRoundTripInHfLayout) {
  for (const std::string preset : {"gpt2-micro", "llama-micro"}) {
    const fs::path dir = temp_dir("real_" + preset);
    model::ModelConfig c = model::preset(preset);
    auto m = model::make_cpu_model(c);
    m->init(11);
    save_hf_model(dir.string(), *m);
    const io::SafetensorsFile file = io::SafetensorsFile::read((dir / "model.safetensors").string());
    std::size_t transposed = 0;
    for (const model::Param& p : m->params()) {
      const io::TensorInfo* t = file.find(p.name);
      ASSERT_NE(t, nullptr) << p.name;
      const std::vector<float> v = file.f32(p.name);
      if (v == p.value) {
        EXPECT_EQ(t->shape, p.shape) << p.name;
        continue;
      }
      // Not stored as is: must be the [in, out] transpose (GPT-2's Conv1D).
      ++transposed;
      ASSERT_EQ(t->shape, (std::vector<std::int64_t>{p.shape[1], p.shape[0]})) << p.name;
      const std::int64_t out = p.shape[0], in = p.shape[1];
      for (std::int64_t o = 0; o < out; ++o)
        for (std::int64_t i = 0; i < in; ++i)
          ASSERT_EQ(num::bits_of(v[static_cast<std::size_t>(i * out + o)]),
                    num::bits_of(p.value[static_cast<std::size_t>(o * in + i)]))
              << p.name;
    }
    EXPECT_EQ(file.tensors().size(), m->params().size());
    EXPECT_EQ(transposed, preset == "gpt2-micro" ? 4 * static_cast<std::size_t>(c.n_layer) : 0u) << preset;
    const auto loaded = load_checkpoint(dir.string(), false);
    EXPECT_EQ(weights_hash(*loaded.model), weights_hash(*m)) << preset;
    std::printf("%s: %zu tensors (%zu transposed), weights %s\n", preset.c_str(), file.tensors().size(), transposed,
                num::hash_hex(weights_hash(*m)).c_str());
    fs::remove_all(dir);
  }
}
