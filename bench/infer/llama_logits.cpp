// llama.cpp's logits for load_tool's fixed tokens ((i·37 + 5) mod vocab,
// i < 11), the last position's, one per line: bench/infer/cpu_baselines.sh
// compares them with lockstep's (`load_tool logits FILE`) on the same file.
// Built by that script against its cached llama.cpp (not by lockstep's CMake):
//   g++ -O2 -std=c++17 llama_logits.cpp -I LLAMA/include -I LLAMA/ggml/include -L BIN -lllama
#include <cstdio>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: llama_logits FILE.gguf\n");
    return 2;
  }
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) {
    std::fprintf(stderr, "llama_logits: llama.cpp did not load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 64;
  cp.n_threads = cp.n_threads_batch = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<llama_token> tokens;
  for (int i = 0; i < 11; ++i) tokens.push_back((i * 37 + 5) % vocab);
  if (!ctx || llama_decode(ctx, llama_batch_get_one(tokens.data(), static_cast<int>(tokens.size()))) != 0) {
    std::fprintf(stderr, "llama_logits: llama.cpp did not run %s\n", argv[1]);
    return 1;
  }
  const float* logits = llama_get_logits_ith(ctx, -1);
  for (int i = 0; i < vocab; ++i) std::printf("%.9g\n", static_cast<double>(logits[i]));
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
