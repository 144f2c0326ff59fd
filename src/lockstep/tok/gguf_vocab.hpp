// Tokenizers from a GGUF file's tokenizer.ggml.* metadata (llama.cpp's
// vocabulary format): "gpt2" models become byte-level BpeTokenizers, "llama"
// models SpmTokenizers.
#pragma once

#include <filesystem>
#include <memory>

#include "lockstep/io/gguf.hpp"
#include "lockstep/tok/tokenizer.hpp"

namespace lockstep::tok {

// Throws std::runtime_error naming the file and key for a vocabulary it
// cannot build (unknown model or pre-tokenizer, inconsistent arrays, ...).
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const io::GgufFile& gguf);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& path);

}  // namespace lockstep::tok
