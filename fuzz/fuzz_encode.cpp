// encode/decode on arbitrary bytes: both pre-tokenizers tile the input; a
// trained byte-level BPE (both regexes) and the byte tokenizer round-trip it
// exactly; the heap and plain merge loops agree.
#include <string_view>
#include <vector>

#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/bpe_train.hpp"

namespace {
const lockstep::tok::BpeTokenizer& trained(lockstep::tok::PreTokenizer pre) {
  static const auto make = [](lockstep::tok::PreTokenizer p) {
    std::string corpus;
    for (int k = 0; k < 200; ++k) {
      corpus += "The quick brown fox jumps over the lazy dog's back 1234567 times!\n  \t";
      corpus += "Привет мир, こんにちは世界 😀😀 don't WE'LL ſ\xC2\xA0\xE3\x80\x80 ...\r\n";
    }
    lockstep::tok::BpeTrainOptions opt;
    opt.vocab_size = 600;
    opt.pre = p;
    opt.min_count = 1;
    return lockstep::tok::train_bpe(corpus, opt);
  };
  static const lockstep::tok::BpeTokenizer g = make(lockstep::tok::PreTokenizer::kGpt2);
  static const lockstep::tok::BpeTokenizer c = make(lockstep::tok::PreTokenizer::kCl100k);
  return pre == lockstep::tok::PreTokenizer::kGpt2 ? g : c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto pre : {lockstep::tok::PreTokenizer::kGpt2, lockstep::tok::PreTokenizer::kCl100k}) {
    std::vector<std::string_view> pieces;
    lockstep::tok::pre_tokenize(pre, text, pieces);
    std::size_t total = 0;
    for (const auto p : pieces) {
      if (p.empty() || p.data() != text.data() + total) __builtin_trap();
      total += p.size();
    }
    if (total != text.size()) __builtin_trap();
    const auto& tok = trained(pre);
    const std::vector<std::int32_t> ids = tok.encode(text);
    if (tok.decode(ids) != text) __builtin_trap();
    std::vector<std::int32_t> a, b;
    for (const char ch : text.substr(0, 600)) a.push_back(static_cast<unsigned char>(ch));
    b = a;
    tok.merge_simple(a);
    tok.merge_heap(b);
    if (a != b) __builtin_trap();
  }
  return 0;
}
