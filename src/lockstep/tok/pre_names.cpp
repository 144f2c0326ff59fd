// The pre-tokenizers that GGUF's tokenizer.ggml.pre names, as llama.cpp maps
// the names (src/llama-vocab.cpp: the name -> pre-type table and each type's
// regexes). Where llama.cpp rewrote a tokenizer.json regex for its own regex
// engine (and says so), the original from tokenizer.json is used here: PCRE2
// runs it as Hugging Face tokenizers does. Every entry is checked against HF
// `tokenizers` (a Sequence of Split(regex, "isolated")) on random text by
// tests/tok/hf_crosscheck_test.cpp.
#include <algorithm>
#include <map>

#include "lockstep/tok/pretokenize.hpp"

namespace lockstep::tok {

namespace {

// The regexes, as tokenizer.json files spell them.
constexpr const char* kGpt2Re = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Re =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35Re =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k_base (tiktoken) and GPT-4o-style tokenizer.json files.
constexpr const char* kO200kRe =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kTekkenRe =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kSeedCoderRe =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kBailingRe =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr const char* kExaoneMoeRe =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr const char* kMiniCpm5Re =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kJais2Re =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
constexpr const char* kYoutuRe =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kYoutuCjkRe = R"([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)";
constexpr const char* kDeepseek3Re =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kCjkRe = R"([一-龥぀-ゟ゠-ヿ]+)";
constexpr const char* kPoroRe = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
constexpr const char* kFalconPunctRe = R"([\p{P}\$\+<=>\^~\|`]+)";
constexpr const char* kDefaultPunctRe = R"([\p{P}\$\+<=>\^~\|]+)";

struct Entry {
  std::vector<const char*> names;
  NamedPreTokenizer spec;
};

NamedPreTokenizer hand(PreTokenizer p, bool ignore_merges = false, bool add_bos = false) {
  return {p, {}, ignore_merges, add_bos};
}
NamedPreTokenizer regexes(std::vector<std::string> r, bool ignore_merges = false, bool add_bos = false) {
  return {PreTokenizer::kGpt2, std::move(r), ignore_merges, add_bos};
}

const std::map<std::string, NamedPreTokenizer, std::less<>>& table() {
  static const std::map<std::string, NamedPreTokenizer, std::less<>> t = [] {
    const std::vector<Entry> entries = {
        {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
          "modern-bert", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-v1-en", "jina-v2-code",
          "roberta-bpe"},
         hand(PreTokenizer::kGpt2)},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
         hand(PreTokenizer::kCl100k, true, true)},
        {{"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}, hand(PreTokenizer::kCl100k)},
        {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
         regexes({R"(\p{N})", kGpt2Re})},
        {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan"}, regexes({kQwen2Re})},
        {{"qwen35"}, regexes({kQwen35Re})},
        {{"gpt-4o", "llama4", "kanana2", "talkie"}, regexes({kO200kRe})},
        {{"deepseek-coder"}, regexes({"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"})},
        {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, regexes({R"(\p{N}{1,3})", kCjkRe, kDeepseek3Re})},
        {{"falcon"}, regexes({kFalconPunctRe, kGpt2Re, "[0-9][0-9][0-9]"})},
        {{"tekken"}, regexes({kTekkenRe}, true, true)},
        {{"poro-chat", "bloom", "gpt3-finnish"}, regexes({kPoroRe})},
        {{"viking"}, regexes({kPoroRe, R"(\p{N})"})},
        {{"seed-coder"}, regexes({kSeedCoderRe})},
        {{"bailingmoe", "bailingmoe2", "llada-moe"}, regexes({kBailingRe})},
        {{"exaone-moe"}, regexes({kExaoneMoeRe})},
        {{"minicpm5"}, regexes({R"(\p{N}{1,3})", kMiniCpm5Re}, true)},
        {{"tiny_aya", "cohere2moe"}, regexes({R"(\d{1,3}(?=(?:\d{3})*\b))", kO200kRe})},
        {{"superbpe"}, regexes({R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"})},
        {{"jais-2"}, regexes({kJais2Re})},
        {{"youtu"}, regexes({kYoutuCjkRe, kYoutuRe}, true)},
        {{"default"}, regexes({kDefaultPunctRe, kGpt2Re, R"(\p{N}+)", "[0-9][0-9][0-9]"})},
    };
    std::map<std::string, NamedPreTokenizer, std::less<>> m;
    for (const Entry& e : entries) {
      for (const char* n : e.names) m.emplace(n, e.spec);
    }
    return m;
  }();
  return t;
}

}  // namespace

std::optional<NamedPreTokenizer> pre_tokenizer_by_name(std::string_view name) {
  const auto it = table().find(name);
  if (it == table().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> pre_tokenizer_names() {
  std::vector<std::string> out;
  for (const auto& [name, spec] : table()) out.push_back(name);
  return out;
}

std::string_view o200k_regex() { return kO200kRe; }

}  // namespace lockstep::tok
