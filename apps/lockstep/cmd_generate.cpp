// lockstep generate: sample text from a model with its KV cache (the decode
// mode, model/decode.hpp): the prompt in one prefill, then one decode pass per
// token, printed as it comes. Deterministic for a --seed, on any --threads
// and either --device (the logits are the same bits).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "command.hpp"
#include "generate_model.hpp"
#include "lockstep/infer/generate.hpp"
#include "numeric_flags.hpp"

namespace lockstep::cli {
namespace {

class GenerateCommand final : public Command {
 public:
  void add(CLI::App& app) override {
    cmd_ = app.add_subcommand("generate", "sample text from a model (deterministic for a --seed)");
    source_.add(cmd_);
    cmd_->add_option("--prompt", prompt_, "text to continue (default: start a new document)");
    sampling_.add(cmd_);
    cmd_->add_flag("--stats", stats_, "print the tokens/s (prefill included) to stderr at the end");
  }

  int run() override {
    try {
      const infer::GenerateOptions g = sampling_.read();
      LoadedModel m = source_.load();
      fmt::print("{}", prompt_);
      std::fflush(stdout);
      const auto t0 = std::chrono::steady_clock::now();
      const auto ids = infer::generate(*m.model, *m.tokenizer, prompt_, g, [](std::string_view text) {
        fmt::print("{}", text);
        std::fflush(stdout);
      });
      fmt::print("\n");
      if (stats_) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        fmt::print(stderr, "lockstep generate: {} tokens in {:.3f} s ({:.2f} tokens/s, the prefill included)\n",
                   ids.size(), s, static_cast<double>(ids.size()) / s);
      }
      return 0;
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "lockstep generate: {}\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep generate: error: {}\n", e.what());
      return 1;
    }
  }

 private:
  ModelSource source_;
  SamplingFlags sampling_;
  std::string prompt_;
  bool stats_ = false;
};

}  // namespace

std::unique_ptr<Command> make_generate_command() { return std::make_unique<GenerateCommand>(); }

}  // namespace lockstep::cli
