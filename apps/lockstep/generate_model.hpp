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

// --checkpoint DIR (a lockstep run or checkpoint directory with its
// tokenizer.json) and --device cpu|cuda.
struct ModelSource {
  std::string checkpoint, device = "cpu";
  void add(CLI::App* cmd);
  LoadedModel load(int threads) const;
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
