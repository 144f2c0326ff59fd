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
#include "lockstep/load/adapter.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/train/finetune.hpp"
#include "numeric_flags.hpp"

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
    cmd_->add_option("--out", out_, "the run directory (adapter/ in PEFT's format, lora_state.safetensors, finetune_state.json, metrics.jsonl)")
        ->required();
    cmd_->add_option("--tokenizer", tokenizer_, "a Hugging Face tokenizer.json instead of the base's");
    cmd_->add_option("--device", device_, "cpu or cuda (the same adapter bits either way)")->capture_default_str();
    const train::FinetuneConfig d;
    num_.add(cmd_, "rank", "LoRA rank r", num_text(d.lora.rank));
    num_.add(cmd_, "alpha", "lora_alpha (scale alpha/r)", num_text(d.lora.alpha));
    num_.add(cmd_, "dropout", "lora_dropout on the adapter's input (counter-based: the same mask on every device)",
             num_text(d.lora.dropout));
    cmd_->add_flag("--rslora", c_.lora.rslora, "rank-stabilized scale alpha/sqrt(r)");
    cmd_->add_option("--targets", c_.lora.targets,
                     "target modules, comma-separated (q_proj k_proj v_proj o_proj gate_proj up_proj down_proj)")
        ->delimiter(',')
        ->capture_default_str();
    num_.add(cmd_, "lr", "peak learning rate (AdamW)", num_text(d.lr));
    num_.add(cmd_, "beta1", "AdamW beta1", num_text(d.beta1));
    num_.add(cmd_, "beta2", "AdamW beta2", num_text(d.beta2));
    num_.add(cmd_, "eps", "AdamW epsilon", num_text(d.eps));
    num_.add(cmd_, "weight-decay", "decoupled weight decay (on lora_A and lora_B)", num_text(d.weight_decay));
    num_.add(cmd_, "warmup-ratio", "linear warmup over this fraction of the steps, then cosine", num_text(d.warmup_ratio));
    num_.add(cmd_, "min-lr-ratio", "the cosine's final lr as a fraction of the peak", num_text(d.min_lr_ratio));
    num_.add(cmd_, "clip", "global gradient-norm clip", num_text(d.grad_clip));
    num_.add(cmd_, "steps", "optimizer steps (0: epochs x ceil(records / batch))", num_text(d.steps));
    num_.add(cmd_, "epochs", "passes over the records when --steps is 0", num_text(d.epochs));
    num_.add(cmd_, "batch", "records per step (padded to the longest)", num_text(d.batch));
    num_.add(cmd_, "max-seq", "cut records to this many tokens (0: the model's context)", num_text(d.max_seq));
    num_.add(cmd_, "seed", "adapter init, dropout and record order", num_text(d.seed));
    num_.add(cmd_, "save-every", "save the state every N steps (0: at the end)", num_text(d.save_every));
    num_.add(cmd_, "log-every", "progress line period when not a terminal", num_text(d.log_every));
    num_.add(cmd_, "threads", "CPU threads (0: all cores)", num_text(d.threads));
    cmd_->add_flag("--resume", resume_, "continue the run in --out (the same flags)");
  }

  int run() override {
    LoadedModel m;
    std::vector<data::SftExample> records;
    try {
      const std::int64_t rank = num_.integer("rank");
      if (rank <= 0) throw std::invalid_argument("--rank must be > 0");
      c_.lora.rank = static_cast<std::size_t>(rank);
      c_.lora.alpha = num_.real("alpha");
      c_.lora.dropout = num_.real("dropout");
      c_.lr = num_.real("lr");
      c_.beta1 = num_.real("beta1");
      c_.beta2 = num_.real("beta2");
      c_.eps = num_.real("eps");
      c_.weight_decay = num_.real("weight-decay");
      c_.warmup_ratio = num_.real("warmup-ratio");
      c_.min_lr_ratio = num_.real("min-lr-ratio");
      c_.grad_clip = num_.real("clip");
      c_.steps = num_.integer("steps");
      c_.epochs = num_.integer("epochs");
      c_.batch = num_.integer("batch");
      c_.max_seq = num_.integer("max-seq");
      const std::int64_t seed = num_.integer("seed");
      if (seed < 0) throw std::invalid_argument("--seed must be >= 0");
      c_.seed = static_cast<std::uint64_t>(seed);
      c_.save_every = num_.integer("save-every");
      c_.log_every = num_.integer("log-every");
      c_.threads = static_cast<int>(num_.integer("threads"));
      c_.lora.base_model = base_;
      c_.validate();
      ModelSource src;
      (is_lockstep_checkpoint(base_) ? src.checkpoint : src.model_file) = base_;
      src.tokenizer = tokenizer_;
      src.device = device_;
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
      // The adapter in PEFT's format beside the run's own state: what
      // `generate --adapter`, `lockstep merge` and PEFT read.
      model::LoraConfig peft = c_.lora;
      if (peft.base_model.empty()) peft.base_model = base_;
      const std::string adapter_dir = (fs::path(out_) / "adapter").string();
      load::save_adapter(adapter_dir, model::adapter_of(m.model->params(), peft));
      fmt::print(stderr, "lockstep finetune: {} steps, last loss {:.4f}, {:.1f} tok/s; adapter {:016x} in {}\n",
                 rep.step, rep.last_loss, rep.tokens_per_second, rep.adapter_hash, adapter_dir);
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep finetune: {}\n", e.what());
      return 1;
    }
    return 0;
  }

 private:
  std::string base_, data_, out_, tokenizer_, device_ = "cpu";
  bool resume_ = false;
  NumericFlags num_;
  train::FinetuneConfig c_;
};

}  // namespace

std::unique_ptr<Command> make_finetune_command() { return std::make_unique<FinetuneCommand>(); }

}  // namespace lockstep::cli
