// lockstep merge --base MODEL --adapter DIR --out FILE.gguf|DIR: a PEFT-format
// LoRA adapter folded into a float base's weights (load::merge_adapter:
// W' = W + (B·A)·s), written with the model writers (load/model_file.hpp): a
// GGUF file (--type f32|f16|bf16|q8_0 matrices; a GGUF base's tokenizer keys
// are kept) or a Hugging Face directory (f32, bf16; the base directory's
// tokenizer.json is copied). The merged model is for export: its logits are
// close to the unmerged adapter's, not the same bits (docs/LORA.md).
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "command.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;

class MergeCommand final : public Command {
 public:
  void add(CLI::App& app) override {
    cmd_ = app.add_subcommand("merge", "fold a LoRA adapter (PEFT format) into a float base model and write it");
    cmd_->add_option("--base", base_, "the base: FILE.gguf or a Hugging Face directory")->required();
    cmd_->add_option("--adapter", adapter_, "the adapter directory (adapter_config.json + adapter_model.safetensors)")
        ->required();
    cmd_->add_option("--out", out_, "FILE.gguf, or a directory (Hugging Face safetensors)")->required();
    cmd_->add_option("--type", type_, "matrix type: f32, f16, bf16, q8_0 (GGUF); f32, bf16 (HF)")->capture_default_str();
  }

  int run() override {
    try {
      static const std::map<std::string, std::uint32_t> kTypes = {
          {"f32", io::kGgmlF32}, {"f16", io::kGgmlF16}, {"bf16", io::kGgmlBF16}, {"q8_0", io::kGgmlQ8_0}};
      const bool gguf_out = out_.size() >= 5 && out_.compare(out_.size() - 5, 5, ".gguf") == 0;
      if (!kTypes.count(type_) || (!gguf_out && type_ != "f32" && type_ != "bf16"))
        throw std::invalid_argument(fmt::format("--type {} is not written to {}", type_, gguf_out ? "GGUF (f32, f16, bf16, q8_0)" : "a Hugging Face directory (f32, bf16)"));
      if (!fs::exists(base_)) throw std::invalid_argument(fmt::format("--base '{}' does not exist", base_));
      const model::Adapter adapter = load::load_adapter(adapter_);
      load::LoadedModel m = load::load_model_file(base_);
      load::merge_adapter(adapter, m.config, m.params);
      if (gguf_out) {
        load::GgufWriteOptions opt;
        opt.matrix_type = kTypes.at(type_);
        opt.name = fs::path(base_).filename().string() + " + " + fs::path(adapter_).filename().string();
        if (m.format == "gguf") {
          for (const auto& [k, v] : io::gguf_read(base_).metadata)
            if (k.rfind("tokenizer.", 0) == 0 && k != "tokenizer.ggml.bos_token_id" && k != "tokenizer.ggml.eos_token_id")
              opt.extra.emplace_back(k, v);
        }
        load::write_gguf_model(out_, m.config, m.params, opt);
      } else {
        load::write_hf_model(out_, m.config, m.params, type_ == "bf16");
        const fs::path dir = fs::is_directory(base_) ? fs::path(base_) : fs::path(base_).parent_path();
        if (fs::exists(dir / "tokenizer.json"))
          fs::copy_file(dir / "tokenizer.json", fs::path(out_) / "tokenizer.json", fs::copy_options::overwrite_existing);
      }
      fmt::print("{}: {} with {} adapted modules (r {}, scale {}) merged ({})\n", out_, m.config.summary(),
                 adapter.tensors.size(), adapter.config.rank, static_cast<float>(model::lora_scale(adapter.config)),
                 type_);
      return 0;
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "lockstep merge: {}\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep merge: error: {}\n", e.what());
      return 1;
    }
  }

 private:
  std::string base_, adapter_, out_, type_ = "f32";
};

}  // namespace

std::unique_ptr<Command> make_merge_command() { return std::make_unique<MergeCommand>(); }

}  // namespace lockstep::cli
