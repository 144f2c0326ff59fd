#include "lockstep/train/run.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/data/corpus.hpp"
#include "lockstep/io/atomic_file.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/train/progress.hpp"
#include "lockstep/util/parallel.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace lockstep::train {

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string read_text(const fs::path& p) { return io::read_file_text(p.string()); }

void write_text_atomic(const fs::path& p, const std::string& s) {
  io::write_file_atomic(p.string(), std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}

// The metrics log. A resumed run keeps the lines up to its checkpoint's step
// (a crash may have left later ones, which the resumed run writes again).
class Metrics {
 public:
  Metrics(const fs::path& path, std::int64_t keep_through_step) {
    if (keep_through_step > 0 && fs::exists(path)) {
      std::ifstream in(path);
      std::string kept, line;
      while (std::getline(in, line)) {
        if (line.empty()) continue;
        try {
          if (nlohmann::json::parse(line).at("step").get<std::int64_t>() <= keep_through_step) kept += line + "\n";
        } catch (const std::exception&) {
          // a torn last line from a crash: dropped
        }
      }
      write_text_atomic(path, kept);
      f_ = std::fopen(path.c_str(), "a");
    } else {
      f_ = std::fopen(path.c_str(), "w");
    }
    if (!f_) throw std::runtime_error(fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
  }
  ~Metrics() {
    if (f_) std::fclose(f_);
  }
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // `extra`: more fields (",\"replicas\":2,..."), "" for none.
  void train(const StepResult& r, std::uint64_t tokens, double tok_s, double elapsed, const std::string& extra) {
    fmt::print(f_, R"({{"type":"train","step":{},"loss":{},"lr":{},"grad_norm":{},"tokens":{},"tok_per_s":{:.1f},"elapsed_s":{:.3f}{}}})"
                   "\n",
               r.step, r.loss, r.lr, r.grad_norm, tokens, tok_s, elapsed, extra);
    std::fflush(f_);
  }
  void val(const EvalResult& e, bool final) {
    fmt::print(f_, R"({{"type":"val","step":{},"loss":{:.6f},"bpb":{:.6f},"tokens":{},"bytes":{},"final":{}}})"
                   "\n",
               e.step, e.loss, e.bpb, e.tokens, e.bytes, final);
    std::fflush(f_);
  }

 private:
  std::FILE* f_ = nullptr;
};

std::string flag_to_field(const std::string& flag) {
  std::string f = flag;
  std::replace(f.begin(), f.end(), '-', '_');
  return f;
}

// The bytes each token decodes to (specials: 0), for bits per byte.
std::vector<std::uint32_t> token_byte_lengths(const tok::BpeTokenizer& tok) {
  std::vector<std::uint32_t> out(static_cast<std::size_t>(tok.vocab_size()), 0);
  for (std::int32_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.is_token(id) && !tok.is_special(id))
      out[static_cast<std::size_t>(id)] = static_cast<std::uint32_t>(tok.tokens()[static_cast<std::size_t>(id)].size());
  return out;
}

// Lock-free atomics are safe to touch from a signal handler.
std::atomic<int> g_signals{0};
std::atomic<bool> g_stop{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

extern "C" void on_interrupt(int sig) {
  g_stop.store(true);
  if (g_signals.fetch_add(1) + 1 >= 2) {  // a second Ctrl-C: stop now, the default way
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

}  // namespace

const std::atomic<bool>& install_interrupt_handler() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return true;
  }();
  (void)installed;
  return g_stop;
}

TrainConfig merge_resume_config(const TrainConfig& saved, const TrainConfig& cli, const std::set<std::string>& given) {
  static const std::set<std::string> kChangeable = {"steps",       "threads",   "device",     "audit",      "audit-budget", "activations", "out",        "max-minutes",
                                                    "eval-every", "eval-tokens", "save-every", "log-every"};
  const auto js = nlohmann::json::parse(saved.to_json());
  auto jm = js;
  const auto jc = nlohmann::json::parse(cli.to_json());
  for (const std::string& flag : given) {
    const std::string field = flag_to_field(flag);
    if (!jc.contains(field)) continue;  // not a training setting (--resume, --force, ...)
    if (kChangeable.count(flag)) {
      jm[field] = jc[field];
    } else if (jc[field] != js[field]) {
      std::string changeable;
      for (const auto& c : kChangeable) changeable += (changeable.empty() ? "--" : ", --") + c;
      throw std::invalid_argument(fmt::format(
          "--{} {} differs from the checkpoint's run ({}): a resumed run keeps its settings (these may change: {})",
          flag, jc[field].dump(), js[field].dump(), changeable));
    }
  }
  return TrainConfig::from_json(jm.dump(), "resumed run config");
}

RunSummary run_training(TrainConfig cfg, const RunOptions& opt) {
  // Replica 0 writes (progress, metrics, run.json, checkpoints); the others
  // compute the same steps silently.
  const ReplicaRun* const rep = opt.replica;
  const bool writer = rep == nullptr || rep->rank == 0;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> devnull(writer ? nullptr : std::fopen("/dev/null", "w"),
                                                           &std::fclose);
  if (!writer && !devnull) throw std::runtime_error("cannot open /dev/null");
  std::FILE* out = !writer ? devnull.get() : opt.out ? opt.out : stdout;
  auto say = [&](const std::string& s) {
    fmt::print(out, "{}\n", s);
    std::fflush(out);
  };
  // The device is read when the model is made: after a resume has merged the
  // saved run config with the command line (--device may change on resume).
  const decltype(opt.make_model) make_model =
      opt.make_model ? opt.make_model
                     : [&cfg](const model::ModelConfig& c) { return model::make_model(c, cfg.device, cfg.audit, cfg.audit_budget / 100); };

  // --- Resume or start fresh -------------------------------------------------
  std::optional<LoadedCheckpoint> ck;
  if (!opt.resume.empty()) {
    const std::string dir = resolve_checkpoint(opt.resume);
    const fs::path run_dir = fs::exists(fs::path(opt.resume) / "latest") ? fs::path(opt.resume)
                                                                         : fs::path(dir).parent_path();
    // The run config first: the model to load is the one it names.
    if (!fs::exists(fs::path(dir) / "trainer_state.json"))
      throw std::runtime_error(fmt::format("'{}' has no trainer_state.json: not a training checkpoint to resume", dir));
    const auto state = nlohmann::json::parse(read_text(fs::path(dir) / "trainer_state.json"));
    const TrainConfig saved = TrainConfig::from_json(state.at("run").dump(), dir + "/trainer_state.json");
    cfg = merge_resume_config(saved, cfg, opt.given);
    if (!opt.given.count("out")) cfg.out = run_dir.string();
    cfg.validate();
    const std::string config_path = (fs::path(dir) / "config.json").string();
    ck = load_checkpoint_into(dir, make_model(model::from_hf_config_json(read_text(config_path), config_path)), true);
    say(fmt::format("resuming {} at step {} of {}", ck->dir, ck->meta.step, cfg.steps));
  } else {
    cfg.validate();
    // Recorded absolute, so a resume from another directory finds the text.
    if (!cfg.data.empty()) cfg.data = fs::absolute(cfg.data).lexically_normal().string();
    const fs::path o(cfg.out);
    if (fs::exists(o / "latest") && writer) {
      if (!opt.force)
        throw std::invalid_argument(fmt::format(
            "--out {} already holds a run (latest checkpoint: {}): continue it with --resume {}, or start over with "
            "--force",
            cfg.out, read_text(o / "latest").substr(0, 13), cfg.out));
      fs::remove(o / "latest");
      for (const auto& e : fs::directory_iterator(o))
        if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0) fs::remove_all(e.path());
    }
  }
  // The device before the data: a missing GPU is said at once, not after the
  // corpus and tokenizer have been prepared.
  if (std::string why; !opt.make_model && !model::device_available(cfg.device, &why))
    throw std::runtime_error("--device " + cfg.device + ": " + why);
  const fs::path run_dir(cfg.out);
  fs::create_directories(run_dir);
  if (writer) write_text_atomic(run_dir / "run.json", cfg.to_json() + "\n");
  if (rep) {
    // The settings every replica must share (not where it runs or with how many threads).
    auto j = nlohmann::json::parse(cfg.to_json());
    for (const char* local : {"device", "threads", "audit", "audit_budget", "activations", "out"}) j.erase(local);
    rep->agree("training settings", j.dump(), j.dump());
  }

  // --- Data ------------------------------------------------------------------
  data::CorpusOptions co;
  co.data = cfg.data;
  co.austen_rdb = opt.austen_rdb;
  co.cache_dir = (run_dir / "data").string();
  co.vocab_size = cfg.vocab;
  co.val_fraction = cfg.val_fraction;
  // The writer prepares the corpus first; the others then find it prepared.
  if (rep && !writer) rep->barrier("replica 0 preparing the corpus");
  const data::PreparedCorpus corpus = data::prepare_corpus(co, say);
  if (rep && writer) rep->barrier("replica 0 preparing the corpus");
  const std::string corpus_json = read_text(fs::path(corpus.dir) / "corpus.json");
  if (ck) {
    const auto was = nlohmann::json::parse(ck->meta.corpus_json);
    const std::string key = was.contains("key") ? was["key"].get<std::string>() : "";
    if (key != num::hash_hex(corpus.key))
      throw std::runtime_error(fmt::format("the corpus changed since the checkpoint (key {}, now {}): the resumed run "
                                           "would not see the same data",
                                           key, num::hash_hex(corpus.key)));
  }
  const std::string tokenizer_json = read_text(corpus.tokenizer_json);
  const tok::BpeTokenizer tokenizer = tok::parse_hf_tokenizer_json(tokenizer_json, corpus.tokenizer_json);
  if (!tokenizer.eos()) throw std::runtime_error(corpus.tokenizer_json + ": no <|endoftext|> token");

  // --- Model and trainer -----------------------------------------------------
  const model::ModelConfig mc = cfg.model_config(tokenizer.vocab_size(), *tokenizer.eos());
  if (rep) {
    rep->agree("corpus", num::hash_hex(corpus.key), num::hash_hex(corpus.key));
    rep->agree("model config", model::to_hf_config_json(mc), mc.summary());
  }
  std::unique_ptr<model::Model> m;
  if (ck) {
    if (model::to_hf_config_json(mc) != model::to_hf_config_json(ck->model->config()))
      throw std::runtime_error(fmt::format("the checkpoint's model ({}) is not the run's ({})",
                                           ck->model->config().summary(), mc.summary()));
    m = std::move(ck->model);
  } else {
    m = make_model(mc);
  }
  m->set_recompute(cfg.activations == "recompute");
  Trainer trainer(cfg, std::move(m), data::Shard(corpus.train_shard), data::Shard(corpus.val_shard),
                  token_byte_lengths(tokenizer));
  std::uint64_t tokens_seen = 0;
  double elapsed_before = 0;
  if (ck) {
    trainer.restore(std::move(ck->opt));
    tokens_seen = ck->meta.tokens_seen;
    elapsed_before = ck->meta.elapsed_seconds;
  } else {
    trainer.init_fresh();
  }
  if (rep) trainer.set_step_hooks(rep->hooks);
  RunSummary sum;
  sum.first_step = sum.last_step = trainer.current_step();

  const std::int64_t tokens_per_step = cfg.batch * cfg.accum * cfg.seq;
  say(fmt::format("model: {}", mc.summary()));
  // OpenMP's idle threads spin before they sleep; on a machine whose cores
  // are busy with other work that can cost 10x (docs/TRAINING.md).
  if (double load = 0; !std::getenv("OMP_WAIT_POLICY") && (std::ifstream("/proc/loadavg") >> load) &&
                       load > 1.5 * util::hardware_threads())
    say(fmt::format("note: this machine is busy (load average {:.1f} on {} cores); OMP_WAIT_POLICY=passive "
                    "may train much faster here",
                    load, util::hardware_threads()));
  say(fmt::format("training: {} steps x {} tokens ({} x {} windows of {}), lr {} warmup {}, {} threads -> {}",
                  cfg.steps, tokens_per_step, cfg.batch, cfg.accum, cfg.seq, cfg.lr, cfg.warmup, trainer.threads(),
                  cfg.out));
  if (rep)
    say(fmt::format("replicas: {} (micro-batch a on replica a mod {}; exact reduction in micro-batch order)",
                    rep->world, rep->world));
  if (trainer.current_step() >= cfg.steps) {
    say(fmt::format("the run is complete ({} of {} steps): pass --steps N to continue it", trainer.current_step(),
                    cfg.steps));
    sum.weights_hash = weights_hash(trainer.model());
    return sum;
  }

  std::optional<Metrics> metrics;
  if (writer) metrics.emplace(run_dir / "metrics.jsonl", ck ? ck->meta.step : 0);
  const std::int64_t every = cfg.log_every > 0 ? cfg.log_every : std::max<std::int64_t>(1, cfg.steps / 50);
  Progress progress(out, opt.tty, every);

  std::string last_saved;
  std::int64_t last_saved_step = ck ? ck->meta.step : -1;
  double last_save_seconds = 2.0;
  const auto save = [&](Progress* p) {
    const auto t = Clock::now();
    CheckpointMeta meta;
    meta.step = trainer.current_step();
    meta.seed = cfg.seed;
    meta.tokens_seen = tokens_seen;
    meta.elapsed_seconds = elapsed_before + sum.train_seconds;
    meta.run_config_json = cfg.to_json();
    meta.corpus_json = corpus_json;
    if (writer) last_saved = save_checkpoint(cfg.out, trainer.model(), trainer.optimizer(), meta, tokenizer_json);
    if (rep) {
      // Every replica checks its own weights and moments against the hashes the writer recorded.
      std::uint64_t w = 0, o = 0;
      if (writer) {
        const auto st = nlohmann::json::parse(read_text(fs::path(last_saved) / "trainer_state.json"));
        w = std::stoull(st.at("weights_hash").get<std::string>(), nullptr, 16);
        o = std::stoull(st.at("optimizer_hash").get<std::string>(), nullptr, 16);
      }
      last_saved = rep->verify_checkpoint(last_saved, w, o, weights_hash(trainer.model()),
                                          optimizer_hash(trainer.model(), trainer.optimizer()));
    }
    last_saved_step = meta.step;
    last_save_seconds = seconds_since(t);
    const std::string msg = fmt::format("saved {} ({:.1f}s)", last_saved, last_save_seconds);
    if (p) {
      p->line(msg);
    } else {
      say(msg);
    }
  };

  // Timing estimates for the --max-minutes budget.
  const double budget = cfg.max_minutes * 60.0;
  double step_seconds = 0;     // moving average of one step
  double eval_tok_s = 0;       // validation tokens per second (measured on periodic passes)
  const auto full_eval_estimate = [&] {
    const double tokens = static_cast<double>(trainer.val_windows() * cfg.seq);
    if (eval_tok_s > 0) return tokens / eval_tok_s;
    // Not measured yet: a forward pass is about a third of a training step.
    return step_seconds > 0 ? tokens / (3.0 * static_cast<double>(tokens_per_step) / step_seconds) : 0.0;
  };
  const auto run_eval = [&](std::int64_t max_tokens, bool final) {
    const auto t = Clock::now();
    const EvalResult e = trainer.evaluate(max_tokens);
    const double s = seconds_since(t);
    if (s > 0) eval_tok_s = static_cast<double>(e.tokens) / s;
    if (metrics) metrics->val(e, final);
    progress.line(fmt::format("{}validation at step {}: {:.4f} nats/token, {:.4f} bits/byte ({} tokens, {:.1f}s)",
                              final ? "final " : "", e.step, e.loss, e.bpb, e.tokens, s));
    return e;
  };

  const auto loop_start = Clock::now();
  while (trainer.current_step() < cfg.steps) {
    bool interrupt = opt.stop && opt.stop->load();
    if (rep) interrupt = rep->any(interrupt);  // the replicas stop together
    if (interrupt) {
      sum.interrupted = true;
      break;
    }
    const std::int64_t next = trainer.current_step() + 1;
    if (budget > 0) {
      double need = step_seconds + full_eval_estimate() + last_save_seconds;
      if (cfg.eval_every > 0 && next % cfg.eval_every == 0 && next != cfg.steps)
        need += eval_tok_s > 0 ? static_cast<double>(std::min(cfg.eval_tokens, trainer.val_windows() * cfg.seq)) /
                                     eval_tok_s
                               : 0.0;
      bool late = seconds_since(opt.start) + need > budget;
      if (rep) late = rep->any(late);
      if (late) {
        sum.out_of_time = true;
        break;
      }
    }
    if (rep && rep->begin_step) rep->begin_step(next, cfg.accum, trainer.weights_table());
    const auto t = Clock::now();
    const StepResult r = trainer.step();
    const double dt = seconds_since(t);
    step_seconds = step_seconds == 0 ? dt : 0.9 * step_seconds + 0.1 * dt;
    sum.train_seconds += dt;
    sum.tokens += r.tokens;
    tokens_seen += r.tokens;
    const double tok_s = static_cast<double>(r.tokens) / step_seconds;
    if (metrics)
      metrics->train(r, tokens_seen, static_cast<double>(r.tokens) / dt, elapsed_before + sum.train_seconds,
                     rep && rep->step_metrics ? rep->step_metrics() : std::string());
    double eta = static_cast<double>(cfg.steps - r.step) * step_seconds;
    if (budget > 0) eta = std::min(eta, std::max(0.0, budget - seconds_since(opt.start)));
    progress.update({r.step, cfg.steps, r.loss, r.lr, tok_s, seconds_since(opt.start), eta});
    if (opt.on_step) opt.on_step(r);

    if (cfg.eval_every > 0 && r.step % cfg.eval_every == 0 && r.step != cfg.steps) run_eval(cfg.eval_tokens, false);
    if (cfg.save_every > 0 && r.step % cfg.save_every == 0 && r.step != cfg.steps) save(&progress);
  }
  sum.last_step = trainer.current_step();

  if (sum.interrupted) {
    progress.line(fmt::format("interrupted at step {}: saving", sum.last_step));
  } else if (sum.out_of_time) {
    progress.line(fmt::format("--max-minutes {} reached at step {} of {}: stopping", cfg.max_minutes, sum.last_step,
                              cfg.steps));
  }
  if (!sum.interrupted) sum.final_eval = run_eval(0, true);
  progress.finish();
  if (sum.last_step > 0 && sum.last_step != last_saved_step) save(nullptr);
  sum.checkpoint = last_saved;
  sum.weights_hash = weights_hash(trainer.model());
  const double loop_s = seconds_since(loop_start);
  say(fmt::format("{} steps in {} ({}), weights {}", sum.last_step - sum.first_step, format_duration(loop_s),
                  format_rate(sum.train_seconds > 0 ? static_cast<double>(sum.tokens) / sum.train_seconds : 0),
                  num::hash_hex(sum.weights_hash)));
  if (const std::string r = trainer.model().report(); !r.empty())
    say(fmt::format("{} ({} steps)", r, sum.last_step - sum.first_step));
  if (sum.final_eval)
    say(fmt::format("validation: {:.4f} bits per byte ({:.4f} nats/token)", sum.final_eval->bpb,
                    sum.final_eval->loss));
  if (sum.interrupted || sum.out_of_time)
    say(fmt::format("continue with: lockstep train --resume {}", cfg.out));
  return sum;
}

}  // namespace lockstep::train
