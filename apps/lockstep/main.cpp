// The lockstep command line: one binary, one subcommand per job.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "lockstep/build_info.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/train/checkpoint.hpp"
#include "lockstep/train/config.hpp"
#include "lockstep/train/run.hpp"
#include "lockstep/version.hpp"
#include "lockstep/verify/report.hpp"
#include "command.hpp"
#include "numeric_flags.hpp"
#include "suites.hpp"
#include "train_replica.hpp"

namespace {

// Rejects a number <= 0 with a message that names the value (CLI11 prefixes
// the flag), e.g. "--effort: must be a number > 0, got -1".
const CLI::Validator kPositive(
    [](std::string& s) -> std::string {
      double v = 0;
      try {
        std::size_t used = 0;
        v = std::stod(s, &used);
        if (used != s.size()) return "must be a number > 0, got '" + s + "'";
      } catch (const std::exception&) {
        return "must be a number > 0, got '" + s + "'";
      }
      return v > 0 ? std::string() : "must be a number > 0, got " + s;
    },
    "> 0");

int run_version() {
  fmt::print("lockstep {}\nNUMERIC_SPEC_VERSION {}\nbuild {} (CUDA {}, MPFR {})\n",
             lockstep::build::kVersion, lockstep::NUMERIC_SPEC_VERSION,
             lockstep::build::kBuildType, lockstep::build::kCuda ? "on" : "off",
             lockstep::build::kMpfr ? "on" : "off");
  return 0;
}

int run_verify(std::vector<std::string> names, lockstep::verify::Options opt, bool list) {
  using namespace lockstep::verify;
  const auto& all = suites();
  if (list) {
    for (const Suite& s : all) fmt::print("{:<10} {}\n", s.name, s.description);
    return 0;
  }
  std::vector<const Suite*> chosen;
  if (names.empty() || (names.size() == 1 && names[0] == "all")) {
    for (const Suite& s : all) chosen.push_back(&s);
  } else {
    for (const std::string& n : names) {
      const Suite* found = nullptr;
      for (const Suite& s : all)
        if (s.name == n) found = &s;
      if (!found) {
        std::string known;
        for (const Suite& s : all) known += " " + s.name;
        fmt::print(stderr, "lockstep verify: unknown suite '{}' (known:{})\n", n, known);
        return 2;
      }
      chosen.push_back(found);
    }
  }
  if (opt.seed == 0)
    opt.seed = static_cast<std::uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count()) | 1u;
  fmt::print("lockstep verify: seed {} (reproduce with --seed {}), effort {}\n\n", opt.seed,
             opt.seed, opt.effort);
  std::fflush(stdout);

  int failed_tables = 0, tables = 0;
  for (const Suite* s : chosen) {
    for (const Table& t : s->run(opt)) {
      t.print(std::cout);
      std::cout << std::endl;
      ++tables;
      if (!t.passed()) ++failed_tables;
    }
  }
  if (failed_tables) {
    fmt::print("lockstep verify: FAIL ({} of {} tables have failures; seed {})\n", failed_tables,
               tables, opt.seed);
    return 1;
  }
  fmt::print("lockstep verify: PASS ({} tables)\n", tables);
  return 0;
}

// ---------------------------------------------------------------------------
// lockstep train (numeric flags: numeric_flags.hpp; generate: cmd_generate.cpp)
// ---------------------------------------------------------------------------

using lockstep::cli::NumericFlags;
using lockstep::cli::num_text;

struct TrainCommand {
  CLI::App* cmd = nullptr;
  NumericFlags num;
  lockstep::train::TrainConfig cfg;
  std::string resume;
  bool force = false;
  std::vector<CLI::Option*> text_opts;
  lockstep::cli::ReplicaFlags replica_flags;

  void add(CLI::App& app) {
    cmd = app.add_subcommand(
        "train",
        "train a model (no arguments: a small GPT-2 on the embedded Jane Austen corpus, on the CPU, "
        "in at most 10 minutes)");
    const lockstep::train::TrainConfig d;
    text_opts.push_back(cmd->add_option("--model", cfg.model, "model preset")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->default_str(d.model));
    text_opts.push_back(cmd->add_option("--data", cfg.data, "text file or folder (default: the embedded Jane Austen novels)")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast));
    text_opts.push_back(cmd->add_option("--out", cfg.out, "run directory (checkpoints, metrics.jsonl, data cache)")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                            ->default_str(d.out));
    text_opts.push_back(cmd->add_option("--device", cfg.device, "cpu or cuda (the same weights, bit for bit)")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                            ->default_str(d.device));
    text_opts.push_back(cmd->add_option("--activations", cfg.activations,
                                        "keep (for the backward) or recompute (block by block before its backward: "
                                        "the same bits, one block's activations in memory)")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                            ->default_str(d.activations));
    text_opts.push_back(cmd->add_option("--audit", cfg.audit,
                                        "cuda: recompute sampled GEMM/attention cells on the CPU: stop (on a "
                                        "mismatch), warn, or off")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                            ->default_str(d.audit));
    text_opts.push_back(cmd->add_option("--linear", cfg.linear,
                                        "float, or units: every linear layer of the blocks through the int8 units "
                                        "(docs/UNITS.md; float backward unless --unit-backward)")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                            ->default_str(d.linear));
    text_opts.push_back(cmd->add_flag("--unit-backward", cfg.unit_backward,
                                      "with --linear units: dx and dW through int8 products as well"));
    text_opts.push_back(cmd->add_flag("--units-head", cfg.units_head, "with --linear units: the LM head too"));
    text_opts.push_back(cmd->add_option("--attention", cfg.attention,
                                        "float, or units: attention's QKᵀ and P·V through int8 units "
                                        "(docs/UNITS.md; float backward; such a model does not decode)")
                            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                            ->default_str(d.attention));
    cmd->add_option("--resume", resume, "continue the run in this directory (or from this checkpoint)");
    cmd->add_flag("--force", force, "start over in an --out directory that already holds a run");
    cmd->add_option("--guard-every", replica_flags.guard_every,
                    "under mpirun: compare the replicas' weight hashes every N steps (0: never)")
        ->default_val(replica_flags.guard_every);
    cmd->add_option("--replica-timeout", replica_flags.timeout_s,
                    "under mpirun: seconds to wait for another replica before stopping the run")
        ->default_val(replica_flags.timeout_s);
    num.add(cmd, "steps", "optimizer steps", num_text(static_cast<double>(d.steps)));
    num.add(cmd, "batch", "windows per micro-batch", num_text(static_cast<double>(d.batch)));
    num.add(cmd, "seq", "tokens per window", num_text(static_cast<double>(d.seq)));
    num.add(cmd, "accum", "micro-batches per step (gradient accumulation)", num_text(static_cast<double>(d.accum)));
    num.add(cmd, "lr", "peak learning rate", num_text(d.lr));
    num.add(cmd, "warmup", "linear warmup steps, then cosine decay (default: 60, at most steps/10)",
            num_text(static_cast<double>(d.warmup)));
    num.add(cmd, "min-lr-ratio", "final learning rate / peak", num_text(d.min_lr_ratio));
    num.add(cmd, "weight-decay", "AdamW decoupled weight decay", num_text(d.weight_decay));
    num.add(cmd, "beta1", "AdamW beta1", num_text(d.beta1));
    num.add(cmd, "beta2", "AdamW beta2", num_text(d.beta2));
    num.add(cmd, "eps", "AdamW epsilon", num_text(d.eps));
    num.add(cmd, "grad-clip", "global gradient norm limit (0: none)", num_text(d.grad_clip));
    num.add(cmd, "audit-budget",
            "cuda: percent of wall time the audits of each kind may take; a launch over it is not audited, which "
            "changes no bit (100: every launch)",
            num_text(d.audit_budget));
    num.add(cmd, "threads", "CPU threads (0: all; the bits do not depend on it)", num_text(d.threads));
    num.add(cmd, "seed", "seed of initialization and batch sampling", num_text(static_cast<double>(d.seed)));
    num.add(cmd, "vocab", "BPE vocabulary size, trained on the training split", num_text(d.vocab));
    num.add(cmd, "val-fraction", "share of documents held out for validation", num_text(d.val_fraction));
    num.add(cmd, "eval-every", "steps between validation passes (0: only at the end)",
            num_text(static_cast<double>(d.eval_every)));
    num.add(cmd, "eval-tokens", "validation tokens per periodic pass (the final pass scores all)",
            num_text(static_cast<double>(d.eval_tokens)));
    num.add(cmd, "save-every", "steps between checkpoints (0: only at the end)",
            num_text(static_cast<double>(d.save_every)));
    num.add(cmd, "log-every", "steps between progress lines when not on a terminal (0: about 50 lines)",
            num_text(static_cast<double>(d.log_every)));
    num.add(cmd, "max-minutes", "wall-clock budget for the whole command; then evaluate, save, stop (0: none)",
            num_text(d.max_minutes));
  }

  int run() {
    using namespace lockstep::train;
    const auto start = std::chrono::steady_clock::now();
    // Under mpirun this process is a replica (docs/DISTRIBUTED.md); otherwise
    // nothing of MPI runs.
    std::unique_ptr<lockstep::cli::TrainReplica> replica;
    const bool rank0 = lockstep::dist::launch_from_env().rank == 0;
    try {
      cfg.steps = num.integer("steps");
      cfg.batch = num.integer("batch");
      cfg.seq = num.integer("seq");
      cfg.accum = num.integer("accum");
      cfg.lr = num.real("lr");
      cfg.warmup = num.integer("warmup");
      // A shorter run than the default without --warmup: warm up over a tenth of it.
      if (!num.given("warmup") && num.given("steps"))
        cfg.warmup = std::min(cfg.warmup, std::max<std::int64_t>(cfg.steps / 10, 0));
      cfg.min_lr_ratio = num.real("min-lr-ratio");
      cfg.weight_decay = num.real("weight-decay");
      cfg.beta1 = num.real("beta1");
      cfg.beta2 = num.real("beta2");
      cfg.eps = num.real("eps");
      cfg.grad_clip = num.real("grad-clip");
      cfg.audit_budget = num.real("audit-budget");
      cfg.threads = static_cast<int>(std::clamp<std::int64_t>(num.integer("threads"), -1, 1 << 20));
      const std::int64_t seed = num.integer("seed");
      if (seed < 0) throw std::invalid_argument(fmt::format("--seed must be >= 0, got {}", seed));
      cfg.seed = static_cast<std::uint64_t>(seed);
      cfg.vocab = static_cast<std::int32_t>(std::clamp<std::int64_t>(num.integer("vocab"), -1, 1 << 30));
      cfg.val_fraction = num.real("val-fraction");
      cfg.eval_every = num.integer("eval-every");
      cfg.eval_tokens = num.integer("eval-tokens");
      cfg.save_every = num.integer("save-every");
      cfg.log_every = num.integer("log-every");
      cfg.max_minutes = num.real("max-minutes");

      RunOptions ro;
      ro.resume = resume;
      ro.force = force;
      ro.start = start;
      ro.tty = isatty(fileno(stdout)) != 0;
      ro.stop = &install_interrupt_handler();
      for (const auto& [name, o] : num.opt)
        if (o->count() > 0) ro.given.insert(name);
      for (CLI::Option* o : text_opts)
        if (o->count() > 0) ro.given.insert(o->get_name().substr(2));
      replica = lockstep::cli::TrainReplica::start_if_launched(cfg.device, cfg.threads, replica_flags);
      if (replica) ro.replica = &replica->run();
      const RunSummary s = run_training(cfg, ro);
      if (!s.checkpoint.empty() && !s.interrupted && rank0)
        fmt::print("generate with: lockstep generate --checkpoint {} --prompt \"It is a truth\"\n",
                   resume.empty() ? cfg.out : resume);
      return 0;
    } catch (const lockstep::dist::Refused& e) {
      // Every replica saw the same handshake and refuses: one says why.
      if (rank0) fmt::print(stderr, "lockstep train: refused: {}\n", e.what());
      return 2;
    } catch (const lockstep::dist::ReplicaTimeout& e) {
      if (replica) replica->abort(e.what(), 3);
      fmt::print(stderr, "lockstep train: error: {}\n", e.what());
      return 3;
    } catch (const std::invalid_argument& e) {
      if (replica) replica->abort(e.what(), 2);  // the others may be waiting for this one
      fmt::print(stderr, "lockstep train: {}\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      if (replica) replica->abort(std::string("error: ") + e.what(), 1);
      fmt::print(stderr, "lockstep train: error: {}\n", e.what());
      return 1;
    }
  }
};

// The subcommands that live in their own files (command.hpp).
std::vector<std::unique_ptr<lockstep::cli::Command>> make_commands() {
  std::vector<std::unique_ptr<lockstep::cli::Command>> list;
  list.push_back(lockstep::cli::make_generate_command());
  list.push_back(lockstep::cli::make_chat_command());
  list.push_back(lockstep::cli::make_inspect_command());
  list.push_back(lockstep::cli::make_convert_command());
  list.push_back(lockstep::cli::make_tokenize_command());
  list.push_back(lockstep::cli::make_merge_command());
  list.push_back(lockstep::cli::make_finetune_command());
  return list;
}

}  // namespace

// libgomp's idle threads spin before they sleep. On a machine whose cores are
// busy with other work a spinning thread holds the core its partner needs, and
// training runs up to 10x slower (docs/TRAINING.md, "OpenMP on a shared
// machine"); on an idle machine spinning is the faster choice. libgomp reads
// OMP_WAIT_POLICY once, when it is loaded, so `train` and `generate` on a busy
// machine re-run this very process with OMP_WAIT_POLICY=passive (unless the
// user set it). Only the speed changes, never a bit of the results.
static void prefer_passive_openmp_when_busy(int argc, char** argv) {
  if (argc < 2) return;
  const std::string sub = argv[1];
  if (sub != "train" && sub != "generate" && sub != "chat") return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  double load = 0;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!(std::ifstream("/proc/loadavg") >> load) || cores < 1 || load <= 1.5 * static_cast<double>(cores)) return;
  if (std::string(argv[1]) == "train")  // generate's output is the text alone
    fmt::print(stderr,
               "lockstep: busy machine (load average {:.1f} on {} cores): OpenMP threads will sleep instead of "
               "spinning (OMP_WAIT_POLICY=passive; set it to choose)\n",
               load, cores);
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
}

int main(int argc, char** argv) {
  prefer_passive_openmp_when_busy(argc, argv);
  CLI::App app{"lockstep: train, finetune and run transformer language models with bit-identical, "
               "verified numerics"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lockstep ") + lockstep::build::kVersion);

  app.add_subcommand("version", "print the version and NUMERIC_SPEC_VERSION");

  auto* verify = app.add_subcommand(
      "verify", "run the verification suites and print their tables (exit 1 on any failure)");
  std::vector<std::string> suite_names;
  lockstep::verify::Options vopt;
  bool list = false;
  verify->add_option("suites", suite_names, "suites to run (default: all; see --list)");
  verify->add_option("--seed", vopt.seed, "random seed (default: from the clock, printed)");
  verify->add_option("--effort", vopt.effort, "scale every suite's case count (e.g. 0.1, 10)")
      ->check(kPositive);
  verify->add_option("--threads", vopt.threads, "CPU threads (0: all)")
      ->check(CLI::Range(0, 4096));
  verify->add_flag("--list", list, "list the suites and exit");

  TrainCommand train;
  train.add(app);
  auto commands = make_commands();
  for (auto& c : commands) c->add(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (app.got_subcommand("version")) return run_version();
  if (app.got_subcommand("verify")) return run_verify(suite_names, vopt, list);
  if (app.got_subcommand("train")) return train.run();
  for (auto& c : commands)
    if (c->chosen()) return c->run();
  return 2;
}
