#include "lockstep/train/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/build_info.hpp"
#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/version.hpp"

namespace fs = std::filesystem;

namespace lockstep::train {

namespace {

constexpr int kStateVersion = 1;

std::span<const std::uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::string read_text(const fs::path& p) { return io::read_file_text(p.string()); }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// GPT-2's Conv1D weights: HF stores them [in, out].
bool is_conv1d(const model::ModelConfig& cfg, const model::Param& p) {
  return cfg.family == model::Family::Gpt2 && p.shape.size() == 2 &&
         (ends_with(p.name, ".attn.c_attn.weight") || ends_with(p.name, ".attn.c_proj.weight") ||
          ends_with(p.name, ".mlp.c_fc.weight") || ends_with(p.name, ".mlp.c_proj.weight"));
}

// q_proj / k_proj of a RoPE model whose rotation pairs are interleaved: the
// rows of each head are permuted so HF's rotate-half pairs (i, i + d/2) hold
// what lockstep pairs as (2i, 2i + 1). Returns the head count (0: no permutation).
std::int64_t rope_heads(const model::ModelConfig& cfg, const model::Param& p) {
  if (cfg.family == model::Family::Gpt2 || cfg.rope_layout != model::RopeLayout::Interleaved) return 0;
  if (ends_with(p.name, ".self_attn.q_proj.weight") || ends_with(p.name, ".self_attn.q_proj.bias")) return cfg.n_head;
  if (ends_with(p.name, ".self_attn.k_proj.weight") || ends_with(p.name, ".self_attn.k_proj.bias"))
    return cfg.n_kv_head;
  return 0;
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Row r of a [heads·hd, cols] matrix in interleaved order goes to row
// head·hd + (j % 2)·(hd/2) + j/2 (j = r mod hd) in rotate-half order.
std::int64_t rotate_half_row(std::int64_t r, std::int64_t hd) {
  const std::int64_t head = r / hd, j = r % hd;
  return head * hd + (j % 2) * (hd / 2) + j / 2;
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

void OptimizerState::init(const model::Model& model) {
  step = 0;
  m.clear();
  v.clear();
  for (const model::Param& p : model.params()) {
    m.emplace_back(p.trainable ? p.value.size() : 0, 0.0f);
    v.emplace_back(p.trainable ? p.value.size() : 0, 0.0f);
  }
}

std::uint64_t weights_hash(const model::Model& model) {
  model::require_f32_params(model.params(), "weights_hash");  // it reads Param::value by shape
  num::Hasher h;
  for (const model::Param& p : model.params()) h.add(num::HashDType::f32, p.shape, p.value.data());
  return h.digest();
}

std::uint64_t optimizer_hash(const model::Model& model, const OptimizerState& opt) {
  num::Hasher h;
  const std::int64_t step = opt.step;
  h.add(num::HashDType::i64, {}, &step);
  const auto& ps = model.params();
  for (std::size_t i = 0; i < ps.size() && i < opt.m.size(); ++i) {
    const std::int64_t n = static_cast<std::int64_t>(opt.m[i].size());
    h.add(num::HashDType::f32, std::span(&n, 1), opt.m[i].data());
    h.add(num::HashDType::f32, std::span(&n, 1), opt.v[i].data());
  }
  return h.digest();
}

void check_finite(const model::Model& model, const OptimizerState* opt, const std::string& what) {
  auto scan = [&](const std::string& tensor, const std::vector<float>& v) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw std::runtime_error(fmt::format("{}: '{}' holds {} at index {}", what, tensor,
                                             std::isnan(v[i]) ? "NaN" : "Inf", i));
  };
  const auto& ps = model.params();
  for (const model::Param& p : ps) scan(p.name, p.value);
  if (opt)
    for (std::size_t i = 0; i < ps.size() && i < opt->m.size(); ++i) {
      scan(ps[i].name + ".exp_avg", opt->m[i]);
      scan(ps[i].name + ".exp_avg_sq", opt->v[i]);
    }
}

HfTensor to_hf_tensor(const model::ModelConfig& cfg, const model::Param& p) {
  HfTensor t{p.shape, p.value};
  if (is_conv1d(cfg, p)) {
    const std::int64_t rows = p.shape[0], cols = p.shape[1];  // [out, in] -> [in, out]
    t.shape = {cols, rows};
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        t.value[static_cast<std::size_t>(c * rows + r)] = p.value[static_cast<std::size_t>(r * cols + c)];
  } else if (const std::int64_t heads = rope_heads(cfg, p); heads > 0) {
    const std::int64_t rows = p.shape[0], cols = p.shape.size() == 2 ? p.shape[1] : 1;
    const std::int64_t hd = rows / heads;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t to = rotate_half_row(r, hd);
      std::copy_n(p.value.begin() + r * cols, cols, t.value.begin() + to * cols);
    }
  }
  return t;
}

std::vector<float> from_hf_tensor(const model::ModelConfig& cfg, const model::Param& p, const HfTensor& t) {
  const HfTensor expect_layout{is_conv1d(cfg, p) ? std::vector<std::int64_t>{p.shape[1], p.shape[0]} : p.shape, {}};
  if (t.shape != expect_layout.shape)
    throw std::runtime_error(fmt::format("tensor '{}' has shape {}, expected {}", p.name, shape_str(t.shape),
                                         shape_str(expect_layout.shape)));
  if (static_cast<std::int64_t>(t.value.size()) != numel(t.shape))
    throw std::runtime_error(fmt::format("tensor '{}' has {} values for shape {}", p.name, t.value.size(),
                                         shape_str(t.shape)));
  std::vector<float> out(t.value.size());
  if (is_conv1d(cfg, p)) {
    const std::int64_t rows = p.shape[0], cols = p.shape[1];  // file [cols, rows] -> [rows, cols]
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        out[static_cast<std::size_t>(r * cols + c)] = t.value[static_cast<std::size_t>(c * rows + r)];
  } else if (const std::int64_t heads = rope_heads(cfg, p); heads > 0) {
    const std::int64_t rows = p.shape[0], cols = p.shape.size() == 2 ? p.shape[1] : 1;
    const std::int64_t hd = rows / heads;
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(t.value.begin() + rotate_half_row(r, hd) * cols, cols, out.begin() + r * cols);
  } else {
    out = t.value;
  }
  return out;
}

void save_hf_model(const std::string& dir, const model::Model& model, const std::string& tokenizer_json) {
  model::require_f32_params(model.params(), "save_hf_model (the checkpoint holds F32 tensors)");
  check_finite(model, nullptr, "refusing to save the model");
  fs::create_directories(dir);
  const model::ModelConfig& cfg = model.config();
  std::vector<HfTensor> hf;
  hf.reserve(model.params().size());
  for (const model::Param& p : model.params()) hf.push_back(to_hf_tensor(cfg, p));
  std::vector<io::TensorRef> refs;
  for (std::size_t i = 0; i < hf.size(); ++i)
    refs.push_back(io::TensorRef::f32(model.params()[i].name, hf[i].shape, hf[i].value));
  const std::string config = model::to_hf_config_json(cfg);
  io::write_file_atomic((fs::path(dir) / "config.json").string(), as_bytes(config));
  io::write_safetensors((fs::path(dir) / "model.safetensors").string(), refs, {{"format", "pt"}});
  if (!tokenizer_json.empty())
    io::write_file_atomic((fs::path(dir) / "tokenizer.json").string(), as_bytes(tokenizer_json));
}

void load_hf_weights(const std::string& dir, model::Model& model) {
  const std::string path = (fs::path(dir) / "model.safetensors").string();
  model::require_f32_params(model.params(), "load_hf_weights (the checkpoint holds F32 tensors)");
  const io::SafetensorsFile file = io::SafetensorsFile::read(path);
  const model::ModelConfig& cfg = model.config();
  std::map<std::string, bool> used;
  for (const auto& t : file.tensors()) used[t.name] = false;
  for (model::Param& p : model.params()) {
    const io::TensorInfo* info = file.find(p.name);
    if (!info) throw std::runtime_error(fmt::format("'{}': tensor '{}' is missing", path, p.name));
    if (info->dtype != io::DType::F32)
      throw std::runtime_error(fmt::format("'{}': tensor '{}' is {}, expected F32", path, p.name,
                                           io::dtype_name(info->dtype)));
    HfTensor t{info->shape, file.f32(p.name)};
    try {
      p.value = from_hf_tensor(cfg, p, t);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("'{}': {}", path, e.what()));
    }
    used[p.name] = true;
  }
  for (const auto& [name, was_used] : used) {
    if (was_used) continue;
    const bool tied_head = name == "lm_head.weight" && cfg.tie_embeddings;
    const bool gpt2_buffer = cfg.family == model::Family::Gpt2 &&
                             (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"));
    if (!tied_head && !gpt2_buffer)
      throw std::runtime_error(fmt::format("'{}': tensor '{}' is not a parameter of this {} model", path, name,
                                           model::family_name(cfg.family)));
  }
}

namespace {

std::string step_dir_name(std::int64_t step) { return fmt::format("step-{:08d}", step); }

// Step number of a "step-NNNNNNNN" directory name, or -1.
std::int64_t step_of(const std::string& name) {
  if (name.size() != 13 || name.rfind("step-", 0) != 0) return -1;
  std::int64_t v = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

void save_optimizer(const std::string& path, const model::Model& model, const OptimizerState& opt) {
  const auto& ps = model.params();
  std::vector<io::TensorRef> refs;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].trainable) continue;
    refs.push_back(io::TensorRef::f32(ps[i].name + ".exp_avg", ps[i].shape, opt.m[i]));
    refs.push_back(io::TensorRef::f32(ps[i].name + ".exp_avg_sq", ps[i].shape, opt.v[i]));
  }
  io::write_safetensors(path, refs, {{"format", "lockstep-adamw"}, {"step", std::to_string(opt.step)}});
}

OptimizerState load_optimizer(const std::string& path, const model::Model& model) {
  const io::SafetensorsFile file = io::SafetensorsFile::read(path);
  OptimizerState opt;
  opt.init(model);
  const auto& meta = file.metadata();
  const auto fmt_it = meta.find("format");
  const auto step_it = meta.find("step");
  if (fmt_it == meta.end() || fmt_it->second != "lockstep-adamw" || step_it == meta.end())
    throw std::runtime_error(fmt::format("'{}': not a lockstep optimizer state (metadata format/step)", path));
  opt.step = std::stoll(step_it->second);
  const auto& ps = model.params();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].trainable) continue;
    opt.m[i] = file.f32(ps[i].name + ".exp_avg", &ps[i].shape);
    opt.v[i] = file.f32(ps[i].name + ".exp_avg_sq", &ps[i].shape);
  }
  return opt;
}

}  // namespace

std::string save_checkpoint(const std::string& run_dir, const model::Model& model, const OptimizerState& opt,
                            CheckpointMeta meta, const std::string& tokenizer_json, int keep) {
  const fs::path run(run_dir);
  const std::string name = step_dir_name(meta.step);
  // Refuse before touching the disk: the previous checkpoint stays `latest`.
  std::string previous = "none";
  if (fs::exists(run / "latest")) {
    previous = read_text(run / "latest");
    while (!previous.empty() && (previous.back() == '\n' || previous.back() == '\r')) previous.pop_back();
  }
  check_finite(model, &opt,
               fmt::format("refusing to save {} (the previous checkpoint, {}, is kept)", name, previous));
  if (meta.step != opt.step)
    throw std::invalid_argument(fmt::format("save_checkpoint: meta.step {} != optimizer step {}", meta.step, opt.step));

  const fs::path dir = run / name;
  fs::create_directories(run);
  if (fs::exists(dir)) fs::remove_all(dir);  // an incomplete directory from an interrupted save
  save_hf_model(dir.string(), model, tokenizer_json);
  save_optimizer((dir / "optimizer.safetensors").string(), model, opt);

  meta.weights_hash = weights_hash(model);
  meta.optimizer_hash = optimizer_hash(model, opt);
  nlohmann::ordered_json j;
  j["format"] = "lockstep-trainer-state";
  j["version"] = kStateVersion;
  j["lockstep_version"] = build::kVersion;
  j["numeric_spec_version"] = NUMERIC_SPEC_VERSION;
  j["step"] = meta.step;
  j["seed"] = meta.seed;
  j["tokens_seen"] = meta.tokens_seen;
  j["elapsed_seconds"] = meta.elapsed_seconds;
  j["weights_hash"] = num::hash_hex(meta.weights_hash);
  j["optimizer_hash"] = num::hash_hex(meta.optimizer_hash);
  j["run"] = meta.run_config_json.empty() ? nlohmann::ordered_json::object()
                                          : nlohmann::ordered_json::parse(meta.run_config_json);
  j["corpus"] = meta.corpus_json.empty() ? nlohmann::ordered_json::object()
                                         : nlohmann::ordered_json::parse(meta.corpus_json);
  const std::string state = j.dump(2) + "\n";
  io::write_file_atomic((dir / "trainer_state.json").string(), as_bytes(state));
  const std::string pointer = name + "\n";
  io::write_file_atomic((run / "latest").string(), as_bytes(pointer));

  // Prune: keep the `keep` newest complete checkpoints (this one included);
  // older or incomplete step directories go.
  std::vector<std::pair<std::int64_t, fs::path>> dirs;
  for (const auto& e : fs::directory_iterator(run))
    if (e.is_directory() && step_of(e.path().filename().string()) >= 0)
      dirs.emplace_back(step_of(e.path().filename().string()), e.path());
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  int kept = 0;
  for (const auto& [step, path] : dirs) {
    const bool complete = fs::exists(path / "trainer_state.json");
    if (path == dir || (complete && step < meta.step && kept < keep)) {
      ++kept;
      continue;
    }
    if (step < meta.step || !complete) fs::remove_all(path);
  }
  return dir.string();
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (!fs::exists(p)) throw std::runtime_error(fmt::format("checkpoint '{}' does not exist", path));
  if (fs::exists(p / "latest")) {
    std::string name = read_text(p / "latest");
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    if (step_of(name) < 0)
      throw std::runtime_error(fmt::format("'{}' names '{}', not a step-NNNNNNNN directory",
                                           (p / "latest").string(), name));
    return (p / name).string();
  }
  if (fs::exists(p / "model.safetensors") && fs::exists(p / "config.json")) return p.string();
  throw std::runtime_error(fmt::format(
      "'{}' is neither a run directory (no 'latest' file) nor a checkpoint (no config.json + model.safetensors)",
      path));
}

LoadedCheckpoint load_checkpoint(const std::string& path, bool training) {
  const std::string dir = resolve_checkpoint(path);
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const model::ModelConfig cfg = model::from_hf_config_json(read_text(config_path), config_path);
  return load_checkpoint_into(dir, model::make_cpu_model(cfg), training);
}

LoadedCheckpoint load_checkpoint_into(const std::string& path, std::unique_ptr<model::Model> model, bool training) {
  LoadedCheckpoint ck;
  ck.dir = resolve_checkpoint(path);
  const fs::path dir(ck.dir);
  const std::string config_path = (dir / "config.json").string();
  const model::ModelConfig file_cfg = model::from_hf_config_json(read_text(config_path), config_path);
  if (model::to_hf_config_json(file_cfg) != model::to_hf_config_json(model->config()))
    throw std::runtime_error(fmt::format("'{}' describes a different model ({}) than the one given ({})",
                                         config_path, file_cfg.summary(), model->config().summary()));
  load_hf_weights(ck.dir, *model);
  if (fs::exists(dir / "tokenizer.json")) ck.tokenizer_json = read_text(dir / "tokenizer.json");

  if (training) {
    const fs::path state_path = dir / "trainer_state.json";
    if (!fs::exists(state_path))
      throw std::runtime_error(fmt::format("'{}' is missing: '{}' is not a complete training checkpoint",
                                           state_path.string(), ck.dir));
    try {
      const auto j = nlohmann::json::parse(read_text(state_path));
      if (j.at("format") != "lockstep-trainer-state" || j.at("version").get<int>() != kStateVersion)
        throw std::runtime_error("unknown format or version");
      if (j.at("numeric_spec_version").get<int>() != NUMERIC_SPEC_VERSION)
        throw std::runtime_error(fmt::format("written under NUMERIC_SPEC_VERSION {}, this is {}: a resumed run would "
                                             "not reproduce the original",
                                             j.at("numeric_spec_version").get<int>(), NUMERIC_SPEC_VERSION));
      ck.meta.step = j.at("step");
      ck.meta.seed = j.at("seed");
      ck.meta.tokens_seen = j.at("tokens_seen");
      ck.meta.elapsed_seconds = j.at("elapsed_seconds");
      ck.meta.weights_hash = std::stoull(j.at("weights_hash").get<std::string>(), nullptr, 16);
      ck.meta.optimizer_hash = std::stoull(j.at("optimizer_hash").get<std::string>(), nullptr, 16);
      ck.meta.run_config_json = j.at("run").dump(2);
      ck.meta.corpus_json = j.at("corpus").dump(2);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("'{}': {}", state_path.string(), e.what()));
    }
    ck.opt = load_optimizer((dir / "optimizer.safetensors").string(), *model);
    if (ck.opt.step != ck.meta.step)
      throw std::runtime_error(fmt::format("'{}': optimizer step {} != trainer_state step {}", ck.dir, ck.opt.step,
                                           ck.meta.step));
    // The recorded hashes prove the files hold what was saved.
    if (const auto h = weights_hash(*model); h != ck.meta.weights_hash)
      throw std::runtime_error(fmt::format("'{}': the weights hash to {}, trainer_state.json recorded {}", ck.dir,
                                           num::hash_hex(h), num::hash_hex(ck.meta.weights_hash)));
    if (const auto h = optimizer_hash(*model, ck.opt); h != ck.meta.optimizer_hash)
      throw std::runtime_error(fmt::format("'{}': the optimizer state hashes to {}, trainer_state.json recorded {}",
                                           ck.dir, num::hash_hex(h), num::hash_hex(ck.meta.optimizer_hash)));
  }
  ck.model = std::move(model);
  return ck;
}

}  // namespace lockstep::train
