#include "generate_model.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/load/adapted_model.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/gguf_vocab.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace lockstep::cli {

void ModelSource::add(CLI::App* cmd) {
  auto* ck = cmd->add_option("--checkpoint", checkpoint,
                             "lockstep run or checkpoint directory (with its tokenizer.json)");
  auto* mf = cmd->add_option("--model", model_file,
                             "model file: FILE.gguf (llama, bitnet-b1.58) or a Hugging Face directory");
  ck->excludes(mf);
  cmd->add_option("--tokenizer", tokenizer, "tokenizer.json to use instead of the model's");
  cmd->add_option("--device", device, "cpu or cuda (the same tokens either way)")->default_str("cpu");
  cmd->add_option("--adapter", adapter,
                  "a LoRA adapter directory (PEFT: adapter_config.json + adapter_model.safetensors), applied "
                  "unmerged by the model's LoRA layers (KV-cache decoding; GPT-2 or lm_head modules: CPU only)");
  cmd->add_flag("--merge-adapter", merge_adapter,
                "fold --adapter into the weights before running (faster, any --device; close to the unmerged "
                "logits, not the same bits)");
}

namespace {
bool is_gguf(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}
}  // namespace

// The base with the adapter: unmerged (load/adapted_model.hpp) or merged.
static std::unique_ptr<model::Model> with_adapter(load::LoadedModel base, const std::string& dir, bool merge,
                                                  const std::string& device) {
  model::Adapter adapter = load::load_adapter(dir);
  if (!merge) return load::make_adapted_model(std::move(base), std::move(adapter), device);
  load::merge_adapter(adapter, base.config, base.params);
  return load::make_loaded_model(std::move(base), device);
}

LoadedModel ModelSource::load() const {
  if (merge_adapter && adapter.empty()) throw std::invalid_argument("--merge-adapter needs --adapter DIR");
  if (device != "cpu" && device != "cuda")
    throw std::invalid_argument(fmt::format("--device must be cpu or cuda, got '{}'", device));
  if (checkpoint.empty() == model_file.empty())
    throw std::invalid_argument("give one of --checkpoint DIR or --model FILE.gguf|DIR");
  LoadedModel m;
  if (!tokenizer.empty())
    m.tokenizer = std::make_unique<tok::BpeTokenizer>(tok::load_hf_tokenizer_json(tokenizer));
  if (!model_file.empty()) {
    // On the CPU without an adapter: the decode-only model (model/decode_model.hpp:
    // the weights once, as the decode kernels read them; the same logits bits).
    const bool decode_only = device == "cpu" && adapter.empty();
    load::LoadedModel loaded =
        load::load_model_file(model_file, decode_only ? load::decode_load_options() : load::LoadOptions{});
    if (!m.tokenizer) {
      if (is_gguf(model_file)) {
        m.tokenizer = tok::load_gguf_tokenizer(model_file);
      } else {
        const std::filesystem::path dir = std::filesystem::is_directory(model_file)
                                              ? std::filesystem::path(model_file)
                                              : std::filesystem::path(model_file).parent_path();
        if (!std::filesystem::exists(dir / "tokenizer.json"))
          throw std::invalid_argument(
              fmt::format("'{}' has no tokenizer.json beside it (give --tokenizer FILE)", model_file));
        m.tokenizer = std::make_unique<tok::BpeTokenizer>(tok::load_hf_tokenizer_json(dir / "tokenizer.json"));
      }
    }
    if (decode_only)
      m.model = load::make_decode_model(std::move(loaded));
    else
      m.model = adapter.empty() ? load::make_loaded_model(std::move(loaded), device)
                                : with_adapter(std::move(loaded), adapter, merge_adapter, device);
    return m;
  }
  train::LoadedCheckpoint ck = train::load_checkpoint(checkpoint, false);
  if (!m.tokenizer) {
    if (ck.tokenizer_json.empty()) throw std::runtime_error(fmt::format("'{}' has no tokenizer.json", ck.dir));
    m.tokenizer = std::make_unique<tok::BpeTokenizer>(
        tok::parse_hf_tokenizer_json(ck.tokenizer_json, ck.dir + "/tokenizer.json"));
  }
  if (!adapter.empty()) {
    load::LoadedModel base{ck.model->config(), ck.model->params(), "checkpoint", {}};
    m.model = with_adapter(std::move(base), adapter, merge_adapter, device);
  } else if (device == "cpu") {
    m.model = std::move(ck.model);
  } else {
    m.model = model::make_model(ck.model->config(), device);
    auto& to = m.model->params();
    const auto& from = ck.model->params();
    for (std::size_t i = 0; i < to.size(); ++i) to[i].value = from[i].value;
  }
  return m;
}

void SamplingFlags::add(CLI::App* cmd) {
  const infer::GenerateOptions d;
  num.add(cmd, "temperature", "softmax temperature (0: greedy)", num_text(d.sampling.temperature));
  num.add(cmd, "top-k", "sample among the k likeliest tokens (0: all)", num_text(d.sampling.top_k));
  num.add(cmd, "top-p", "... and among the smallest set holding this probability (1: all)",
          num_text(d.sampling.top_p));
  num.add(cmd, "repetition-penalty", "divide the positive (multiply the negative) logits of recent tokens (1: none)",
          num_text(d.sampling.repetition_penalty));
  num.add(cmd, "repeat-last-n", "the recent tokens the penalty reads (0: all)",
          num_text(d.sampling.repeat_last_n));
  num.add(cmd, "seed", "sampling seed", num_text(d.sampling.seed));
  num.add(cmd, "max-tokens", "tokens to generate", num_text(d.max_tokens));
  num.add(cmd, "context", "KV-cache positions (0: the model's max_seq; generation stops when it is full)", "0");
  num.add(cmd, "threads", "CPU threads (0: all; the bits do not depend on it)", "0");
  auto* stop = cmd->add_option("--stop-id", stop_ids, "a token id that ends the text (repeatable)");
  stop->type_name("ID");
  cmd->add_flag("--ignore-eos", ignore_eos, "do not stop at the end-of-text and end-of-turn tokens");
}

infer::GenerateOptions SamplingFlags::read() const {
  infer::GenerateOptions g;
  g.sampling.temperature = static_cast<float>(num.real("temperature"));
  g.sampling.top_k = static_cast<std::int32_t>(std::clamp<std::int64_t>(num.integer("top-k"), -1, 1 << 30));
  g.sampling.top_p = static_cast<float>(num.real("top-p"));
  g.sampling.repetition_penalty = static_cast<float>(num.real("repetition-penalty"));
  g.sampling.repeat_last_n =
      static_cast<std::int32_t>(std::clamp<std::int64_t>(num.integer("repeat-last-n"), -1, 1 << 30));
  const std::int64_t seed = num.integer("seed");
  if (seed < 0) throw std::invalid_argument(fmt::format("--seed must be >= 0, got {}", seed));
  g.sampling.seed = static_cast<std::uint64_t>(seed);
  g.max_tokens = num.integer("max-tokens");
  g.context = num.integer("context");
  g.threads = static_cast<int>(std::clamp<std::int64_t>(num.integer("threads"), -1, 4096));
  for (std::int64_t id : stop_ids) {
    if (id < 0 || id > INT32_MAX) throw std::invalid_argument(fmt::format("--stop-id must be a token id, got {}", id));
    g.stop_ids.push_back(static_cast<std::int32_t>(id));
  }
  g.stop_at_eos = !ignore_eos;
  g.validate();
  return g;
}

}  // namespace lockstep::cli
