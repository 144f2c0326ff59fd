// make_loaded_model: the one piece of load/ that needs the models' kernels
// (model::make_model), in its own file so the file parsers build without them
// (the fuzzers compile model_file.cpp alone).
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/load/model_file.hpp"

namespace lockstep::load {

std::unique_ptr<model::Model> make_loaded_model(LoadedModel loaded, const std::string& device) {
  auto m = model::make_model(loaded.config, device);
  auto& ps = m->params();
  if (ps.size() != loaded.params.size())
    throw std::runtime_error(fmt::format("loaded {} parameters, the model has {}", loaded.params.size(), ps.size()));
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (ps[i].name != loaded.params[i].name || ps[i].shape != loaded.params[i].shape)
      throw std::runtime_error("loaded parameter " + loaded.params[i].name + " does not match the model's " + ps[i].name);
    model::Param& p = loaded.params[i];
    p.decay = ps[i].decay;
    ps[i] = std::move(p);
  }
  return m;
}

std::unique_ptr<model::DecodeModel> make_decode_model(LoadedModel loaded, int threads) {
  return model::make_cpu_decode_model(loaded.config, std::move(loaded.params), threads);
}

}  // namespace lockstep::load
