// The BitNet b1.58 2B4T chat template (tok/chat.hpp): a known answer, and
// agreement with the Jinja template rendered by Jinja2 and encoded by Hugging
// Face tokenizers on random conversations (tests/tok/chat_template.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "../common/run_command.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/chat.hpp"
#include "testdata.hpp"

namespace {

using namespace lockstep::tok;
using namespace lockstep::tok::testing;

TEST(TokChat, KnownAnswer) {
  const std::vector<ChatMessage> m = {{"system", "  You are helpful.\n"}, {"user", "Hi"}, {"assistant", "Hello!"},
                                      {"USER", "\tBye \u3000"}};
  EXPECT_EQ(apply_chat_template(m, true),
            "<|begin_of_text|>System: You are helpful.<|eot_id|>User: Hi<|eot_id|>Assistant: Hello!<|eot_id|>"
            "User: Bye<|eot_id|>Assistant: ");
  EXPECT_EQ(apply_chat_template({}, false), "<|begin_of_text|>");
}

TEST(TokChat, EncodesWithTheLlama3Vocabulary) {
  LOCKSTEP_REQUIRE_FILE(testdata() / "llama3/tokenizer.json");
  const BpeTokenizer tok = load_hf_tokenizer_json(testdata() / "llama3/tokenizer.json");
  const std::vector<ChatMessage> m = {{"user", "Hey, are you conscious? Can you talk to me?"}};
  const std::vector<std::int32_t> ids = encode_chat(tok, m, true);
  ASSERT_GT(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 128000);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009), 1);
  EXPECT_EQ(tok.decode(ids), apply_chat_template(m, true));
  // A vocabulary without the template's special tokens is refused.
  const BpeTokenizer gpt2 = load_r50k_base(testdata() / "tokenizers/r50k_base.tiktoken");
  EXPECT_THROW(encode_chat(gpt2, m, true), std::invalid_argument);

  // Random conversations: roles in several cases, contents with white space
  // of every kind at their ends, special-token texts inside.
  const std::string python = LOCKSTEP_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python interpreter found at configure time";
  std::mt19937 rng(31);
  static const char* const roles[] = {"system", "user", "assistant", "USER", "Assistant", "tool"};
  static const char* const bits[] = {"Hello", " world", "1234", "don't", "Привет", "世界", "😀", " ", "  ", "\n", "\t",
                                     "\r\n", "\u3000", "\u00a0", "\u0085", "\u001c", "\u200b", "<|eot_id|>", "Assistant:",
                                     "'s", "!!"};
  nlohmann::json convs = nlohmann::json::array();
  std::vector<std::pair<std::vector<ChatMessage>, bool>> mine;
  for (int k = 0; k < 300; ++k) {
    std::vector<ChatMessage> msgs;
    nlohmann::json jm = nlohmann::json::array();
    for (int n = static_cast<int>(rng() % 5); n > 0; --n) {
      ChatMessage msg{roles[rng() % std::size(roles)], ""};
      for (int b = static_cast<int>(rng() % 8); b > 0; --b) msg.content += bits[rng() % std::size(bits)];
      jm.push_back({{"role", msg.role}, {"content", msg.content}});
      msgs.push_back(msg);
    }
    const bool gen = rng() % 2 == 0;
    convs.push_back({{"messages", jm}, {"add_generation_prompt", gen}});
    mine.emplace_back(msgs, gen);
  }
  const std::string tag = std::to_string(::getpid());
  const auto in = std::filesystem::temp_directory_path() / ("lockstep_chat_in_" + tag + ".json");
  const auto out = std::filesystem::temp_directory_path() / ("lockstep_chat_out_" + tag + ".json");
  std::ofstream(in) << convs.dump();
  int status = 0;
  const std::string log = lockstep::test::run_command("'" + python + "' '" + LOCKSTEP_SOURCE_DIR +
                                                          "/tests/tok/chat_template.py' '" + in.string() + "' '" +
                                                          out.string() + "' '" +
                                                          (testdata() / "llama3/tokenizer.json").string() + "'",
                                                      &status);
  std::filesystem::remove(in);
  if (status == 3) GTEST_SKIP() << "python jinja2 or `tokenizers` is not installed (pip install -r tests/requirements.txt)";
  ASSERT_EQ(status, 0) << log;
  const nlohmann::json want = nlohmann::json::parse(slurp(out));
  std::filesystem::remove(out);
  ASSERT_EQ(want.size(), mine.size());
  int text_bad = 0, ids_bad = 0;
  for (std::size_t k = 0; k < mine.size(); ++k) {
    const std::string text = apply_chat_template(mine[k].first, mine[k].second);
    if (text != want[k]["text"].get<std::string>() && ++text_bad <= 3) {
      ADD_FAILURE() << "jinja2: " << want[k]["text"].dump() << "\n ours:  " << nlohmann::json(text).dump();
    }
    ids_bad += encode_chat(tok, mine[k].first, mine[k].second) != want[k]["ids"].get<std::vector<std::int32_t>>();
  }
  std::printf("chat template vs Jinja2 + HF tokenizers: %zu conversations, %d text mismatches, %d id mismatches\n",
              mine.size(), text_bad, ids_bad);
  EXPECT_EQ(text_bad, 0);
  EXPECT_EQ(ids_bad, 0);
}

}  // namespace
