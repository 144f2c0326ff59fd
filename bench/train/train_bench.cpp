// CPU training throughput of lockstep's canonical model: one full optimizer
// step (forward + backward over batch x seq tokens, gradient clipping, AdamW)
// timed for named configurations, plus the forward-only loss (validation).
//
//   build/<dir>/bench/train/train_bench                       the default set
//   build/<dir>/bench/train/train_bench gpt2-tiny:16:128:1024 --threads 2 --steps 5
//   build/<dir>/bench/train/train_bench default --json        one JSON line per config
//   build/<dir>/bench/train/train_bench gpt2-124m:16:1024:50304 --device cuda --profile prof.json
//       after the timed steps, the same number of steps again under the step
//       profile (backend/cuda/profile.hpp: every kernel launch class timed with
//       CUDA events): a table (stdout; stderr with --json) and prof.json
//
// On the CUDA device the timed steps run inside cudaProfilerStart/Stop, so
// `ncu --profile-from-start off` or `nsys profile --capture-range=cudaProfilerApi`
// sees the training kernels only (not the start-up gates). The peak device
// memory is reported as the pool's high-water mark after the gates (what the
// training's buffers need at once; PyTorch's max_memory_allocated is the peer),
// the pool's cudaMalloc'd bytes, and cudaMemGetInfo's used bytes.
//
// A config is PRESET[:BATCH[:SEQ[:VOCAB]]]; "default" is `lockstep train`'s
// default run. Tokens are Philox draws (the speed does not depend on them).
// The machine may be shared: besides wall-clock tokens/s the table gives
// tokens per CPU-second of this process and the load average, so a number
// measured on a busy machine can be extrapolated (tok/s on N idle cores ~
// min(N, threads) x tok/CPU-s, when the threads scale).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/config.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"
#include "lockstep/util/parallel.hpp"
#ifdef LOCKSTEP_HAVE_CUDA
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/profile.hpp"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using namespace lockstep;

struct BenchConfig {
  std::string name, preset;
  std::int64_t batch = 16, seq = -1, vocab = 1024;  // seq -1: min(128, the preset's context)
};

BenchConfig parse_config(const std::string& spec) {
  BenchConfig c;
  c.name = spec;
  const train::TrainConfig d;
  if (spec == "default") {
    c.preset = d.model;
    c.batch = d.batch * d.accum;
    c.seq = d.seq;
    c.vocab = d.vocab;
    return c;
  }
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (true) {
    const std::size_t colon = spec.find(':', at);
    parts.push_back(spec.substr(at, colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  c.preset = parts[0];
  if (parts.size() > 1) c.batch = train::parse_int("batch", parts[1]);
  if (parts.size() > 2) c.seq = train::parse_int("seq", parts[2]);
  if (parts.size() > 3) c.vocab = train::parse_int("vocab", parts[3]);
  return c;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  f >> l;
  return l;
}

struct Measured {
  double train_tok_s = 0, train_tok_cpu_s = 0, ms_per_step = 0, eval_tok_s = 0, model_ms = 0, optim_ms = 0;
  std::int64_t params = 0;
  model::ModelConfig cfg;
  // Device memory (CUDA only; -1 elsewhere), bytes.
  double peak_in_use = -1, pool_reserved = -1, device_used = -1;
};

// How the linear layers compute (docs/UNITS.md): --linear float|units, --unit-backward, --units-head;
// and attention: --attention float|units.
struct LinearFlags {
  std::string linear = "float";
  bool unit_backward = false, units_head = false;
  std::string attention = "float";
};

Measured measure(BenchConfig& bc, int threads, int steps, const std::string& device, const std::string& audit,
                 const LinearFlags& lf, const std::string& profile_path, bool json) {
  model::ModelConfig mc = model::preset(bc.preset);
  mc.linear = lf.linear == "units" ? model::LinearMode::Units : model::LinearMode::Float;
  mc.unit_backward = lf.unit_backward;
  mc.units_head = lf.units_head;
  mc.attention = lf.attention == "units" ? model::AttentionMode::Units : model::AttentionMode::Float;
  mc.vocab_size = bc.vocab;
  if (bc.seq < 0) bc.seq = std::min<std::int64_t>(128, mc.max_seq);
  if (bc.seq > mc.max_seq) throw std::invalid_argument(fmt::format("{}: seq {} > context {}", bc.name, bc.seq, mc.max_seq));
  auto m = model::make_model(mc, device, audit);
  const bool on_cuda = device == "cuda";
#ifdef LOCKSTEP_HAVE_CUDA
  if (on_cuda) cuda::reset_peak_bytes_in_use();  // the gates' buffers are free again: the training's from here
#endif
  m->init(1);
  const auto n = static_cast<std::size_t>(bc.batch * bc.seq);
  std::vector<std::int32_t> in(n), tg(n);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = static_cast<std::int32_t>(num::rng::bits32(7, 0, i) % static_cast<std::uint32_t>(bc.vocab));
    tg[i] = static_cast<std::int32_t>(num::rng::bits32(7, 1, i) % static_cast<std::uint32_t>(bc.vocab));
  }
  std::vector<std::vector<float>> mom(m->params().size() * 2);
  std::vector<train::ParamSlot> slots;
  for (std::size_t i = 0; i < m->params().size(); ++i) {
    auto& p = m->params()[i];
    mom[2 * i].assign(p.value.size(), 0.0f);
    mom[2 * i + 1].assign(p.value.size(), 0.0f);
    slots.push_back({p.name, p.value, p.grad, mom[2 * i], mom[2 * i + 1], p.decay});
  }
  const train::AdamWConfig opt;
  double model_s = 0, optim_s = 0;  // forward+backward vs clip+AdamW (host models: timed apart)
  auto step = [&](std::int64_t t) {
    const auto a = Clock::now();
    if (m->step_stages() != nullptr) {  // as the trainer does: the step pipeline where the parameters live, one wait
      train::run_step(*m->step_stages(), {in, tg, bc.batch, bc.seq, 1}, 1.0f, train::adamw_scalars(opt, 1e-3f, t), {},
                      threads);
      model_s += std::chrono::duration<double>(Clock::now() - a).count();
      return;
    }
    m->forward_backward(in, tg, bc.batch, bc.seq, false, threads);
    const auto b = Clock::now();
    train::clip_grad_norm(slots, 1.0f, threads);
    train::adamw_step(slots, train::adamw_scalars(opt, 1e-3f, t), threads);
    model_s += std::chrono::duration<double>(b - a).count();
    optim_s += std::chrono::duration<double>(Clock::now() - b).count();
  };
  step(1);  // warm-up: first-touch allocations
  model_s = optim_s = 0;
  Measured r;
  r.params = mc.parameter_count();
  r.cfg = mc;
  const double c0 = cpu_seconds();
#ifdef LOCKSTEP_HAVE_CUDA
  if (on_cuda) cuda::profile::capture_start();  // ncu/nsys capture window: the timed steps only
#endif
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) step(s + 2);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds() - c0;
#ifdef LOCKSTEP_HAVE_CUDA
  if (on_cuda) {
    cuda::profile::capture_stop();
    r.peak_in_use = static_cast<double>(cuda::peak_bytes_in_use());
    r.pool_reserved = static_cast<double>(cuda::bytes_reserved());
    r.device_used = static_cast<double>(cuda::device_bytes_used());
  }
#endif
  const double tokens = static_cast<double>(n) * steps;
  r.train_tok_s = tokens / wall;
  r.train_tok_cpu_s = tokens / cpu;
  r.ms_per_step = 1e3 * wall / steps;
  r.model_ms = 1e3 * model_s / steps;
  r.optim_ms = 1e3 * optim_s / steps;
  if (!profile_path.empty()) {
#ifdef LOCKSTEP_HAVE_CUDA
    // The same steps again under the step profile; a named interval covers the
    // host's time between steps (the device idles from one step's wait to the
    // next step's first launch).
    model_s = optim_s = 0;
    cuda::profile::begin();
    for (int s = 0; s < steps; ++s) {
      step(steps + 2 + s);
      cuda::profile::mark("(host: between steps)");
    }
    const cuda::profile::Result pr = cuda::profile::end();
    const std::string table = cuda::profile::table(pr, steps, r.ms_per_step);
    std::fputs(table.c_str(), json ? stderr : stdout);
    const std::string context =
        fmt::format(R"("config":"{}","linear":"{}","unit_backward":{},"units_head":{},"batch":{},"seq":{},"vocab":{})",
                    bc.name, lf.linear, lf.unit_backward, lf.units_head, bc.batch, bc.seq, bc.vocab);
    std::ofstream f(profile_path);
    f << cuda::profile::to_json(pr, steps, r.ms_per_step, context) << "\n";
    if (!f) throw std::runtime_error("--profile: cannot write " + profile_path);
#endif
  }
  if (model::StepStages* st = m->step_stages()) {
    // The update stage alone (each finish waits for the device once), split off the whole step.
    const auto o0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
      st->update(1.0f, train::adamw_scalars(opt, 1e-3f, steps + 2 + s));
      st->finish();
    }
    r.optim_ms = 1e3 * std::chrono::duration<double>(Clock::now() - o0).count() / steps;
    r.model_ms -= r.optim_ms;
  }
  const auto e0 = Clock::now();
  for (int s = 0; s < steps; ++s) m->loss(in, tg, bc.batch, bc.seq, threads);
  r.eval_tok_s = tokens / std::chrono::duration<double>(Clock::now() - e0).count();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> specs;
  int threads = 0, steps = 5;
  std::string device = "cpu";
  std::string audit = "off";  // the live audits' cost is reported apart (--audit stop)
  std::string profile_path;   // --profile FILE.json (CUDA only)
  bool json = false;
  LinearFlags lf;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = static_cast<int>(train::parse_int("--threads", argv[++i]));
    } else if (a == "--steps" && i + 1 < argc) {
      steps = static_cast<int>(train::parse_int("--steps", argv[++i]));
    } else if (a == "--device" && i + 1 < argc) {
      device = argv[++i];
    } else if (a == "--audit" && i + 1 < argc) {
      audit = argv[++i];
    } else if (a == "--linear" && i + 1 < argc) {
      lf.linear = argv[++i];
      if (lf.linear != "float" && lf.linear != "units") {
        std::fprintf(stderr, "--linear: float or units, got '%s'\n", lf.linear.c_str());
        return 2;
      }
    } else if (a == "--attention" && i + 1 < argc) {
      lf.attention = argv[++i];
      if (lf.attention != "float" && lf.attention != "units") {
        std::fprintf(stderr, "--attention: float or units, got '%s'\n", lf.attention.c_str());
        return 2;
      }
    } else if (a == "--unit-backward") {
      lf.unit_backward = true;
    } else if (a == "--units-head") {
      lf.units_head = true;
    } else if (a == "--profile" && i + 1 < argc) {
      profile_path = argv[++i];
    } else if (a == "--json") {
      json = true;
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: train_bench [PRESET[:BATCH[:SEQ[:VOCAB]]] | default]... [--threads N] [--steps N] [--device cpu|cuda] [--audit off|stop] [--linear float|units] [--unit-backward] [--units-head] [--attention float|units] [--profile FILE.json] [--json]\n");
      return 0;
    } else {
      specs.push_back(a);
    }
  }
  if (specs.empty()) specs = {"default", "gpt2-micro:16:64:1024", "gpt2-tiny:16:256:1024", "llama-tiny:16:256:1024"};
  threads = util::resolve_threads(threads);
#ifdef LOCKSTEP_HAVE_CUDA
  const bool can_profile = device == "cuda";
#else
  const bool can_profile = false;
#endif
  if (!profile_path.empty() && !can_profile) {
    std::fprintf(stderr, "--profile: needs --device cuda in a build with the CUDA backend\n");
    return 2;
  }
  if (!json)
    fmt::print("lockstep training step (forward+backward+clip+AdamW) on {}, {} threads, {} timed steps, load average {:.1f}\n"
               "{:<26} {:>8} {:>7} {:>10} {:>11} {:>13} {:>11} {:>9}\n",
               device, threads, steps, load_average(), "config", "params", "tokens", "ms/step", "train tok/s", "tok/CPU-s",
               "eval tok/s", "peak GiB");
  for (const std::string& spec : specs) {
    try {
      BenchConfig bc = parse_config(spec);
      const Measured r = measure(bc, threads, steps, device, audit, lf, profile_path, json);
      if (json) {
        // The model's shape too, so torch_reference.py can build the same one.
        const model::ModelConfig& mc = r.cfg;
        fmt::print(R"({{"config":"{}","preset":"{}","family":"{}","d_model":{},"n_layer":{},"n_head":{},"n_kv_head":{},"head_dim":{},"d_ff":{},"max_seq":{},"norm_eps":{},"rope_theta":{},"tie_embeddings":{},)"
                   R"("device":"{}","audit":"{}","linear":"{}","unit_backward":{},"units_head":{},"attention":"{}","batch":{},"seq":{},"vocab":{},"threads":{},"params":{},"ms_per_step":{:.2f},"model_ms":{:.2f},"optim_ms":{:.2f},"train_tok_s":{:.1f},"train_tok_cpu_s":{:.1f},"eval_tok_s":{:.1f},"load":{:.2f},"peak_in_use_bytes":{:.0f},"pool_reserved_bytes":{:.0f},"device_used_bytes":{:.0f}}})"
                   "\n",
                   bc.name, bc.preset, model::family_name(mc.family), mc.d_model, mc.n_layer, mc.n_head, mc.n_kv_head,
                   mc.head_dim, mc.d_ff, mc.max_seq, mc.norm_eps, mc.rope_theta, mc.tie_embeddings, device, audit, lf.linear, lf.unit_backward, lf.units_head, lf.attention, bc.batch, bc.seq,
                   bc.vocab, threads, r.params, r.ms_per_step, r.model_ms, r.optim_ms, r.train_tok_s, r.train_tok_cpu_s, r.eval_tok_s,
                   load_average(), r.peak_in_use, r.pool_reserved, r.device_used);
      } else {
        fmt::print("{:<26} {:>7.2f}M {:>7} {:>10.1f} {:>11.0f} {:>13.0f} {:>11.0f} {:>9}\n", bc.name,
                   static_cast<double>(r.params) / 1e6, bc.batch * bc.seq, r.ms_per_step, r.train_tok_s,
                   r.train_tok_cpu_s, r.eval_tok_s,
                   r.peak_in_use < 0 ? std::string("-") : fmt::format("{:.2f}", r.peak_in_use / (1 << 30)));
      }
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", spec.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
