// lockstep finetune: LoRA finetuning of a frozen base on SFT records
// (train/finetune.hpp, docs/LORA.md).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "generate_model.hpp"
#include "lockstep/data/sft.hpp"
#include "lockstep/train/finetune.hpp"

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

// A lockstep run or checkpoint directory (trainer_state.json, or `latest`).
bool is_lockstep_checkpoint(const std::string& path) {
  return fs::is_directory(path) && (fs::exists(fs::path(path) / "latest") || fs::exists(fs::path(path) / "trainer_state.json"));
}

class FinetuneCommand final : public Command {
 public:
  void add(CLI::App& app) override {
    cmd_ = app.add_subcommand("finetune",
                              "LoRA finetuning: a frozen base (float or ternary BitNet), adapter tensors on the "
                              "target projections, the loss on the completion tokens (docs/LORA.md)");
    cmd_->add_option("--base", base_, "the base model: a GGUF file, a Hugging Face directory, or a lockstep run/checkpoint directory")
        ->required();
    cmd_->add_option("--data", data_, "JSONL records: {\"prompt\",\"completion\"} or {\"messages\":[...]}")->required();
    cmd_->add_option("--out", out_, "the run directory (lora_state.safetensors, finetune_state.json, metrics.jsonl)")
        ->required();
    cmd_->add_option("--tokenizer", tokenizer_, "a Hugging Face tokenizer.json instead of the base's");
    cmd_->add_option("--rank,-r", rank_, "LoRA rank r")->capture_default_str();
    cmd_->add_option("--alpha", c_.lora.alpha, "lora_alpha (scale alpha/r)")->capture_default_str();
    cmd_->add_option("--dropout", c_.lora.dropout, "lora_dropout on the adapter's input (counter-based)")
        ->capture_default_str();
    cmd_->add_flag("--rslora", c_.lora.rslora, "rank-stabilized scale alpha/sqrt(r)");
    cmd_->add_option("--targets", c_.lora.targets,
                     "target modules (q_proj k_proj v_proj o_proj gate_proj up_proj down_proj)")
        ->delimiter(',')
        ->capture_default_str();
    cmd_->add_option("--lr", c_.lr, "peak learning rate (AdamW)")->capture_default_str();
    cmd_->add_option("--beta1", c_.beta1, "AdamW beta1")->capture_default_str();
    cmd_->add_option("--beta2", c_.beta2, "AdamW beta2")->capture_default_str();
    cmd_->add_option("--eps", c_.eps, "AdamW epsilon")->capture_default_str();
    cmd_->add_option("--weight-decay", c_.weight_decay, "decoupled weight decay (on lora_A and lora_B)")
        ->capture_default_str();
    cmd_->add_option("--warmup-ratio", c_.warmup_ratio, "linear warmup over this fraction of the steps, then cosine")
        ->capture_default_str();
    cmd_->add_option("--min-lr-ratio", c_.min_lr_ratio, "the cosine's final lr as a fraction of the peak")
        ->capture_default_str();
    cmd_->add_option("--clip", c_.grad_clip, "global gradient-norm clip")->capture_default_str();
    cmd_->add_option("--steps", c_.steps, "optimizer steps (0: epochs x ceil(records / batch))")->capture_default_str();
    cmd_->add_option("--epochs", c_.epochs, "passes over the records when --steps is 0")->capture_default_str();
    cmd_->add_option("--batch", c_.batch, "records per step (padded to the longest)")->capture_default_str();
    cmd_->add_option("--max-seq", c_.max_seq, "cut records to this many tokens (0: the model's context)")
        ->capture_default_str();
    cmd_->add_option("--seed", c_.seed, "adapter init, dropout and record order")->capture_default_str();
    cmd_->add_option("--save-every", c_.save_every, "save the state every N steps (0: at the end)")->capture_default_str();
    cmd_->add_option("--log-every", c_.log_every, "progress line period when not a terminal")->capture_default_str();
    cmd_->add_option("--threads", c_.threads, "CPU threads (0: all cores)")->capture_default_str();
    cmd_->add_flag("--resume", resume_, "continue the run in --out (the same flags)");
  }

  int run() override {
    LoadedModel m;
    std::vector<data::SftExample> records;
    try {
      if (rank_ <= 0) throw std::invalid_argument("--rank must be > 0");
      c_.lora.rank = static_cast<std::size_t>(rank_);
      c_.lora.base_model = base_;
      c_.validate();
      ModelSource src;
      (is_lockstep_checkpoint(base_) ? src.checkpoint : src.model_file) = base_;
      src.tokenizer = tokenizer_;
      m = src.load();
      records = data::read_sft_jsonl(data_, *m.tokenizer);
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep finetune: {}\n", e.what());
      return 2;
    }
    try {
      train::FinetuneIo io;
      io.resume = resume_;
      io.progress = stderr;
      io.tty = ::isatty(2) != 0;
      const auto rep = train::finetune(*m.model, records, c_, out_, io);
      fmt::print(stderr, "lockstep finetune: {} steps, last loss {:.4f}, {:.1f} tok/s; adapter {:016x} in {}\n",
                 rep.step, rep.last_loss, rep.tokens_per_second, rep.adapter_hash,
                 (fs::path(out_) / "lora_state.safetensors").string());
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep finetune: {}\n", e.what());
      return 1;
    }
    return 0;
  }

 private:
  std::string base_, data_, out_, tokenizer_;
  long long rank_ = 8;
  bool resume_ = false;
  train::FinetuneConfig c_;
};

}  // namespace

std::unique_ptr<Command> make_finetune_command() { return std::make_unique<FinetuneCommand>(); }

}  // namespace lockstep::cli
