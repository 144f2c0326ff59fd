// Decode tokens/s of the decode mode (model/decode.hpp) against the memory
// bound of the same machine, measured in the same run.
//
//   decode_bench [--family llama|bitnet] [--preset NAME] [--device cpu|cuda]
//                [--threads N] [--prompt P] [--tokens T] [--batch B,...]
//                [--d D --layers L --heads H --kv-heads K --ff F --vocab V --ctx C]
//                [--profile PASSES]   (CUDA: after each batch's timed passes, PASSES
//                                      more under the step profile, its table printed)
//                [--variants "NAME:key=value,...;NAME:..."]   (CUDA: the batches once per
//                                      variant in this one process — one start-up, one model —
//                                      each under its kernel choices: pdl=0|1,
//                                      head=v1|v2|v2wide, attention=v1|v2|v2pdl|auto|v3,
//                                      gemv=v1|v2|v2pdl, epilogues=0|1, normgemv=0|1; keys
//                                      not named take the environment's choice)
//                [--capture PASSES]   (CUDA: after each batch's timed passes, PASSES more
//                                      inside cudaProfilerStart/Stop, graphs as timed, for
//                                      `ncu --profile-from-start off`: device time a kernel)
//                [--model FILE] [--write-gguf FILE --type f32|f16|bf16|q8_0|i2_s]
//
// --model FILE: the model of a file (a GGUF, or a Hugging Face directory)
// through lockstep's loader instead of a synthetic one; the shape flags do
// not apply, --ctx does when given. On the CPU it runs the decode-only model
// (load::make_decode_model, model/decode_model.hpp: each weight once as the
// decode kernels read it, BitLinear's 2-bit codes and an F16 embedding kept
// as the file holds them; the same logits bits), whose byte count it prints;
// --training-model runs the training model instead (load::make_loaded_model:
// rounded types widened to f32, ternary ones as F32 masters, gradients), as
// --device cuda always does.
// The same file runs in llama.cpp's llama-bench (bench/infer/cpu_baselines.sh).
//
// --write-gguf FILE: write the synthetic model (the shape flags or --preset)
// as a GGUF with lockstep's writer (load::write_gguf_model; matrices of
// --type, default f16; i2_s: BitNet's codes, the embedding f16 as bitnet.cpp's
// files) and exit, for `--model FILE` here and for llama.cpp on the same file.
//
// --preset bitnet-b1.58-2b: the synthetic 2B4T shapes (30 layers, hidden
// 2560, 20 heads of 128, 5 KV heads, FFN 6912, vocab 128256, the tied
// embedding as head) with values filled in parallel instead of the
// initializer (fast for 2.4G parameters): the embedding on an f16 grid (an
// F16 embedding, as the synthetic GGUF's), the projections uniform (their
// ternary codes about a third each), the norms 1. --ctx still applies, and
// so does --layers when given (fewer layers of the same shapes: the model
// holds values and gradients in f32, 19.3 GB at 30 layers).
//
// For each batch size B: B sequences of P prompt tokens are prefilled (timed:
// prefill tokens/s; a one-token pass first, not timed, so the session's
// one-time weight packing is outside), then T decode passes of B tokens each
// (timed: decode tokens/s = B·T / time, the logits brought to the host every
// pass; one decode pass before them is timed apart: on CUDA it captures the
// pass's graph, which the timed passes replay). The bound: each decode pass reads every weight once, in the form the
// decode backend reads it, and each sequence's K and V cache rows
// (2·layers·kv_dim·4 bytes a position, at the pass's mean length):
//   * CPU: BitLinear's 2-bit codes (M·16·ceil(K/64) bytes a matrix, read by
//     cpu::ternary_gemm at any batch), a Linear of >= 4096 outputs (the head)
//     as f16 when its values are f16 (cpu::half_gemm) else f32, every other
//     weight f32 (4 bytes); the token embedding only its B rows when it is
//     not also the head;
//   * CUDA: BitLinear's 2-bit codes (M·16·ceil(K/64) bytes a matrix), a
//     Linear of >= 4096 outputs (the head) as f16 when its values are f16
//     (2 bytes) else f32, every other weight f32; the token embedding only its
//     B rows when it is not also the head;
//   bytes per token = (weights + B·(embedding row + cache)) / B
//   bound tokens/s  = copy bandwidth / bytes per token,
// the copy bandwidth STREAM's (2·bytes / time of a memcpy of a buffer far
// larger than the caches, the best of several), measured in this run: at the
// start and again before each batch (the machine may be shared); each line's
// bound uses the best seen so far. The decode-only model's weight bytes are
// its own count of what it holds (DecodeModelBytes::per_pass).
// "cpu share": the process's CPU time during the timed decode passes over
// their wall time x threads (below 100%: the cores were shared, or threads
// waited for each other).
// CUDA: a decode pass runs as a CUDA graph (docs/perf/DECODE_CUDA.md, "CUDA
// graphs") unless LOCKSTEP_CUDA_GRAPHS=0; each batch's line says whether the
// timed passes did ("CUDA graphs: used, R of T passes ran as a graph": the
// first pass of a row pattern is launched, the second captured and launched)
// or not ("not used"). The --profile passes are launched (the step profile
// times every launch; no graph runs under it).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <sys/resource.h>

#include "list_arg.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/infer/sample.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/decode_model.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tensor/convert.hpp"
#include "lockstep/util/parallel.hpp"
#if defined(LOCKSTEP_HAVE_CUDA)
#include "lockstep/backend/cuda/decode_launch.hpp"
#include "lockstep/backend/cuda/decode_linear_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/graph.hpp"
#include "lockstep/backend/cuda/head_gemv_launch.hpp"
#include "lockstep/backend/cuda/pdl.hpp"
#include "lockstep/backend/cuda/profile.hpp"
#include "lockstep/backend/cuda/trace.hpp"
#endif

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// The process's resident memory now and its peak so far (/proc/self/status: VmRSS, VmHWM).
std::string resident_memory() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return "unknown (no /proc/self/status)";
  std::string now = "?", peak = "?";
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    const std::string l(line);
    const auto mb = [&](std::size_t from) {
      return fmt::format("{:.0f} MB", static_cast<double>(std::strtoull(l.c_str() + from, nullptr, 10)) / 1e3);
    };
    if (l.rfind("VmRSS:", 0) == 0) now = mb(6);
    if (l.rfind("VmHWM:", 0) == 0) peak = mb(6);
  }
  std::fclose(f);
  return now + " (peak so far " + peak + ")";
}
// The process's CPU time so far (user + system, all threads).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return s(u.ru_utime) + s(u.ru_stime);
}

// STREAM-style copy bandwidth (bytes read + written per second), the best of `reps`.
double host_copy_bandwidth(std::size_t bytes, int reps) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double s = seconds_since(t0);
    best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
    a[static_cast<std::size_t>(r) % bytes] = b[0];  // keep the copies observable
  }
  return best;
}

#if defined(LOCKSTEP_HAVE_CUDA)
double device_copy_bandwidth(std::size_t bytes, int reps) {
  lockstep::cuda::DeviceBuffer<float> a(bytes / 4), b(bytes / 4);
  lockstep::cuda::synchronize("bandwidth");
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    lockstep::cuda::copy_on_device(b.data(), a.data(), bytes);
    lockstep::cuda::synchronize("bandwidth");
    best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds_since(t0));
  }
  return best;
}
#endif

using lockstep::bench::parse_list;

// --variants: named sets of kernel choices, each applied through the CUDA
// backend's switches (the ones the tests use) before its batches run.
struct Variant {
  std::string name;
  std::vector<std::pair<std::string, std::string>> choices;
};
std::vector<Variant> parse_variants(const std::string& text) {
  std::vector<Variant> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(';', at), text.size());
    const std::string item = text.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    Variant v;
    v.name = item.substr(0, colon);
    if (v.name.empty()) throw std::invalid_argument("--variants: a variant without a name in '" + item + "'");
    if (colon != std::string::npos) {
      std::size_t p = colon + 1;
      while (p <= item.size()) {
        const std::size_t q = std::min(item.find(',', p), item.size());
        const std::string kv = item.substr(p, q - p);
        p = q + 1;
        if (kv.empty()) continue;
        const std::size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
          throw std::invalid_argument("--variants: expected key=value, got '" + kv + "' in variant " + v.name);
        v.choices.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
      }
    }
    out.push_back(std::move(v));
  }
  if (out.empty()) throw std::invalid_argument("--variants: no variant in '" + text + "'");
  return out;
}

#if defined(LOCKSTEP_HAVE_CUDA)
int version_of(const std::string& key, const std::string& value, std::initializer_list<const char*> names) {
  int i = 1;
  for (const char* n : names) {
    if (value == n) return i;
    ++i;
  }
  throw std::invalid_argument("--variants: " + key + "=" + value + " is not one of its choices");
}
int on_off(const std::string& key, const std::string& value) {
  if (value == "0" || value == "1") return value == "1" ? 1 : 0;
  throw std::invalid_argument("--variants: " + key + "=" + value + ": expected 0 or 1");
}
// Every switch back to the environment's choice, then the variant's.
void apply_variant(const Variant& v) {
  namespace cl = lockstep::cuda::launch;
  lockstep::cuda::set_decode_pdl(-1);
  cl::set_head_gemv_version(0);
  cl::set_decode_attention_version(0);
  cl::set_ternary_gemv_version(0);
  cl::set_decode_epilogues(-1);
  cl::set_decode_norm_gemv(-1);
  lockstep::cuda::graph::set_early_launch(-1);
  lockstep::cuda::set_pinned_readback(-1);
  for (const auto& [key, value] : v.choices) {
    if (key == "pdl") lockstep::cuda::set_decode_pdl(on_off(key, value));
    else if (key == "head") cl::set_head_gemv_version(version_of(key, value, {"v1", "v2", "v2wide"}));
    else if (key == "attention")
      cl::set_decode_attention_version(version_of(key, value, {"v1", "v2", "v2pdl", "auto", "v3"}));
    else if (key == "gemv") cl::set_ternary_gemv_version(version_of(key, value, {"v1", "v2", "v2pdl"}));
    else if (key == "epilogues") cl::set_decode_epilogues(on_off(key, value));
    else if (key == "normgemv") cl::set_decode_norm_gemv(on_off(key, value));
    else if (key == "early") lockstep::cuda::graph::set_early_launch(on_off(key, value));
    else if (key == "pinned") lockstep::cuda::set_pinned_readback(on_off(key, value));
    else throw std::invalid_argument("--variants: unknown key '" + key + "' in variant " + v.name);
  }
}
#endif

// Fills the parameters of a large synthetic model (2.4G values) in parallel:
// 16-bit hashes of (parameter, index) mapped to values; the embedding on the
// f16-exact grid k / 16384 (|k| <= 600), norms 1, other matrices uniform in
// (-0.05, 0.05).
void fill_synthetic(std::vector<lockstep::model::Param>& ps, int threads) {
  for (std::size_t i = 0; i < ps.size(); ++i) {
    auto& p = ps[i];
    const bool norm = p.shape.size() == 1;
    const bool embed = p.name.find("embed_tokens") != std::string::npos;
    float* v = p.value.data();
    lockstep::util::parallel_for(p.value.size(), threads, std::size_t{1} << 20, [&](std::size_t b, std::size_t e) {
      for (std::size_t j = b; j < e; ++j) {
        std::uint64_t z = (static_cast<std::uint64_t>(i) << 40) ^ j;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        const auto k = static_cast<int>(z % 1201) - 600;
        v[j] = norm ? 1.0f
                    : embed ? static_cast<float>(k) / 16384.0f
                            : static_cast<float>(k) * (0.05f / 600.0f);
      }
    });
  }
}

// Bytes one decode pass of `batch` rows reads of the weights (the top comment's rules).
double weight_bytes(const lockstep::model::ModelConfig& cfg, const std::vector<lockstep::model::Param>& ps,
                    bool cuda, bool head_f16, std::size_t batch) {
  double total = 0;
  const bool gemv = cuda && batch <= 32;
  const bool two_bit = gemv || !cuda;  // where BitLinear reads its 2-bit codes
  for (const auto& p : ps) {
    const auto n = static_cast<double>(p.value.size());
    const bool embed = p.name.find("embed_tokens") != std::string::npos;
    const bool head = p.name.find("lm_head") != std::string::npos || (embed && cfg.tie_embeddings);
    if (embed && !cfg.tie_embeddings) continue;  // only B rows of it: counted per token
    if (head) {
      total += ((gemv || !cuda) && cfg.vocab_size >= 4096 && head_f16 ? 2.0 : 4.0) * n;
    } else if (two_bit && cfg.family == lockstep::model::Family::Bitnet && p.shape.size() == 2) {
      const auto rows = static_cast<double>(p.shape[0]);
      const auto units = static_cast<double>((p.shape[1] + 63) / 64);
      total += rows * 16.0 * units;
    } else {
      total += 4.0 * n;
    }
  }
  return total;
}

// Whether every value of the head (lm_head, or the tied embedding) is an f16
// value: the CUDA decode reads such a head as f16 (the top comment's rules).
bool head_is_f16(const lockstep::model::ModelConfig& cfg, const std::vector<lockstep::model::Param>& ps) {
  const std::string head = cfg.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  for (const auto& p : ps) {
    if (p.name != head) continue;
    return std::all_of(p.value.begin(), p.value.end(),
                       [](float v) { return lockstep::tensor::f16_to_f32(lockstep::tensor::f32_to_f16(v)) == v; });
  }
  return false;
}

std::uint32_t gguf_matrix_type(const std::string& name) {
  if (name == "f32") return lockstep::io::kGgmlF32;
  if (name == "f16") return lockstep::io::kGgmlF16;
  if (name == "bf16") return lockstep::io::kGgmlBF16;
  if (name == "q8_0") return lockstep::io::kGgmlQ8_0;
  if (name == "i2_s") return lockstep::io::kGgmlTypeI2S;
  throw std::invalid_argument("--type " + name + " is not one of f32, f16, bf16, q8_0, i2_s");
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace lockstep;
  std::string family = "llama", device = "cpu", batches = "1,8", variants_arg, preset, model_file, write_file, write_type = "f16";
  long d = 1024, layers = 8, heads = 16, kv = 4, ff = 2816, vocab = 32000, ctx = 512;
  bool ctx_given = false, type_given = false;
  long prompt = 32, tokens = 32, profile_passes = 0, capture_passes = 0;
  int threads = 0;
  bool layers_given = false, training_model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--family") family = next();
    else if (a == "--preset") preset = next();
    else if (a == "--device") device = next();
    else if (a == "--batch") batches = next();
    else if (a == "--d") d = std::stol(next());
    else if (a == "--layers") layers = std::stol(next()), layers_given = true;
    else if (a == "--heads") heads = std::stol(next());
    else if (a == "--kv-heads") kv = std::stol(next());
    else if (a == "--ff") ff = std::stol(next());
    else if (a == "--vocab") vocab = std::stol(next());
    else if (a == "--ctx") ctx = std::stol(next()), ctx_given = true;
    else if (a == "--model") model_file = next();
    else if (a == "--write-gguf") write_file = next();
    else if (a == "--type") write_type = next(), type_given = true;
    else if (a == "--prompt") prompt = std::stol(next());
    else if (a == "--tokens") tokens = std::stol(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--profile") profile_passes = std::stol(next());
    else if (a == "--capture") capture_passes = std::stol(next());
    else if (a == "--variants") variants_arg = next();
    else if (a == "--training-model") training_model = true;
    else {
      std::fprintf(stderr, "decode_bench: unknown argument %s (see the comment at the top of decode_bench.cpp)\n",
                   a.c_str());
      return 2;
    }
  }
  if (type_given && write_file.empty()) throw std::invalid_argument("--type applies to --write-gguf FILE only");
  if (!model_file.empty() && (!preset.empty() || !write_file.empty()))
    throw std::invalid_argument("--model runs a file's model: give it without --preset and --write-gguf");
  if (training_model && model_file.empty()) throw std::invalid_argument("--training-model applies to --model FILE");
  // The decode-only model: a file's model on the CPU.
  const bool decode_only = !model_file.empty() && device == "cpu" && !training_model;
  std::optional<load::LoadedModel> loaded;
  if (!model_file.empty())
    loaded = load::load_model_file(model_file, decode_only ? load::decode_load_options() : load::LoadOptions{});
  model::ModelConfig cfg = model::preset(family == "bitnet" ? "bitnet-tiny" : "llama-tiny");
  if (loaded) {
    cfg = loaded->config;
    if (ctx_given) cfg.max_seq = ctx;
    if (cfg.max_seq < prompt + tokens + 2)
      throw std::invalid_argument(fmt::format("{}: context {} is shorter than --prompt {} + --tokens {} (give --ctx)",
                                              model_file, cfg.max_seq, prompt, tokens));
  } else if (!preset.empty()) {
    cfg = model::preset(preset);
    cfg.max_seq = ctx;
    if (layers_given) cfg.n_layer = layers;
    vocab = cfg.vocab_size;
    d = cfg.d_model;
    layers = cfg.n_layer;
    heads = cfg.n_head;
    kv = cfg.n_kv_head;
  } else {
    cfg.d_model = d;
    cfg.n_layer = layers;
    cfg.n_head = heads;
    cfg.n_kv_head = kv;
    cfg.head_dim = d / heads;
    cfg.d_ff = ff;
    cfg.vocab_size = vocab;
    cfg.max_seq = ctx;
  }
  cfg.validate();
  vocab = cfg.vocab_size;
  d = cfg.d_model;
  layers = cfg.n_layer;
  kv = cfg.n_kv_head;
  threads = util::resolve_threads(threads);
  std::unique_ptr<model::Model> m;
  if (loaded) {
    // The loader's notes (one a tensor: "F16 read as F32 (exact)"): the first and how many.
    if (!loaded->notes.empty())
      fmt::print(stderr, "decode_bench: {} loader notes, the first: {}\n", loaded->notes.size(), loaded->notes.front());
    if (decode_only)
      m = load::make_decode_model(std::move(*loaded), threads);
    else
      m = load::make_loaded_model(std::move(*loaded), device);
  } else {
    m = model::make_model(cfg, device);
    if (preset.empty())
      m->init(1);
    else
      fill_synthetic(m->params(), threads);
  }
  if (!write_file.empty()) {
    load::GgufWriteOptions opt;
    opt.matrix_type = gguf_matrix_type(write_type);
    if (opt.matrix_type == io::kGgmlTypeI2S) opt.embedding_type = io::kGgmlF16;  // as bitnet.cpp's I2_S files
    // A BitNet model in a float type: its projections as code · scale (bitnet.cpp's
    // converter's floats; read back as ternary), so every reader runs the same codes.
    opt.bitnet_ternary_floats = cfg.family == model::Family::Bitnet;
    opt.name = "decode_bench synthetic";
    load::write_gguf_model(write_file, cfg, std::as_const(*m).params(), opt);
    fmt::print("{}: {} ({})\n", write_file, cfg.summary(), write_type);
    return 0;
  }
  const auto* dm = dynamic_cast<const model::DecodeModel*>(m.get());
  const bool head_f16 = dm == nullptr && head_is_f16(cfg, std::as_const(*m).params());

  const auto copy_bandwidth = [&] {
    return device == "cpu" ? host_copy_bandwidth(std::size_t{1} << 29, 5)
#if defined(LOCKSTEP_HAVE_CUDA)
                           : device_copy_bandwidth(std::size_t{1} << 30, 10);
#else
                           : 0.0;
#endif
  };
  double bw = copy_bandwidth();
  const double head_dim = static_cast<double>(cfg.head_dim);
  const double embed_row = 4.0 * static_cast<double>(d);
  const double kv_per_pos = 2.0 * static_cast<double>(layers) * static_cast<double>(kv) * head_dim * 4.0;

  std::string graphs_setting;
#if defined(LOCKSTEP_HAVE_CUDA)
  if (device == "cuda")
    graphs_setting = cuda::graph::enabled() ? "; CUDA graphs: on (LOCKSTEP_CUDA_GRAPHS=0 turns them off)"
                                            : "; CUDA graphs: off (LOCKSTEP_CUDA_GRAPHS=0)";
#endif
  fmt::print("decode_bench: {} on {} ({} threads){}\n", cfg.summary(), device, threads, graphs_setting);
  if (dm != nullptr) {
    fmt::print("resident after loading: {}\n", resident_memory());
    const model::DecodeModelBytes b = dm->bytes();
    fmt::print("decode-only model: {:.1f} MB held (2-bit codes {:.1f}, head {:.1f}, other linear {:.1f}, embedding "
               "rows {:.1f}, norms {:.2f})\n",
               static_cast<double>(b.total()) / 1e6, static_cast<double>(b.ternary) / 1e6,
               static_cast<double>(b.head) / 1e6, static_cast<double>(b.linear) / 1e6,
               static_cast<double>(b.embedding) / 1e6, static_cast<double>(b.norms) / 1e6);
  }
  fmt::print("copy bandwidth {:.2f} GB/s at the start (STREAM copy: 2 x bytes / time, best of 5)\n", bw / 1e9);
  fmt::print("{:>5} {:>12} {:>12} {:>14} {:>14} {:>9} {:>10}\n", "batch", "prefill t/s", "decode t/s", "bytes/token",
             "bound t/s", "of bound", "cpu share");
  const std::vector<Variant> variants = variants_arg.empty() ? std::vector<Variant>{Variant{}} : parse_variants(variants_arg);
  if (!variants_arg.empty() && device != "cuda") throw std::invalid_argument("--variants applies to --device cuda");
  for (const Variant& variant : variants) {
#if defined(LOCKSTEP_HAVE_CUDA)
    if (!variant.name.empty()) {
      apply_variant(variant);
      std::string what;
      for (const auto& [key, value] : variant.choices) what += (what.empty() ? "" : ",") + key + "=" + value;
      fmt::print("variant {} ({})\n", variant.name, what.empty() ? "the environment's choices" : what);
    }
#endif
    for (std::size_t B : parse_list(batches)) {
      const double bw_now = copy_bandwidth();
      bw = std::max(bw, bw_now);
      fmt::print("copy bandwidth {:.2f} GB/s before batch {} (the bound below: the best of the run, {:.2f} GB/s)\n",
                 bw_now / 1e9, B, bw / 1e9);
      // The cache of --ctx positions (cfg.max_seq; a file's model keeps the file's max_seq as its own).
      auto s = m->decoder(B, static_cast<std::size_t>(cfg.max_seq));
      ad::Rng rng(B);
      std::vector<std::vector<std::int32_t>> prompts(B);
      for (auto& p : prompts)
        for (long i = 0; i < prompt; ++i) p.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(vocab))));
      s->prefill(0, std::vector<std::int32_t>{1}, false, threads);  // packs the weights (once a session)
      s->clear(0);
      auto t0 = Clock::now();
      for (std::size_t b = 0; b < B; ++b) s->prefill(b, prompts[b], false, threads);
      const double prefill_s = seconds_since(t0);
      std::vector<std::size_t> slots(B);
      for (std::size_t b = 0; b < B; ++b) slots[b] = b;
      std::vector<std::int32_t> next(B, 1);
      const auto greedy_pass = [&] {
        const std::vector<float> l = s->decode(slots, next, threads);
        // greedy, as `lockstep generate --temperature 0` picks (infer/sample.hpp)
        for (std::size_t b = 0; b < B; ++b)
          next[b] = infer::argmax(std::span<const float>(l).subspan(b * static_cast<std::size_t>(vocab),
                                                                     static_cast<std::size_t>(vocab)));
      };
      // The first decode pass is timed on its own: on CUDA it captures and
      // instantiates the pass's graph (a one-time cost, ~ms) that the passes
      // after it replay, so the rate below is the steady state's.
      t0 = Clock::now();
      greedy_pass();
      const double first_pass_s = seconds_since(t0);
#if defined(LOCKSTEP_HAVE_CUDA)
      if (device == "cuda") lockstep::cuda::trace::process_log().reset_launches();
      const std::size_t waits0 = device == "cuda" ? lockstep::cuda::host_waits() : 0;
      // Each replay timed with device events, and its host time split at the launch (graph.hpp).
      if (device == "cuda") lockstep::cuda::graph::set_timing(true);
      const lockstep::cuda::graph::Stats graph0 =
          device == "cuda" ? lockstep::cuda::graph::stats() : lockstep::cuda::graph::Stats{};
      const std::size_t replays0 = graph0.launches;
#endif
      t0 = Clock::now();
      const double cpu0 = cpu_seconds();
      for (long t = 0; t < tokens; ++t) greedy_pass();
      const double decode_s = seconds_since(t0);
      // The share of its threads' time the decode ran on a CPU: under 100% the
      // machine was shared (other processes held the cores), or threads waited.
      const double cpu_share = (cpu_seconds() - cpu0) / (decode_s * static_cast<double>(threads));
      std::string per_pass;  // CUDA: what one decode pass launches and waits for
#if defined(LOCKSTEP_HAVE_CUDA)
      if (device == "cuda") {
        long launches = 0;
        for (const auto& [name, count] : lockstep::cuda::trace::process_log().launches()) launches += count;
        const lockstep::cuda::graph::Stats graph1 = lockstep::cuda::graph::stats();
        lockstep::cuda::graph::set_timing(false);
        const std::size_t replays = graph1.launches - replays0;
        per_pass = fmt::format("   {:.0f} kernel launches and {:.1f} host waits a pass; CUDA graphs: {}",
                               static_cast<double>(launches) / static_cast<double>(tokens),
                               static_cast<double>(lockstep::cuda::host_waits() - waits0) / static_cast<double>(tokens),
                               replays > 0 ? fmt::format("used, {} of {} passes ran as a graph", replays, tokens)
                                           : std::string("not used"));
        const std::size_t timed = graph1.timed_launches - graph0.timed_launches,
                          passes = graph1.replayed_passes - graph0.replayed_passes;
        if (timed > 0 && passes > 0)
          per_pass += fmt::format("\n   a replayed pass: {:.1f} us on the device (graph events), {:.1f} us of host walk "
                                  "before the launch, {:.1f} us from the launch to the logits on the host (of {:.1f} us a pass)",
                                  1e6 * (graph1.graph_device_s - graph0.graph_device_s) / static_cast<double>(timed),
                                  1e6 * (graph1.walk_s - graph0.walk_s) / static_cast<double>(passes),
                                  1e6 * (graph1.tail_s - graph0.tail_s) / static_cast<double>(passes),
                                  1e6 * decode_s / static_cast<double>(tokens));
      }
#endif
      const double mean_len = static_cast<double>(prompt) + 1.0 + static_cast<double>(tokens) / 2.0;
      const double weights = dm != nullptr ? static_cast<double>(dm->bytes().per_pass())
                                           : weight_bytes(cfg, std::as_const(*m).params(), device == "cuda", head_f16, B);
      const double per_token =
          (weights + static_cast<double>(B) * (embed_row + kv_per_pos * mean_len)) / static_cast<double>(B);
      const double rate = static_cast<double>(B) * static_cast<double>(tokens) / decode_s;
      const double bound = bw / per_token;
      fmt::print("{:>5} {:>12.1f} {:>12.2f} {:>14.0f} {:>14.2f} {:>8.1f}% {:>9.1f}%{}\n", B,
                 static_cast<double>(B) * static_cast<double>(prompt) / prefill_s, rate, per_token, bound,
                 100.0 * rate / bound, 100.0 * cpu_share, per_pass);
      fmt::print("   the first decode pass (not in the rate; on CUDA it captures the graph): {:.2f} ms\n",
                 1e3 * first_pass_s);
      if (dm != nullptr) fmt::print("resident after batch {}: {}\n", B, resident_memory());
      std::fflush(stdout);
#if defined(LOCKSTEP_HAVE_CUDA)
      if (device == "cuda" && capture_passes > 0) {
        // The profiler's window over a few passes as they were timed (graphs and
        // all): ncu sees these kernels only, not the start-up gates or the warm-up.
        cuda::profile::capture_start();
        for (long t = 0; t < capture_passes; ++t) (void)s->decode(slots, next, threads);
        cuda::profile::capture_stop();
      }
      if (device == "cuda" && profile_passes > 0) {
        // More passes under the step profile (every launch timed with events);
        // the cache keeps growing, so these run at slightly longer lengths.
        cuda::profile::begin();
        for (long t = 0; t < profile_passes; ++t) {
          (void)s->decode(slots, next, threads);
          cuda::profile::mark("(host: between passes)");
        }
        const cuda::profile::Result pr = cuda::profile::end();
        fmt::print("step profile of {} decode passes at batch {}:\n{}", profile_passes, B,
                   cuda::profile::table(pr, static_cast<int>(profile_passes), 1e3 * decode_s / static_cast<double>(tokens)));
        std::fflush(stdout);
      }
#endif
    }
  }  // variants
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "decode_bench: %s\n", e.what());
  return 1;
}
