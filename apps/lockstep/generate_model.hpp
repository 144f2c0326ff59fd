// What `lockstep generate` and `lockstep chat` share: where the model comes
// from (--checkpoint, --device) and the sampling flags.
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lockstep/infer/generate.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tok/tokenizer.hpp"
#include "numeric_flags.hpp"

namespace lockstep::cli {

struct LoadedModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
};

// Where the model comes from: --checkpoint DIR (a lockstep run or checkpoint
// directory with its tokenizer.json) or --model FILE.gguf|DIR (a GGUF file
// with its vocabulary, or a Hugging Face directory with its tokenizer.json;
// load/model_file.hpp); --tokenizer tokenizer.json instead of the model's;
// --device cpu|cuda; --adapter DIR (a PEFT-format LoRA adapter, load/adapter.hpp)
// applied unmerged (load/adapted_model.hpp: the model's LoRA layers, decoded
// with the KV cache; GPT-2 or lm_head modules on the CPU's spec stand-in), or
// with --merge-adapter folded into the weights first (any device; not the
// unmerged bits: docs/LORA.md).
struct ModelSource {
  std::string checkpoint, model_file, tokenizer, device = "cpu", adapter;
  bool merge_adapter = false;
  void add(CLI::App* cmd);
  LoadedModel load() const;  // std::invalid_argument for a bad flag or a missing file
};

// --temperature, --top-k, --top-p, --repetition-penalty, --repeat-last-n,
// --seed, --max-tokens, --context, --threads, and the stop ids (--stop-id,
// --ignore-eos), defaults from infer::GenerateOptions printed as written.
struct SamplingFlags {
  NumericFlags num;
  std::vector<std::int64_t> stop_ids;
  bool ignore_eos = false;
  void add(CLI::App* cmd);
  infer::GenerateOptions read() const;  // validated
};

}  // namespace lockstep::cli
