// The two LoRA paths agree bit for bit: the adapters a model trains in
// (model/lora_params.hpp: the engine's branch, what `lockstep finetune`
// trains), saved in PEFT's format (load::save_adapter) and loaded back onto the
// base by load::make_spec_adapted_model (ops::LoraLinear::forward at each
// adapted projection), give the engine's logits; so does make_adapted_model
// (what `generate --adapter` runs: the engine's branch again, its next_logits
// and its decode session). Also: a lockstep-written adapter loaded with
// set_adapter gives them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/load/adapted_model.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "../model/model_test_util.hpp"

namespace m = lockstep::model;
namespace ld = lockstep::load;
namespace fs = std::filesystem;

namespace {

TEST(AdapterJoin, TheEnginesAdaptersSavedAndLoadedGiveItsLogits) {
  const fs::path dir = fs::temp_directory_path() / "lockstep_adapter_join";
  fs::remove_all(dir);
  for (const bool rslora : {false, true}) {
    const m::ModelConfig cfg = m::preset("llama-micro");
    auto engine = m::make_cpu_model(cfg);
    engine->init(3);
    const std::vector<m::Param> base = engine->params();
    m::LoraConfig lc;
    lc.rank = 4;
    lc.alpha = 8;
    lc.rslora = rslora;
    lc.dropout = 0;
    lc.targets = {"q_proj", "v_proj", "o_proj", "down_proj"};
    lc.base_model = "llama-micro";
    m::add_lora_params(engine->params(), cfg, lc, 11);
    lockstep::ad::Rng rng(rslora ? 2 : 1);
    for (auto& p : engine->params())
      if (m::is_lora_param(p.name))
        for (float& v : p.value) v = static_cast<float>(rng.uniform(-0.5, 0.5));  // B too: not the zero init
    m::LoraRun run;
    run.scale = m::lora_scale(lc);
    engine->set_lora(run);
    const std::vector<std::int32_t> toks{1, 5, 9, 2, 7, 3, 11};
    const std::vector<float> want = engine->next_logits(toks, 1);

    const std::string out = (dir / (rslora ? "rs" : "plain")).string();
    ld::save_adapter(out, m::adapter_of(engine->params(), lc));
    const m::Adapter loaded = ld::load_adapter(out);

    ld::LoadedModel b;
    b.config = cfg;
    b.params = base;
    b.format = "test";
    auto spec = ld::make_spec_adapted_model(b, loaded);
    EXPECT_EQ(lockstep::model::testing::differing_bits(spec->next_logits(toks, 1), want), 0u) << "rslora " << rslora;
    auto adapted = ld::make_adapted_model(std::move(b), loaded);
    EXPECT_EQ(lockstep::model::testing::differing_bits(adapted->next_logits(toks, 1), want), 0u) << "rslora " << rslora;
    EXPECT_EQ(lockstep::model::testing::differing_bits(adapted->decoder(1, 0)->prefill(0, toks, false, 2), want), 0u)
        << "rslora " << rslora << ": the decode session";

    // And back into an engine: set_adapter on a fresh adapted model.
    auto again = m::make_cpu_model(cfg);
    again->params() = base;
    m::add_lora_params(again->params(), cfg, loaded.config, 99);
    m::set_adapter(again->params(), loaded);
    again->set_lora(run);
    EXPECT_EQ(lockstep::model::testing::differing_bits(again->next_logits(toks, 1), want), 0u) << "rslora " << rslora;
  }
  fs::remove_all(dir);
}

}  // namespace
