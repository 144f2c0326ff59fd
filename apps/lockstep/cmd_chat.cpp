// lockstep chat: an interactive conversation with a model, its prompt built
// by the model's chat template (tok/chat.hpp: BitNet b1.58 2B4T's, LLaMA-3
// vocabulary: "<|begin_of_text|>", then "Role: content<|eot_id|>" per
// message, then "Assistant: "). One line on stdin is one user message; the
// reply streams to stdout and ends at <|eot_id|> (or the end-of-text token,
// --max-tokens, a full context). The KV cache lives across turns: each turn
// prefills only the tokens after the longest prefix the cache already holds.
// Lines "/reset" (a new conversation) and "/quit" are commands; EOF ends it.
// The replies are deterministic for a --seed (turn t samples with seed + t).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "command.hpp"
#include "generate_model.hpp"
#include "lockstep/infer/generate.hpp"
#include "lockstep/tok/chat.hpp"

namespace lockstep::cli {
namespace {

class ChatCommand final : public Command {
 public:
  void add(CLI::App& app) override {
    cmd_ = app.add_subcommand("chat", "talk with a model through its chat template (one line = one message)");
    source_.add(cmd_);
    cmd_->add_option("--system", system_, "a system message that opens the conversation");
    sampling_.add(cmd_);
  }

  int run() override {
    LoadedModel m;
    infer::GenerateOptions g;
    try {
      g = sampling_.read();
      m = source_.load();
      // The template's own tokens must exist (encode_chat refuses otherwise).
      (void)tok::encode_chat(*m.tokenizer, std::vector<tok::ChatMessage>{}, true);
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "lockstep chat: {}\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep chat: error: {}\n", e.what());
      return 1;
    }
    try {
      g.sample_vocab = m.tokenizer->vocab_size();
      const std::vector<std::int32_t> stops = g.stop_at_eos ? infer::stop_ids_of(*m.tokenizer)
                                                            : std::vector<std::int32_t>{};
      auto session = m.model->decoder(1, static_cast<std::size_t>(g.context));
      std::vector<tok::ChatMessage> messages;
      if (!system_.empty()) messages.push_back({"system", system_});
      std::vector<std::int32_t> cached;  // the tokens the session's cache holds
      std::uint64_t turn = 0;
      std::string line;
      fmt::print(stderr, "lockstep chat: {} (context {}); /reset, /quit\n", m.model->config().summary(),
                 session->context());
      while (std::fputs("> ", stderr), std::getline(std::cin, line)) {
        if (line == "/quit") break;
        if (line == "/reset") {
          messages.resize(system_.empty() ? 0 : 1);
          continue;
        }
        messages.push_back({"user", line});
        const std::vector<std::int32_t> full = tok::encode_chat(*m.tokenizer, messages, true);
        std::size_t keep = 0;
        while (keep < cached.size() && keep < full.size() && cached[keep] == full[keep]) ++keep;
        if (keep == full.size()) --keep;  // at least one token to prefill (its logits start the reply)
        session->truncate(0, keep);
        cached.resize(keep);
        const std::span<const std::int32_t> fresh(full.data() + keep, full.size() - keep);
        std::string reply;
        auto on_token = [&](std::size_t, std::int32_t id) {
          if (std::find(stops.begin(), stops.end(), id) != stops.end()) return;
          const std::string text = m.tokenizer->decode(std::span<const std::int32_t>(&id, 1));
          reply += text;
          fmt::print("{}", text);
          std::fflush(stdout);
        };
        infer::Generated out;
        try {
          out = infer::generate_in(*session, 0, fresh, cached, g.sampling.seed + turn, g, stops, on_token);
        } catch (const std::length_error& e) {
          fmt::print(stderr, "lockstep chat: {} (/reset starts a new conversation)\n", e.what());
          messages.pop_back();
          continue;
        }
        fmt::print("\n");
        ++turn;
        cached = full;
        if (!out.tokens.empty()) cached.insert(cached.end(), out.tokens.begin(), out.tokens.end() - 1);
        messages.push_back({"assistant", reply});
        if (out.reason == infer::StopReason::context_full)
          fmt::print(stderr, "lockstep chat: the context of {} positions is full (/reset)\n", session->context());
      }
      return 0;
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep chat: error: {}\n", e.what());
      return 1;
    }
  }

 private:
  ModelSource source_;
  SamplingFlags sampling_;
  std::string system_;
};

}  // namespace

std::unique_ptr<Command> make_chat_command() { return std::make_unique<ChatCommand>(); }

}  // namespace lockstep::cli
