// The decode-only CPU model (model/decode_model.hpp) against the training
// model's decode sessions, on GGUF files written by lockstep's writer:
//   * the same logits bits: every position from one prefill, token by token,
//     8 sequences together, on 1 and 2 threads, and next_logits — BitNet from
//     an I2_S file with an F16 embedding (the 2B4T file's types: the decode
//     model holds codes and f16), LLaMA from an F16 and an F32 file; micro
//     shapes (the head through gemm_packed) and heads of >= 4096 outputs
//     (column panels: a tied embedding read from the head's panels, an untied
//     f16 head and f16 embedding rows); F16 and Q8_0 files' projections on f16
//     and Q8 panels (a Q8_0 tied embedding read from the head's Q8 panels);
//   * its bytes: the count it reports is the formula of what it holds (2-bit
//     codes, f16 head panels, f32 norms, nothing else), and what the heap
//     really grew by when it was built;
//   * refusals: dtypes it cannot hold, TERNARY2 outside BitLinear, gpt2,
//     training calls.
#include <gtest/gtest.h>
#include <malloc.h>

#include <filesystem>
#include <string>
#include <vector>

#include "decode_util.hpp"
#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/decode_model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/tensor/storage.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer::testing;
namespace fs = std::filesystem;

struct FileCase {
  std::string name;
  model::ModelConfig cfg;
  std::uint32_t matrix_type;
  std::uint32_t embedding_type;
};
void PrintTo(const FileCase& c, std::ostream* os) { *os << c.name; }

std::vector<FileCase> file_cases() {
  model::ModelConfig bw = model::preset("bitnet-micro");
  bw.vocab_size = 5000;  // >= 4096: the tied head on f16 panels
  model::ModelConfig lw = model::preset("llama-micro");
  lw.vocab_size = 4500;
  lw.tie_embeddings = false;  // an untied f16 head on panels, f16 embedding rows
  const model::ModelConfig b = model::preset("bitnet-micro"), l = model::preset("llama-micro");
  return {{"bitnet_micro_i2s", b, io::kGgmlTypeI2S, io::kGgmlF16},
          {"bitnet_vocab5000_i2s", bw, io::kGgmlTypeI2S, io::kGgmlF16},
          {"llama_micro_f16", l, io::kGgmlF16, io::kGgmlF16},
          {"llama_micro_f32", l, io::kGgmlF32, io::kGgmlF32},
          {"llama_vocab4500_untied_f16", lw, io::kGgmlF16, io::kGgmlF16},
          {"llama_micro_q8_0", l, io::kGgmlQ8_0, io::kGgmlQ8_0},
          {"llama_vocab4500_untied_q8_0", lw, io::kGgmlQ8_0, io::kGgmlQ8_0},
          {"bitnet_vocab5000_i2s_q8_0", bw, io::kGgmlTypeI2S, io::kGgmlQ8_0}};
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("lockstep_decode_model_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A random model of the case's config written as a GGUF of its types.
std::string write_file(const FileCase& c, const fs::path& dir) {
  auto m = model::make_cpu_model(c.cfg);
  mt::randomize(m->params(), 0xf11e, 0.2);
  load::GgufWriteOptions opt;
  opt.matrix_type = c.matrix_type;
  opt.embedding_type = c.embedding_type;
  const std::string path = (dir / "m.gguf").string();
  load::write_gguf_model(path, c.cfg, m->params(), opt);
  return path;
}

// The bytes DecodeBackend::pack_linear's form of a [out, in] matrix of GGUF
// type `type` takes: Q8 panels (64 columns; 32 codes + an f16 scale per 32
// weights) where Q8_0 holds the rows (whole blocks; the writer keeps others
// F32), f16 panels for F16, else f32: gemm_packed's [in, ldb] below 4096
// outputs, panels above.
std::size_t form_bytes(std::size_t out, std::size_t in, std::uint32_t type) {
  const std::size_t panel_cols = (out + 63) / 64 * 64;
  if (type == io::kGgmlQ8_0 && in % 32 == 0) return panel_cols * in * 34 / 32;
  if (type == io::kGgmlF16) return panel_cols * in * 2;
  return out < 4096 ? in * cpu::packed_ld(out) * 4 : panel_cols * in * 4;
}

class DecodeModelFile : public ::testing::TestWithParam<FileCase> {
 protected:
  SplitMicroShapes split_;
};

TEST_P(DecodeModelFile, SameLogitsBitsAsTheTrainingModel) {
  const fs::path dir = temp_dir(GetParam().name);
  const std::string path = write_file(GetParam(), dir);
  load::LoadedModel f32 = load::load_model_file(path);
  for (const std::string& note : f32.notes)  // the F32 model holds the file's ternary scales
    ASSERT_EQ(note.find("is no mean"), std::string::npos) << note;
  auto train = load::make_loaded_model(std::move(f32));
  load::LoadedModel compact = load::load_model_file(path, load::decode_load_options());
  if (GetParam().cfg.family == model::Family::Bitnet) {  // the codes and the f16 embedding as the file holds them
    std::size_t ternary = 0, half = 0;
    for (const auto& p : compact.params) {
      ternary += p.dtype == tensor::DType::ternary2;
      half += p.dtype == tensor::DType::f16;
    }
    EXPECT_EQ(ternary, 7u * static_cast<std::size_t>(GetParam().cfg.n_layer));
    EXPECT_EQ(half, GetParam().embedding_type == io::kGgmlF16 ? 1u : 0u);
  }
  auto dec = load::make_decode_model(std::move(compact), 2);
  {  // each matrix in its most compact exact form (the one the file's type gives)
    std::size_t linear = 0, head = 0;
    const bool tied = GetParam().cfg.tie_embeddings;
    for (const model::ParamSpec& sp : model::param_specs(GetParam().cfg)) {
      if (sp.shape.size() != 2) continue;
      const auto out = static_cast<std::size_t>(sp.shape[0]), in = static_cast<std::size_t>(sp.shape[1]);
      const bool embedding = sp.name == "model.embed_tokens.weight";
      if (embedding && tied) head += form_bytes(out, in, GetParam().embedding_type);
      else if (sp.name == "lm_head.weight") head += form_bytes(out, in, GetParam().matrix_type);
      else if (!embedding && GetParam().cfg.family == model::Family::Llama)
        linear += form_bytes(out, in, GetParam().matrix_type);
    }
    EXPECT_EQ(dec->bytes().linear, linear);
    EXPECT_EQ(dec->bytes().head, head);
  }

  const auto& cfg = train->config();
  const std::size_t T = static_cast<std::size_t>(cfg.max_seq), V = static_cast<std::size_t>(cfg.vocab_size);
  const auto t = random_tokens(T, cfg.vocab_size, 5);
  const std::vector<float> want = prefill_all(*train, t, 2);
  EXPECT_EQ(mt::differing_bits(prefill_all(*dec, t, 2), want), 0u) << "one prefill";
  EXPECT_EQ(mt::differing_bits(prefill_all(*dec, t, 1, 7), want), 0u) << "prefill in chunks of 7, 1 thread";
  EXPECT_EQ(mt::differing_bits(token_by_token(*dec, t, 2), want), 0u) << "token by token";
  for (std::size_t i : {std::size_t{0}, T / 2, T - 1}) {
    const std::span<const std::int32_t> w(t.data(), i + 1);
    EXPECT_EQ(mt::differing_bits(dec->next_logits(w, 1), train->next_logits(w, 1)), 0u) << "next_logits at " << i;
  }
  const Eight e = eight_sequences(cfg, 3);
  const auto a = batched(*train, e.seqs, e.prompt, 2), b = batched(*dec, e.seqs, e.prompt, 2);
  for (std::size_t s = 0; s < a.size(); ++s)
    EXPECT_EQ(mt::differing_bits(b[s], a[s]), 0u) << "sequence " << s << " of 8 decoded together";
  (void)V;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Files, DecodeModelFile, ::testing::ValuesIn(file_cases()),
                         [](const auto& i) { return i.param.name; });

// The heap in use (glibc: small blocks and mmapped ones); 0 where the
// allocator is not glibc's (a sanitizer's).
std::size_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// A BitNet of 2B4T's kinds at a small size: tied f16 embedding of a
// >= 4096 vocabulary (the head on f16 panels), I2_S projections.
TEST(DecodeModelBytes, TheCountIsTheFormulaAndWhatTheHeapHolds) {
  model::ModelConfig cfg = model::preset("bitnet-micro");
  cfg.d_model = 256;
  cfg.n_head = 4;
  cfg.n_kv_head = 2;
  cfg.head_dim = 64;
  cfg.d_ff = 704;  // K = 704: not whole 64-code units
  cfg.n_layer = 3;
  cfg.vocab_size = 8192;
  cfg.validate();
  const fs::path dir = temp_dir("bytes");
  const std::string path = write_file({"bytes", cfg, io::kGgmlTypeI2S, io::kGgmlF16}, dir);
  load::LoadedModel loaded = load::load_model_file(path, load::decode_load_options());
  std::size_t loaded_bytes = 0, f32_bytes = 0;
  for (const auto& p : loaded.params) loaded_bytes += model::bytes_held(p);
  {
    const load::LoadedModel f32 = load::load_model_file(path);
    for (const auto& p : f32.params) f32_bytes += model::bytes_held(p);
  }

  // The formula: a BitLinear's rows, rounded up to groups of 8, in 64 bytes
  // per 256 codes (2 bits a code, whole chunks); the head f16 in 64-column
  // panels; norms f32; no embedding copy (the head's panels).
  std::size_t ternary = 0, norms = 0;
  for (const model::ParamSpec& s : model::param_specs(cfg)) {
    const auto rows = static_cast<std::size_t>(s.shape[0]);
    if (s.shape.size() == 1) norms += 4 * rows;
    else if (s.name != "model.embed_tokens.weight")
      ternary += (rows + 7) / 8 * 8 * 64 * ((static_cast<std::size_t>(s.shape[1]) + 255) / 256);
  }
  const std::size_t V = static_cast<std::size_t>(cfg.vocab_size), D = static_cast<std::size_t>(cfg.d_model);
  const std::size_t head = (V + 63) / 64 * 64 * D * 2;

  const std::size_t before = heap_in_use();
  auto dec = load::make_decode_model(std::move(loaded), 2);
  const std::size_t after = heap_in_use();
  const model::DecodeModelBytes b = dec->bytes();
  EXPECT_EQ(b.ternary, ternary);
  EXPECT_EQ(b.head, head);
  EXPECT_EQ(b.norms, norms);
  EXPECT_EQ(b.linear, 0u);
  EXPECT_EQ(b.embedding, 0u);
  EXPECT_EQ(b.per_pass(), b.total());
  // The F32 load's parameters alone: values and gradients, 8 bytes a weight.
  std::size_t weights = 0;
  for (const model::ParamSpec& s : model::param_specs(cfg)) weights += tensor::numel_of(s.shape);
  EXPECT_EQ(f32_bytes, 8 * weights);
  if (before != 0) {
    // The heap grew by what the model holds less the parameters it consumed;
    // names, maps and the key table are the slack (a few KB).
    const double held = static_cast<double>(after) - static_cast<double>(before) + static_cast<double>(loaded_bytes);
    EXPECT_NEAR(held, static_cast<double>(b.total()), 64.0 * 1024) << "heap " << held << " vs counted " << b.total();
  }
  // And it decodes (what it holds is enough for a pass).
  EXPECT_EQ(dec->next_logits(random_tokens(4, cfg.vocab_size, 1), 1).size(), V);
  fs::remove_all(dir);
}

std::vector<model::Param> zero_params(const model::ModelConfig& cfg) { return model::make_float_params(cfg); }

TEST(DecodeModelRefusals, DtypesItCannotHoldTernaryOutsideBitLinearGpt2AndTraining) {
  const model::ModelConfig l = model::preset("llama-micro");
  {  // BF16 frozen: named
    auto ps = zero_params(l);
    auto& p = ps[1];
    p.dtype = tensor::DType::bf16;
    p.trainable = false;
    p.frozen_value = tensor::Storage::bf16_rounded(p.shape, p.value);
    p.value.clear();
    p.grad.clear();
    try {
      (void)model::make_cpu_decode_model(l, ps);
      ADD_FAILURE() << "BF16 accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(p.name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("BF16"), std::string::npos) << e.what();
    }
  }
  {  // TERNARY2 in a llama model
    auto ps = zero_params(l);
    auto& p = ps[1];
    p.dtype = tensor::DType::ternary2;
    p.trainable = false;
    p.frozen_value = tensor::Storage::ternary(p.shape, std::vector<std::int8_t>(p.value.size(), 1), 0.5f);
    p.value.clear();
    p.grad.clear();
    EXPECT_THROW((void)model::make_cpu_decode_model(l, ps), std::invalid_argument);
  }
  const model::ModelConfig g = model::preset("gpt2-micro");
  EXPECT_THROW((void)model::make_cpu_decode_model(g, zero_params(g)), std::invalid_argument);
  auto ps = zero_params(l);
  std::swap(ps[1], ps[2]);
  EXPECT_THROW((void)model::make_cpu_decode_model(l, ps), std::invalid_argument) << "order not the config's";
  auto dec = model::make_cpu_decode_model(l, zero_params(l));
  EXPECT_THROW(dec->params(), std::logic_error);
  EXPECT_THROW(dec->init(1), std::logic_error);
  const std::vector<std::int32_t> t{1, 2};
  EXPECT_THROW((void)dec->forward_backward(t, t, 1, 2, false, 1), std::logic_error);
  EXPECT_THROW((void)dec->loss(t, t, 1, 2, 1), std::logic_error);
}

}  // namespace
