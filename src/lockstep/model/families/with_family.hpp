// The one place a config's family becomes a family type: with_family(cfg, f)
// calls f(Gpt2Family{}), f(LlamaFamily{}) or f(BitnetFamily{}) and returns
// what it returns. The engine (transformer.hpp) and the parameter table
// (params.cpp) are built through it; nothing else switches on cfg.family to
// run a model. A new family: its file, its Family enumerator, one case here.
#pragma once

#include <stdexcept>

#include "lockstep/model/config.hpp"
#include "lockstep/model/families/bitnet.hpp"
#include "lockstep/model/families/gpt2.hpp"
#include "lockstep/model/families/llama.hpp"

namespace lockstep::model {

template <class F>
decltype(auto) with_family(const ModelConfig& cfg, F&& f) {
  static_assert(ModelFamily<Gpt2Family> && ModelFamily<LlamaFamily> && ModelFamily<BitnetFamily>);
  switch (cfg.family) {
    case Family::Gpt2:
      return f(Gpt2Family{});
    case Family::Llama:
      return f(LlamaFamily{});
    case Family::Bitnet:
      return f(BitnetFamily{});
  }
  throw std::invalid_argument("model: unknown family");
}

}  // namespace lockstep::model
