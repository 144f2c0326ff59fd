// A lockstep checkpoint of a micro LLaMA with a small trained BPE vocabulary:
// the base `lockstep finetune` runs on in tests/train/finetune_cli_test.cpp
// and its GPU twin finetune_cli_cuda_test.cpp.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "lockstep/model/config.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/bpe_train.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace lockstep::test {

// A lockstep checkpoint of a micro LLaMA with a small trained BPE vocabulary.
inline std::filesystem::path micro_checkpoint(const std::filesystem::path& dir) {
  lockstep::tok::BpeTrainOptions o;
  o.vocab_size = 300;
  const auto tok = lockstep::tok::train_bpe(std::string_view("the cat sat on the mat; the rat ate the cat's hat. ") ,o);
  auto cfg = lockstep::model::preset("llama-micro");
  cfg.vocab_size = 300;
  auto model = lockstep::model::make_cpu_model(cfg);
  model->init(2);
  lockstep::train::OptimizerState opt;
  opt.init(*model);
  lockstep::train::CheckpointMeta meta;
  return lockstep::train::save_checkpoint(dir.string(), *model, opt, meta, lockstep::tok::to_hf_tokenizer_json(tok));
}

}  // namespace lockstep::test
