// `lockstep tokenize`: ids on stdout as the library encodes them, --decode
// back to the same bytes, and one clear line (exit status 2) for malformed
// files and ids, with non-printable bytes escaped.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <unistd.h>

#include "../common/run_command.hpp"
#include "lockstep/tok/bpe.hpp"
#include "testdata.hpp"

namespace {

using namespace lockstep::tok;
using namespace lockstep::tok::testing;

std::filesystem::path tmp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("lockstep_cli_tok_" + std::to_string(::getpid()) + "_" + name);
}

void write(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

struct Result {
  int status;
  std::string out, err;  // stdout's bytes (through a file: they may hold NULs), stderr
};
Result tokenize(const std::string& args, std::string_view stdin_bytes) {
  const auto in = tmp("in"), out = tmp("out");
  write(in, stdin_bytes);
  Result r;
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive)
  // on "(" + std::string(LOCKSTEP_CLI_PATH) for some lengths of the build path.
  std::string command = "(";
  command += LOCKSTEP_CLI_PATH;
  command += " tokenize " + args + " < '" + in.string() + "' > '" + out.string() + "')";
  r.err = lockstep::test::run_command(command, &r.status);
  r.out = slurp(out);
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  return r;
}

std::string ids_line(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  s += '\n';
  return s;
}

TEST(TokCli, EncodesAndDecodesAsTheLibrary) {
  LOCKSTEP_REQUIRE_FILE(testdata() / "llama3/tokenizer.json");
  const std::string json = "--tokenizer '" + (testdata() / "llama3/tokenizer.json").string() + "'";
  const BpeTokenizer tok = load_hf_tokenizer_json(testdata() / "llama3/tokenizer.json");
  EXPECT_EQ(tokenize(json, "Hello world").out, "9906 1917\n");
  EXPECT_EQ(tokenize(json + " --specials", "Hi<|eot_id|>").out, ids_line(tok.encode_with_specials("Hi<|eot_id|>")));
  // Round trips of random bytes (NULs, invalid UTF-8) through the CLI.
  const std::string r50k = "--tiktoken '" + (testdata() / "tokenizers/r50k_base.tiktoken").string() + "'";
  const BpeTokenizer r50k_tok = load_r50k_base(testdata() / "tokenizers/r50k_base.tiktoken");
  std::mt19937 rng(5);
  int bad = 0;
  for (int k = 0; k < 4; ++k) {
    std::string text;
    for (int n = 1000; n > 0; --n) text += static_cast<char>(k % 2 ? rng() % 256 : "ab \n'1\0é"[rng() % 9]);
    const Result enc = tokenize(r50k, text);
    const Result dec = tokenize(r50k + " --decode", enc.out);
    bad += enc.out != ids_line(r50k_tok.encode(text)) || dec.out != text || enc.status != 0 || dec.status != 0;
  }
  EXPECT_EQ(bad, 0);
  // The other two sources.
  const std::string gguf = "--vocab '" + (testdata() / "gguf-vocab/ggml-vocab-gpt-2.gguf").string() + "'";
  if (std::filesystem::exists(testdata() / "gguf-vocab/ggml-vocab-gpt-2.gguf")) {
    EXPECT_EQ(tokenize(gguf, "Hello world").out, "15496 995\n");
  }
  const std::string tt = "--tiktoken '" + (testdata() / "tokenizers/cl100k_base.tiktoken").string() + "'";
  EXPECT_EQ(tokenize(tt, "Hello world").out, "9906 1917\n");
  EXPECT_EQ(tokenize(tt + " --decode", "[9906, 1917]").out, "Hello world");
}

// One line on stderr, exit status 2, the file and place named, no raw
// control bytes.
void expect_refused(const std::string& args, std::string_view input, const std::string& needle) {
  const Result r = tokenize(args, input);
  EXPECT_EQ(r.status, 2) << args << ": " << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char c : r.err) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << r.err;
}

TEST(TokCli, MalformedInputIsRefusedClearly) {
  const auto bad_tt = tmp("bad.tiktoken");
  write(bad_tt, "QQ== 0\nQQ== 1\n");
  expect_refused("--tiktoken '" + bad_tt.string() + "' --encoding r50k_base", "x", "appears twice");
  const auto bad_json = tmp("tokenizer.json");
  write(bad_json, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\x01\": 0}}}");
  expect_refused("--tokenizer '" + bad_json.string() + "'", "x", "invalid JSON");
  write(bad_json, "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Metaspace\"}}");
  expect_refused("--tokenizer '" + bad_json.string() + "'", "x", "unsupported pre-tokenizer type 'Metaspace'");
  write(bad_json, "{\"model\": {\"type\": \"WordPiece\\u0001\"}}");
  expect_refused("--tokenizer '" + bad_json.string() + "'", "x", "model.type");
  const auto bad_gguf = tmp("bad.gguf");
  if (std::filesystem::exists(testdata() / "gguf-vocab/ggml-vocab-gpt-2.gguf")) {
    write(bad_gguf, slurp(testdata() / "gguf-vocab/ggml-vocab-gpt-2.gguf").substr(0, 5000));
    expect_refused("--vocab '" + bad_gguf.string() + "'", "x", bad_gguf.string() + ": offset ");
  }
  expect_refused("--vocab /nonexistent/x.gguf", "x", "/nonexistent/x.gguf");
  const std::string tt = "--tiktoken '" + (testdata() / "tokenizers/cl100k_base.tiktoken").string() + "'";
  expect_refused(tt + " --encoding nope\x01", "x", "unknown tiktoken encoding 'nope\\x01'");
  expect_refused(tt + " --decode", "1 2 x\x02y", "'x\\x02y' is not a token id");
  expect_refused(tt + " --decode", "100256", "id 100256 is not a token");  // cl100k's hole
  expect_refused("", "", "give one of --vocab");
  for (const auto& p : {bad_tt, bad_json, bad_gguf}) std::filesystem::remove(p);
}

}  // namespace
