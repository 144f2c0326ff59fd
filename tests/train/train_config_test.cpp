// Training settings: numeric flags (scientific notation, clear errors naming
// the flag), validation, the JSON round trip, the resume merge rules, and the
// progress line.
#include <gtest/gtest.h>

#include <string>

#include "lockstep/train/config.hpp"
#include "lockstep/train/progress.hpp"
#include "lockstep/train/run.hpp"
#include "lockstep/train/trainer.hpp"

using namespace lockstep::train;

namespace {
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}
}  // namespace

TEST(TrainConfig, NumericFlagsAcceptScientificNotation) {
  EXPECT_EQ(parse_real("--lr", "2e-4"), 2e-4);
  EXPECT_EQ(parse_real("--lr", "0.001"), 0.001);
  EXPECT_EQ(parse_real("--lr", "-1.5E+2"), -150.0);
  EXPECT_EQ(parse_int("--steps", "1e3"), 1000);
  EXPECT_EQ(parse_int("--steps", "42"), 42);
  EXPECT_EQ(parse_int("--seed", "0"), 0);
  EXPECT_EQ(message_of([] { parse_real("--lr", "abc"); }), "--lr: expected a number, got 'abc'");
  EXPECT_EQ(message_of([] { parse_real("--lr", "1e-4x"); }), "--lr: expected a number, got '1e-4x'");
  EXPECT_EQ(message_of([] { parse_real("--lr", ""); }), "--lr: expected a number, got ''");
  EXPECT_EQ(message_of([] { parse_int("--steps", "2.5"); }), "--steps: expected a whole number, got 2.5");
  EXPECT_EQ(message_of([] { parse_int("--steps", "ten"); }), "--steps: expected a whole number, got 'ten'");
  EXPECT_NE(message_of([] { parse_real("--lr", "1e999"); }).find("out of range"), std::string::npos);
  EXPECT_NE(message_of([] { parse_real("--lr", "nan"); }).find("out of range"), std::string::npos);
  EXPECT_NE(message_of([] { parse_int("--steps", "1e30"); }).find("out of range"), std::string::npos);
}

TEST(TrainConfig, ValidateNamesTheFlag) {
  const std::vector<std::pair<std::string, void (*)(TrainConfig&)>> cases = {
      {"--steps", [](TrainConfig& c) { c.steps = 0; }},
      {"--batch", [](TrainConfig& c) { c.batch = 0; }},
      {"--seq", [](TrainConfig& c) { c.seq = 1; }},
      {"--accum", [](TrainConfig& c) { c.accum = 0; }},
      {"--lr", [](TrainConfig& c) { c.lr = -1e-3; }},
      {"--lr", [](TrainConfig& c) { c.lr = 0; }},
      {"--warmup", [](TrainConfig& c) { c.warmup = c.steps + 1; }},
      {"--weight-decay", [](TrainConfig& c) { c.weight_decay = -0.1; }},
      {"--beta1", [](TrainConfig& c) { c.beta1 = 1.0; }},
      {"--beta2", [](TrainConfig& c) { c.beta2 = -0.5; }},
      {"--eps", [](TrainConfig& c) { c.eps = 0; }},
      {"--grad-clip", [](TrainConfig& c) { c.grad_clip = -1; }},
      {"--threads", [](TrainConfig& c) { c.threads = -3; }},
      {"--vocab", [](TrainConfig& c) { c.vocab = 100; }},
      {"--val-fraction", [](TrainConfig& c) { c.val_fraction = 0.7; }},
      {"--eval-every", [](TrainConfig& c) { c.eval_every = -1; }},
      {"--save-every", [](TrainConfig& c) { c.save_every = -1; }},
      {"--max-minutes", [](TrainConfig& c) { c.max_minutes = -2; }},
      {"--min-lr-ratio", [](TrainConfig& c) { c.min_lr_ratio = 2; }},
  };
  TrainConfig ok;
  EXPECT_NO_THROW(ok.validate());
  for (const auto& [flag, breakit] : cases) {
    TrainConfig c;
    breakit(c);
    const std::string m = message_of([&] { c.validate(); });
    EXPECT_EQ(m.rfind(flag, 0), 0u) << "expected the message to start with " << flag << ", got: " << m;
  }
  TrainConfig c;
  c.model = "no-such-model";
  EXPECT_NE(message_of([&] { c.model_config(300, 299); }).find("unknown model preset"), std::string::npos);
  c.model = "gpt2-micro";
  c.seq = 65;
  EXPECT_NE(message_of([&] { c.model_config(300, 299); }).find("--seq 65 exceeds"), std::string::npos);
  c.seq = 64;
  const auto mc = c.model_config(300, 299);
  EXPECT_EQ(mc.vocab_size, 300);
  EXPECT_EQ(mc.eos_token, 299);
}

TEST(TrainConfig, JsonRoundTripKeepsEveryField) {
  TrainConfig c;
  c.model = "llama-micro";
  c.data = "/x/y";
  c.lr = 2.5e-4;
  c.steps = 77;
  c.accum = 3;
  c.seed = 0xFFFFFFFFFFull;
  c.max_minutes = 1.5;
  c.eps = 1e-7;
  const TrainConfig d = TrainConfig::from_json(c.to_json());
  EXPECT_EQ(d.to_json(), c.to_json());
  EXPECT_EQ(d.lr, 2.5e-4);
  EXPECT_EQ(d.seed, 0xFFFFFFFFFFull);
  // A missing field is an error, not a silent default.
  std::string j = c.to_json();
  j.replace(j.find("\"lr\""), 4, "\"lx\"");
  EXPECT_NE(message_of([&] { TrainConfig::from_json(j, "x.json"); }).find("x.json"), std::string::npos);
  // An integer field holding a float (fuzz_train_config's 1.3e88: undefined
  // behaviour when read into an int64) is refused naming the field and the file.
  std::string f = c.to_json();
  const auto at = f.find("\"steps\": ") + 9;
  f.replace(at, f.find_first_of(",\n", at) - at, "1.3e88");
  const std::string m = message_of([&] { TrainConfig::from_json(f, "x.json"); });
  EXPECT_NE(m.find("'steps' must be an integer"), std::string::npos) << m;
  EXPECT_NE(m.find("x.json"), std::string::npos) << m;
}

TEST(TrainConfig, ResumeKeepsTheRunsSettings) {
  TrainConfig saved;
  saved.lr = 1e-3;
  saved.steps = 100;
  TrainConfig cli;  // defaults, with some flags "given"
  cli.steps = 200;
  cli.threads = 3;
  cli.lr = 1e-3;
  const TrainConfig m = merge_resume_config(saved, cli, {"steps", "threads", "lr"});
  EXPECT_EQ(m.steps, 200);
  EXPECT_EQ(m.threads, 3);
  EXPECT_EQ(m.lr, 1e-3);
  // Flags not given keep the saved values even though cli's defaults differ.
  cli.batch = 99;
  EXPECT_EQ(merge_resume_config(saved, cli, {}).batch, saved.batch);
  cli.lr = 5e-4;
  const std::string msg = message_of([&] { merge_resume_config(saved, cli, {"lr"}); });
  EXPECT_EQ(msg.rfind("--lr 0.0005 differs from the checkpoint's run (0.001)", 0), 0u) << msg;
}

TEST(TrainProgress, Lines) {
  EXPECT_EQ(format_duration(5), "5s");
  EXPECT_EQ(format_duration(483), "8m03s");
  EXPECT_EQ(format_duration(3725), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_rate(950), "950 tok/s");
  EXPECT_EQ(format_rate(12345), "12.3k tok/s");
  ProgressState s{120, 1200, 3.21398f, 1.98e-3f, 2134.0, 62.0, 511.0};
  EXPECT_EQ(progress_line(s, false), "step  120/1200 loss 3.2140 | lr 1.98e-03 | 2134 tok/s | 1m02s | ETA 8m31s");
  const std::string bar = progress_line(s, true);
  EXPECT_NE(bar.find("[==>"), std::string::npos) << bar;
  std::printf("%s\n", bar.c_str());
}

TEST(TrainMath, BitsPerByteAndBatchSeed) {
  // 1000 tokens of ln(2) nats each over 1000 bytes: one bit per byte.
  EXPECT_DOUBLE_EQ(bits_per_byte(1000 * std::log(2.0), 1000), 1.0);
  EXPECT_DOUBLE_EQ(bits_per_byte(2.0 * 3 * std::log(2.0), 3), 2.0);
  EXPECT_THROW(bits_per_byte(1.0, 0), std::invalid_argument);
  EXPECT_NE(batch_seed(1), batch_seed(2));
  EXPECT_NE(batch_seed(1), 1u);
  EXPECT_EQ(batch_seed(1), batch_seed(1));
}

// The linear mode's flags (docs/UNITS.md): the values, the options that need
// --linear units, bitnet refused, the JSON round trip, and a run config of
// before the units (no such fields) read as the float mode.
TEST(TrainConfig, LinearModeFlags) {
  TrainConfig c;
  c.linear = "int4";
  EXPECT_EQ(message_of([&] { c.validate(); }), "--linear must be float or units, got 'int4'");
  c.linear = "float";
  c.unit_backward = true;
  EXPECT_EQ(message_of([&] { c.validate(); }), "--unit-backward requires --linear units (got --linear float)");
  c.unit_backward = false;
  c.units_head = true;
  EXPECT_EQ(message_of([&] { c.validate(); }), "--units-head requires --linear units (got --linear float)");
  c.linear = "units";
  c.unit_backward = true;
  EXPECT_NO_THROW(c.validate());
  const auto mc = c.model_config(300, 0);
  EXPECT_EQ(mc.linear, lockstep::model::LinearMode::Units);
  EXPECT_TRUE(mc.unit_backward && mc.units_head);
  const TrainConfig r = TrainConfig::from_json(c.to_json());
  EXPECT_EQ(r.linear, "units");
  EXPECT_TRUE(r.unit_backward && r.units_head);
  c.model = "bitnet-micro";
  EXPECT_NE(message_of([&] { c.model_config(300, 0); }).find("--linear units: --model bitnet-micro is a bitnet model"),
            std::string::npos);
  std::string old = TrainConfig{}.to_json();
  for (const char* key : {"linear", "unit_backward", "units_head"}) {
    const auto at = old.find(std::string("\"") + key + "\"");
    ASSERT_NE(at, std::string::npos);
    old.erase(at, old.find('\n', at) - at + 1);
  }
  EXPECT_EQ(TrainConfig::from_json(old).linear, "float");
  EXPECT_EQ(TrainConfig{}.model_config(300, 0).linear, lockstep::model::LinearMode::Float);
}

// --audit-budget: in (0, 100] percent, kept in run.json; a run.json written
// before the budget existed audited every launch, so it reads back as 100.
TEST(TrainConfig, AuditBudget) {
  TrainConfig c;
  EXPECT_EQ(c.audit_budget, 5);
  for (const double bad : {0.0, -1.0, 100.5}) {
    c.audit_budget = bad;
    EXPECT_NE(message_of([&] { c.validate(); }).find("--audit-budget must be in (0, 100] percent"), std::string::npos)
        << bad;
  }
  c.audit_budget = 12.5;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(TrainConfig::from_json(c.to_json()).audit_budget, 12.5);
  std::string old = TrainConfig{}.to_json();
  const auto at = old.find("\"audit_budget\"");
  ASSERT_NE(at, std::string::npos);
  old.erase(at, old.find('\n', at) - at + 1);
  EXPECT_EQ(TrainConfig::from_json(old).audit_budget, 100);
}
