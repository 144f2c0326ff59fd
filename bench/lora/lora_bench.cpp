// LoRA finetuning throughput of lockstep (train::finetune, docs/LORA.md) and
// its peak device memory, at a named preset's shapes with random weights:
//
//   build/<dir>/bench/lora/lora_bench [--device cuda|cpu] [--preset bitnet-b1.58-2b]
//       [--seq 512] [--batch 1] [--steps 5] [--warmup 1] [--rank 8] [--alpha 16]
//       [--dropout 0.05] [--targets q_proj,v_proj] [--base codes|f32] [--layers N] [--fast-init 1]
//
// The base is the preset initialized from seed 1 (the shapes are what is
// measured, not the weights); the records are `batch` synthetic SFT examples
// of seq + 1 Philox tokens, every token scored, so each step is batch x seq
// tokens. tok/s is over the steps after the warm-up ones (metrics.jsonl's
// elapsed_s). The set-up is timed apart from the steps: making the model (on
// CUDA the start-up gates, once a process), the base's initialization (the
// base frozen first, model::freeze: no gradient buffers, so the init writes
// the values only; no moments exist for it anywhere), and the adapters, the
// one upload of the base and the warm-up steps. On CUDA the base is initialized
// on the device (Model::init_where_held: init's bits), then the finetune's first
// look at the host view downloads it and its first step uploads it again. Peak GPU memory: the device
// pool's high-water mark from after the model was made (its weights on the
// device) to the end (PyTorch's torch.cuda.max_memory_allocated is the peer),
// what is in use at the end (the steady state), and the device's used memory
// (cudaMemGetInfo). On the CPU: the peak resident memory of the finetune
// (VmHWM, reset just before it: /proc/self/clear_refs), the resident memory
// when it starts, and the bytes the base's parameters hold; `--base codes`
// (the default) holds a BitNet base's projections as their 2-bit codes
// (model::hold_frozen_ternary_as_codes, done before the finetune starts),
// `--base f32` as F32 masters (the same bits). `--layers N`: the preset's
// shapes with N blocks (the memory of a block is the same at any depth);
// `--fast-init 1`: the base's values U(-0.02, 0.02) from Philox on every core
// instead of the family's Box–Muller init (a 2.4 B-parameter base takes
// minutes of host Box–Muller; only the shapes are measured). On CUDA,
// `--base codes` (the default; LOCKSTEP_CUDA_BASE_CODES=0 turns the device's
// codes off) makes the base on the host with --fast-init's values and holds its
// projections as codes before anything is uploaded, so the device never holds
// their F32 masters; `--base f32` initializes on the device as before. Prints one line. bench/lora/peft_reference.py is the
// transformers + PEFT peer.
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/data/sft.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/finetune.hpp"
#include "lockstep/util/parallel.hpp"
#ifdef LOCKSTEP_HAVE_CUDA
#include "lockstep/backend/cuda/device.hpp"
#endif

namespace {

using namespace lockstep;
namespace fs = std::filesystem;

struct Args {
  std::string device = "cuda", preset = "bitnet-b1.58-2b", targets = "q_proj,v_proj", base = "codes";
  std::int64_t seq = 512, batch = 1, steps = 5, warmup = 1, rank = 8, layers = 0;
  bool fast_init = false;
  double alpha = 16, dropout = 0.05;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("" + k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--device") a.device = v;
    else if (k == "--preset") a.preset = v;
    else if (k == "--targets") a.targets = v;
    else if (k == "--base") a.base = v;
    else if (k == "--layers") a.layers = std::stoll(v);
    else if (k == "--fast-init") a.fast_init = v == "1";
    else if (k == "--seq") a.seq = std::stoll(v);
    else if (k == "--batch") a.batch = std::stoll(v);
    else if (k == "--steps") a.steps = std::stoll(v);
    else if (k == "--warmup") a.warmup = std::stoll(v);
    else if (k == "--rank") a.rank = std::stoll(v);
    else if (k == "--alpha") a.alpha = std::stod(v);
    else if (k == "--dropout") a.dropout = std::stod(v);
    else throw std::invalid_argument("unknown flag " + k);
  }
  if (a.seq <= 0 || a.batch <= 0 || a.steps <= 0 || a.warmup < 0 || a.rank <= 0)
    throw std::invalid_argument("--seq, --batch, --steps, --rank must be > 0 and --warmup >= 0");
  if (a.base != "codes" && a.base != "f32") throw std::invalid_argument("--base must be codes or f32, not " + a.base);
  return a;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string t; std::getline(in, t, ',');)
    if (!t.empty()) out.push_back(t);
  return out;
}

// elapsed_s and tokens of metrics.jsonl's line for `step` (1-based).
std::pair<double, double> metrics_at(const fs::path& file, std::int64_t step) {
  std::ifstream in(file);
  const std::string want = fmt::format("\"step\":{},", step);
  for (std::string line; std::getline(in, line);) {
    if (line.find(want) == std::string::npos) continue;
    auto field = [&](const char* name) {
      const std::string key = fmt::format("\"{}\":", name);
      const auto at = line.find(key);
      if (at == std::string::npos) throw std::runtime_error("metrics line without " + key);
      return std::stod(line.substr(at + key.size()));
    };
    return {field("elapsed_s"), field("tokens")};
  }
  throw std::runtime_error(fmt::format("{} has no line for step {}", file.string(), step));
}

// A field of /proc/self/status in KiB ("VmHWM", "VmRSS"); -1 where there is none.
long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  const std::string key = std::string(field) + ":";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  return -1;
}

// The peak resident memory starts again from the current (Linux: clear_refs 5).
void reset_peak_rss() {
  ::malloc_trim(0);  // what was freed (a base's masters) goes back to the system first
  std::ofstream("/proc/self/clear_refs") << "5";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    model::ModelConfig cfg = model::preset(a.preset);
    if (a.layers > 0) cfg.n_layer = a.layers;
    if (a.seq > cfg.max_seq) throw std::invalid_argument(fmt::format("--seq {} exceeds the preset's context {}", a.seq, cfg.max_seq));
    using Clock = std::chrono::steady_clock;
    auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    const auto t_make = Clock::now();
    auto m = model::make_model(cfg, a.device, "off");  // the start-up gates run here (CUDA); audits off as in a timed run
    const double make_s = seconds_since(t_make);
    const auto t_init = Clock::now();
    model::freeze(m->params());  // the base trains nothing: no gradients to hold or initialize
    // On CUDA a base held as codes is made on the host and converted there, so
    // that no F32 copy of its projections ever reaches the device (as
    // `lockstep finetune --base FILE` loads on the host): --fast-init's values
    // (the family's Box–Muller on the host would take minutes at 2B4T).
    const bool host_fast_init = a.fast_init || (a.device == "cuda" && a.base == "codes" && m->runs_ternary_codes());
#ifdef LOCKSTEP_HAVE_CUDA
    if (a.device == "cuda") cuda::reset_peak_bytes_in_use();  // the high-water from here: the base's making included
#endif
    if (host_fast_init) {
      std::uint64_t stream = 0;
      for (auto& p : m->params()) {
        float* v = p.value.data();
        const std::uint64_t st = ++stream;
        util::parallel_for(p.value.size(), util::resolve_threads(0), 1 << 16, [&](std::size_t lo, std::size_t hi) {
          for (std::size_t i = lo; i < hi; ++i) v[i] = num::rng::uniform(1, st, i, -0.02f, 0.02f);
        });
      }
    } else {
      m->init_where_held(1);  // CUDA: on the device (init's bits); the host view downloads it once, when read
    }
    // The base as the finetune will hold it (train::finetune converts too; done
    // here so that the peak below is the finetune's, not the masters' set-up).
    if (a.base == "codes") model::hold_frozen_ternary_as_codes(*m);
    const double init_s = seconds_since(t_init);
    std::size_t base_bytes = 0;
    for (const auto& p : m->params()) base_bytes += model::bytes_held(p);
    std::size_t made_bytes = 0;  // what the device holds before the finetune
#ifdef LOCKSTEP_HAVE_CUDA
    if (a.device == "cuda") made_bytes = cuda::bytes_in_use();  // the device init's F32 values; 0 for a host-made base
#endif
    std::vector<data::SftExample> records(static_cast<std::size_t>(a.batch));
    for (std::size_t r = 0; r < records.size(); ++r) {
      auto& ex = records[r];
      for (std::int64_t t = 0; t <= a.seq; ++t)
        ex.tokens.push_back(static_cast<std::int32_t>(num::rng::bits32(7, r, static_cast<std::uint64_t>(t)) %
                                                      static_cast<std::uint32_t>(cfg.vocab_size)));
      ex.scored.assign(ex.tokens.size(), 1);
      ex.line = r + 1;
    }
    train::FinetuneConfig c;
    c.lora.rank = static_cast<std::size_t>(a.rank);
    c.lora.alpha = a.alpha;
    c.lora.dropout = a.dropout;
    c.lora.targets = split(a.targets);
    c.batch = a.batch;
    c.steps = a.warmup + a.steps;
    c.max_seq = a.seq;
    c.log_every = 1000000;
    c.base_as_codes = a.base == "codes";
    const fs::path dir = fs::temp_directory_path() / fmt::format("lockstep_lora_bench_{}", ::getpid());
    fs::remove_all(dir);
    reset_peak_rss();
    const long rss_start_kib = status_kib("VmRSS");
    const auto t_run = Clock::now();
    const auto rep = train::finetune(*m, records, c, dir.string());
    const double run_s = seconds_since(t_run);
    const auto [t0, n0] = a.warmup > 0 ? metrics_at(dir / "metrics.jsonl", a.warmup) : std::pair<double, double>{0, 0};
    const auto [t1, n1] = metrics_at(dir / "metrics.jsonl", a.warmup + a.steps);
    fs::remove_all(dir);
    const double tok_s = (n1 - n0) / (t1 - t0);
    // The finetune's time outside its timed steps: the adapters, the upload, the warm-up steps, the final save.
    const double adapters_s = run_s - (t1 - t0);
    std::string memory = "peak GPU memory -";
    (void)made_bytes;
    if (a.device == "cpu")
      memory = fmt::format("base {} ({:.3f} GiB held), peak RSS {:.2f} GiB during the finetune ({:.2f} GiB at its start)",
                           a.base, static_cast<double>(base_bytes) / (1ull << 30),
                           static_cast<double>(status_kib("VmHWM")) / (1 << 20),
                           static_cast<double>(rss_start_kib) / (1 << 20));
#ifdef LOCKSTEP_HAVE_CUDA
    if (a.device == "cuda")
      memory = fmt::format("peak GPU memory {:.2f} GiB (pool high-water since the model was made; {:.2f} GiB of it "
                           "on the device before the finetune; the base as {}{}: {:.2f} GiB held), {:.2f} GiB in use at "
                           "the end, {:.2f} GiB used (cudaMemGetInfo)",
                           static_cast<double>(cuda::peak_bytes_in_use()) / (1ull << 30),
                           static_cast<double>(made_bytes) / (1ull << 30),
                           m->runs_ternary_codes() ? a.base : "f32", host_fast_init ? ", made on the host by --fast-init" : "",
                           static_cast<double>(base_bytes) / (1ull << 30),
                           static_cast<double>(cuda::bytes_in_use()) / (1ull << 30),
                           static_cast<double>(cuda::device_bytes_used()) / (1ull << 30));
#endif
    std::printf("lockstep lora %s %s seq %lld batch %lld r %lld targets %s: %.1f tok/s over %lld steps (last loss %.4f), "
                "%s; set-up %.1f s (model %.1f s, base init %.1f s, adapters + upload + %lld warm-up + save %.1f s), "
                "AdamW moments %.2f MiB\n",
                a.device.c_str(), a.preset.c_str(), static_cast<long long>(a.seq), static_cast<long long>(a.batch),
                static_cast<long long>(a.rank), a.targets.c_str(), tok_s, static_cast<long long>(a.steps),
                static_cast<double>(rep.last_loss), memory.c_str(), make_s + init_s + adapters_s, make_s, init_s,
                static_cast<long long>(a.warmup), adapters_s, static_cast<double>(rep.moment_bytes) / (1 << 20));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lora_bench: %s\n", e.what());
    return 1;
  }
}
