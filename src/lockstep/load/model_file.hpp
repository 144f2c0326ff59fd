// Model files users hold, to a lockstep config and parameters, and back
// (docs/INFERENCE.md, "Model files"):
//   GGUF (llama.cpp, bitnet.cpp): architectures `llama` and `bitnet-b1.58`
//     (alias `bitnet-25`), tensors F32, F16, BF16, Q8_0 and I2_S;
//   Hugging Face directories (config.json + model.safetensors, or sharded
//     with model.safetensors.index.json): LlamaForCausalLM, and
//     BitNetForCausalLM as its bf16/f32 master checkpoint or its packed one
//     (uint8 [out/4, in] + weight_scale).
//
// Parameters come in model::param_specs(config) order under Hugging Face
// names, in lockstep's layout (matrices [out, in], RoPE rotate-half: a GGUF
// llama's q/k rows, permuted by llama.cpp's converter for its interleaved
// rotation, are put back; bitnet.cpp's converter does not permute and its
// runtime rotates halves, so a bitnet GGUF's rows are kept as they are).
//
// Ternary weights (I2_S, the packed HF form, and a float BitNet projection
// whose values are only {-s, 0, +s}, as bitnet.cpp's F16/F32 converter writes
// them) are held, by LoadOptions::ternary, either
//   as TERNARY2 frozen parameters (codes + the one scale; for a decode model
//     whose kernels read the codes), or
//   as F32 masters (the default: the model every lockstep device runs today)
//     chosen so that the model's own BitLinear quantizer (ops/quant.hpp:
//     absmean scale, ternary codes) gives back exactly these codes and this
//     scale — so the F32 model computes (acc · step) · scale with the file's
//     scale, bit for bit what a TERNARY2 model computes (ternary_master).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lockstep/io/gguf.hpp"
#include "lockstep/model/config.hpp"
#include "lockstep/model/decode_model.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::load {

enum class TernaryAs { f32_master, ternary2 };

struct LoadOptions {
  TernaryAs ternary = TernaryAs::f32_master;
  // GGUF F16 tensors that need no rearranging (not llama's q/k rows, not
  // BitNet projections) as frozen F16 parameters instead of widened to F32:
  // for the decode-only model (make_decode_model), which holds them as f16.
  bool keep_f16 = false;
};
// How the decode-only model wants a file: ternary weights as TERNARY2 (the
// file's codes and scale), F16 kept F16.
inline LoadOptions decode_load_options() { return {TernaryAs::ternary2, true}; }

struct LoadedModel {
  model::ModelConfig config;
  std::vector<model::Param> params;  // param_specs(config) order
  std::string format;                // "gguf", "hf", "hf-packed"
  std::vector<std::string> notes;    // what was converted on the way, one line each
};

// A .gguf file, or a directory / .safetensors file with its config.json
// beside it. Throws std::runtime_error with one line naming the file and the
// problem (unknown architecture, missing or ill-shaped tensor, bad data, ...).
LoadedModel load_model_file(const std::string& path, const LoadOptions& opt = {});
LoadedModel load_gguf_model(const std::string& path, const LoadOptions& opt = {});
// The same from a file in memory (tests, the fuzzer).
LoadedModel load_gguf_model_bytes(std::span<const unsigned char> bytes, const std::string& source,
                                  const LoadOptions& opt = {});
LoadedModel load_hf_model(const std::string& dir_or_file, const LoadOptions& opt = {});

// The config a GGUF's metadata describes (architecture llama / bitnet-b1.58 /
// bitnet-25); tied when the file has no output.weight.
model::ModelConfig gguf_model_config(const io::GgufFile& file);

// A model on `device` ("cpu", "cuda") holding the loaded parameters. F32
// parameters only (the float models refuse others by name: load with
// TernaryAs::f32_master).
std::unique_ptr<model::Model> make_loaded_model(LoadedModel loaded, const std::string& device = "cpu");

// The decode-only CPU model (model/decode_model.hpp) of a loaded model: each
// weight held once as the CPU decode kernels read it (BitLinear's 2-bit
// codes, the head's f16 panels, ...), no gradients. Load the file with
// decode_load_options() for the compact forms (any LoadOptions work: F32
// masters are quantized as the F32 model's decode quantizes them).
// threads: for the packing (0: all).
std::unique_ptr<model::DecodeModel> make_decode_model(LoadedModel loaded, int threads = 0);

// Names: a lockstep/HF parameter name and its GGUF tensor name
// ("model.layers.3.self_attn.q_proj.weight" <-> "blk.3.attn_q.weight").
// std::nullopt for a name the mapping does not know.
std::optional<std::string> gguf_name_of(const std::string& hf_name);
std::optional<std::string> hf_name_of(const std::string& gguf_name);

// F32 weights whose BitLinear quantization (ops::quantize_ternary<float>) is
// exactly (codes, scale): zeros where the code is 0, and magnitudes on one
// power-of-two grid elsewhere, so their canonical sum is exact in any order
// and sum / n rounds to `scale`. nullopt when no such sum exists (a scale
// below BitLinear's 1e-5 floor, or one that no float sum divided by n gives:
// float division by n does not reach every float). The loader then holds the
// nearest scale that is reachable and says so in LoadedModel::notes.
std::optional<std::vector<float>> ternary_master(std::span<const std::int8_t> codes, float scale);

// Hugging Face's packed BitNet weight: uint8 [out/4, in], row r + i·(out/4)
// of the ternary matrix in bits 2i..2i+1 of packed row r, field = code + 1.
std::vector<std::int8_t> hf_unpack_ternary(std::span<const std::uint8_t> packed, std::int64_t out, std::int64_t in,
                                           const std::string& what);
std::vector<std::uint8_t> hf_pack_ternary(std::span<const std::int8_t> codes, std::int64_t out, std::int64_t in);
// transformers' BitLinear (integrations/bitnet.py) computes
// y = (x_q · W_q) / (input_scale · weight_scale): weight_scale DIVIDES, it is
// 1 / mean|W| (the reciprocal of the ternary step). tests/load/hf_bitnet_check.py
// settles this against transformers on the device.
inline float step_from_hf_weight_scale(float weight_scale) { return 1.0f / weight_scale; }

// GGUF writing. Matrices (the linear projections) in `matrix_type`: F32,
// F16, BF16, Q8_0 (io/gguf_tensor.hpp ids) or kGgmlTypeI2S (BitNet only: the
// BitLinear codes and scale, from a TERNARY2 parameter or the model's own
// quantizer on an F32 master); the embedding in F32 unless `embedding_type`
// says otherwise (bitnet.cpp's I2_S files hold it F16); norms always F32.
// llama q/k rows are permuted to llama.cpp's order. `extra` metadata (a
// tokenizer's tokenizer.ggml.* keys) is written after the model's.
struct GgufWriteOptions {
  std::uint32_t matrix_type = 0;
  std::optional<std::uint32_t> embedding_type;
  std::string name = "lockstep";
  // BitNet projections in a float matrix_type: the F32 masters (false), or
  // code · scale of the model's quantizer (true: what bitnet.cpp's converter
  // writes into its F16/F32 files; read back as ternary).
  bool bitnet_ternary_floats = false;
  std::vector<std::pair<std::string, io::GgufValue>> extra;
};
void write_gguf_model(const std::string& path, const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                      const GgufWriteOptions& opt);
std::vector<unsigned char> serialize_gguf_model(const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                                                const GgufWriteOptions& opt);
// A Hugging Face directory: config.json (model::to_hf_config_json) and
// model.safetensors. Float parameters as F32 or BF16 (`bf16`); a BitNet
// model's TERNARY2 projections packed as transformers' BitLinear reads them
// (uint8 [out/4, in] and weight_scale = 1 / scale, F32), with the config's
// quantization_config saying so. Non-finite values are refused.
void write_hf_model(const std::string& dir, const model::ModelConfig& cfg, const std::vector<model::Param>& params,
                    bool bf16 = false);

// The architecture name lockstep writes: "llama" or "bitnet-b1.58".
std::string gguf_architecture(const model::ModelConfig& cfg);

}  // namespace lockstep::load
