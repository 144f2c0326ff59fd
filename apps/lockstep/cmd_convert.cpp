// lockstep convert IN --out OUT: model files between formats
// (load/model_file.hpp). IN: a GGUF file, a Hugging Face directory or
// .safetensors file, or a lockstep checkpoint (run or step directory).
// OUT ending in .gguf: GGUF with --type f32|f16|bf16|q8_0|i2_s matrices;
// otherwise a Hugging Face directory (F32, or BF16 with --type bf16; a BitNet
// model with ternary weights is written packed).
// --synthetic PRESET instead of IN: a model of the preset's shapes with
// random weights (BitNet: random ternary codes), for benchmarks:
//   lockstep convert --synthetic bitnet-b1.58-2b --type i2_s --out 2b4t.gguf
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/checkpoint.hpp"
#include "command.hpp"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;

const std::map<std::string, std::uint32_t> kTypes = {
    {"f32", io::kGgmlF32}, {"f16", io::kGgmlF16}, {"bf16", io::kGgmlBF16}, {"q8_0", io::kGgmlQ8_0}, {"i2_s", io::kGgmlTypeI2S}};

bool ends_with(const std::string& s, std::string_view x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// A model of the preset's shapes: norms 1, the embedding (and untied head)
// N(0, 0.02) from Philox, BitNet's projections random ternary codes (a third
// each) with scale 0.02 held as TERNARY2, LLaMA's matrices N(0, 0.02).
load::LoadedModel synthetic(const std::string& preset, std::uint64_t seed) {
  load::LoadedModel m;
  m.config = model::preset(preset);
  m.format = "synthetic";
  for (const model::ParamSpec& spec : model::param_specs(m.config)) {
    model::Param p;
    p.name = spec.name;
    p.shape = spec.shape;
    p.decay = spec.decay;
    const std::size_t n = tensor::numel_of(spec.shape);
    const std::uint64_t stream = model::param_stream(spec.name);
    const bool ternary = m.config.family == model::Family::Bitnet && spec.shape.size() == 2 &&
                         spec.name != "model.embed_tokens.weight" && spec.name != "lm_head.weight";
    if (ternary) {
      std::vector<std::int8_t> codes(n);
      for (std::size_t b = 0; b < (n + 3) / 4; ++b) {  // one Philox block gives 4 codes (word i % 4 of block i / 4)
        const auto blk = num::rng::block(seed, stream, b);
        for (std::size_t k = 0; k < 4 && 4 * b + k < n; ++k)
          codes[4 * b + k] = static_cast<std::int8_t>(static_cast<int>(blk.w[k] % 3) - 1);
      }
      p.dtype = tensor::DType::ternary2;
      p.trainable = false;
      p.frozen_value = tensor::Storage::ternary(spec.shape, codes, 0.02f);
    } else {
      p.value.resize(n);
      model::init_param(spec, p.value.data(), n, seed, 2);
      p.grad.assign(n, 0.0f);
    }
    m.params.push_back(std::move(p));
  }
  return m;
}

class ConvertCommand : public Command {
 public:
  void add(CLI::App& app) override {
    cmd_ = app.add_subcommand("convert", "convert model files: HF safetensors <-> GGUF (F32/F16/BF16/Q8_0/I2_S), lockstep checkpoints -> GGUF");
    cmd_->add_option("input", in_, "a .gguf file, a Hugging Face directory or .safetensors file, or a lockstep checkpoint");
    cmd_->add_option("--out", out_, "the output: FILE.gguf, or a directory (Hugging Face safetensors)")->required();
    cmd_->add_option("--type", type_, "matrix type: f32, f16, bf16, q8_0, i2_s (GGUF); f32, bf16 (HF)")->capture_default_str();
    cmd_->add_option("--embedding-type", embd_type_, "GGUF embedding type (default: f16 with --type i2_s, else f32)");
    cmd_->add_option("--synthetic", synthetic_, "write a random model of this preset instead of converting (benchmarks)");
    cmd_->add_option("--seed", seed_, "seed of --synthetic")->capture_default_str();
  }

  int run() override {
    try {
      if (in_.empty() == synthetic_.empty()) throw std::invalid_argument("give either an input file or --synthetic PRESET");
      if (!kTypes.count(type_)) throw std::invalid_argument("--type " + type_ + " is not one of f32, f16, bf16, q8_0, i2_s");
      load::LoadedModel m;
      if (!synthetic_.empty()) {
        m = synthetic(synthetic_, seed_);
      } else {
        std::string in = in_;
        if (fs::is_directory(in) && fs::exists(fs::path(in) / "latest")) in = train::resolve_checkpoint(in);
        m = load::load_model_file(in, {load::TernaryAs::ternary2});  // codes and scales pass through exactly
      }
      for (const auto& note : m.notes) fmt::print(stderr, "lockstep convert: note: {}\n", note);
      if (ends_with(out_, ".gguf")) {
        load::GgufWriteOptions opt;
        opt.matrix_type = kTypes.at(type_);
        if (!embd_type_.empty()) {
          if (!kTypes.count(embd_type_) || embd_type_ == "i2_s") throw std::invalid_argument("--embedding-type " + embd_type_ + " is not one of f32, f16, bf16, q8_0");
          opt.embedding_type = kTypes.at(embd_type_);
        } else if (opt.matrix_type == io::kGgmlTypeI2S) {
          opt.embedding_type = io::kGgmlF16;  // as bitnet.cpp's I2_S files
        }
        opt.name = synthetic_.empty() ? fs::path(in_).filename().string() : "synthetic " + synthetic_;
        if (!synthetic_.empty() || ends_with(in_, ".gguf") == false)
          fmt::print(stderr, "lockstep convert: note: no tokenizer is written (tokenizer.ggml.* keys come only from a GGUF input)\n");
        if (ends_with(in_, ".gguf")) {
          const io::GgufFile src = io::gguf_read(in_);
          for (const auto& [k, v] : src.metadata)
            if (k.rfind("tokenizer.", 0) == 0 && k != "tokenizer.ggml.bos_token_id" && k != "tokenizer.ggml.eos_token_id")
              opt.extra.emplace_back(k, v);
        }
        load::write_gguf_model(out_, m.config, m.params, opt);
      } else {
        if (type_ != "f32" && type_ != "bf16") throw std::invalid_argument("--type " + type_ + " is not written to a Hugging Face directory (f32, bf16)");
        load::write_hf_model(out_, m.config, m.params, type_ == "bf16");
      }
      fmt::print("{}: {} ({})\n", out_, m.config.summary(), type_);
      return 0;
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "lockstep convert: {}\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep convert: {}\n", e.what());
      return 1;
    }
  }

 private:
  std::string in_, out_, type_ = "f32", embd_type_, synthetic_;
  std::uint64_t seed_ = 1;
};

}  // namespace

std::unique_ptr<Command> make_convert_command() { return std::make_unique<ConvertCommand>(); }

}  // namespace lockstep::cli
