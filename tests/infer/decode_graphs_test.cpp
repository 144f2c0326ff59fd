// The decisions of the decode passes' CUDA graphs (model/decode.hpp,
// DecodeGraphs), on the CPU (label unit): a decode session over a kernel set
// that is the CPU's with the CUDA backend's decode hooks (rows on "the
// device": RoPE, cache writes and the cached attention at the pass's rows,
// first_row included) and a recording stand-in for the graph. Its "launch"
// runs nothing, so these tests check when a pass is launched, captured,
// replayed, warmed again or abandoned — and that the passes that run kernels
// (the warm, capture and recomputed ones) give the CPU model's bits — not what
// a replay computes (that is tests/infer/decode_graphs_gpu_test.cpp, on the device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "decode_util.hpp"
#include "lockstep/backend/cpu/decode.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/decode.hpp"
#include "lockstep/model/transformer.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer::testing;

// The CPU kernel set with the engine's device hooks (host pointers throughout).
struct FakeKernels : cpu::OpKernels {
  const ops::Index* stage_indices(const ops::Index* host, std::size_t, int slot);
  void copy_to_host(float* host, const float* dev, std::size_t n);
};

// What the stand-in backend saw, and what the test makes it see.
struct Fake {
  bool on = true;
  std::uint64_t epoch = 0;
  std::size_t waits = 0, allocs = 0;
  bool wait_while_capturing = false;  // rope makes the host "wait" during a capture
  bool capturing = false;
  bool key_ignores_rows = false;
  std::size_t rope_calls = 0;
  bool early = false;             // Backend::early_launch
  bool early_before_ids = false;  // the planted bug of early launch
  bool log_io = false;            // log the ids' staging and the logits' copy too
  std::size_t replays_noted = 0;  // Backend::note_replayed_pass calls
  std::vector<std::string> log;   // graph events
};
Fake g_fake;

const ops::Index* FakeKernels::stage_indices(const ops::Index* host, std::size_t, int slot) {
  if (g_fake.log_io && slot == 0) g_fake.log.push_back("stage ids");
  return host;
}
void FakeKernels::copy_to_host(float* host, const float* dev, std::size_t n) {
  if (g_fake.log_io) g_fake.log.push_back("copy logits");
  std::copy(dev, dev + n, host);
}

}  // namespace

namespace lockstep::model {

template <>
struct DecodeBackend<FakeKernels> {
  using Cpu = DecodeBackend<cpu::OpKernels>;
  static constexpr bool kRowsAt = true;
  struct State {
    Cpu::State cpu;
    std::vector<std::int32_t> slot, pos;
  };
  static void linear(FakeKernels& k, State& st, const ops::Linear::Config& c, const ops::Linear::FwdArgs<float>& a) {
    Cpu::linear(k, st.cpu, c, a);
  }
  static void linear(FakeKernels& k, State& st, const ops::QuantLinearConfig& c,
                     const ops::BitLinear::FwdArgs<float>& a) {
    Cpu::linear(k, st.cpu, c, a);
  }
  static void begin_pass(FakeKernels&, State& st, const std::vector<std::int32_t>& slot,
                         const std::vector<std::int32_t>& pos) {
    st.slot = slot;
    st.pos = pos;
  }
  static void rope(FakeKernels& k, State& st, const ops::Rope::Config& c, const ops::Rope::FwdArgs<float>& a,
                   std::size_t rows, std::size_t) {
    ++g_fake.rope_calls;
    if (g_fake.wait_while_capturing && g_fake.capturing) ++g_fake.waits;
    const std::size_t w = c.heads * c.head_dim;
    for (std::size_t r = 0; r < rows; ++r) {
      ops::Rope::Config one = c;
      one.batch = 1;
      one.seq = 1;
      one.offset = static_cast<std::size_t>(st.pos.at(r));
      k.run(one, ops::Rope::FwdArgs<float>{.x = a.x + r * w, .y = a.y + r * w});
    }
  }
  static void store_rows_at(FakeKernels&, State& st, const float* src, std::size_t ld, std::size_t rows,
                            std::size_t width, float* cache, std::size_t ctx) {
    for (std::size_t r = 0; r < rows; ++r)
      cpu::store_rows(src + r * ld, ld, 1, width,
                      cache + (static_cast<std::size_t>(st.slot.at(r)) * ctx + static_cast<std::size_t>(st.pos.at(r))) *
                                  width);
  }
  // As the CUDA backend: the run's rows must be the pass's rows first_row.. .
  static void attention(FakeKernels& k, State& st, const ops::CachedAttention::Config& c,
                        const ops::CachedAttention::Args<float>& a, std::size_t first_row) {
    for (std::size_t r = 0; r < c.rows; ++r)
      if (a.slot[r] != st.slot.at(first_row + r) || a.pos[r] != st.pos.at(first_row + r))
        throw std::logic_error("the cached attention's rows are not the pass's rows");
    cpu::cached_attention(c, a, k.threads);
  }

  struct Graph {
    bool held = false;
    void begin_capture() {
      g_fake.log.push_back("capture");
      g_fake.capturing = true;
    }
    void end_capture() {
      g_fake.log.push_back("end");
      g_fake.capturing = false;
      held = true;
    }
    void abandon_capture() {
      g_fake.log.push_back("abandon");
      g_fake.capturing = false;
      held = false;
    }
    void launch() { g_fake.log.push_back("launch"); }
    bool ready() const { return held; }
    void reset() { held = false; }
  };
  static bool graphs_on() { return g_fake.on; }
  static std::uint64_t memory_epoch() { return g_fake.epoch; }
  static std::size_t host_waits() { return g_fake.waits; }
  static std::size_t allocations() { return g_fake.allocs; }
  static bool mutant_key_ignores_rows() { return g_fake.key_ignores_rows; }
  static bool mutant_rows_not_restaged() { return false; }
  static bool mutant_no_epoch_check() { return false; }
  static bool mutant_early_before_ids() { return g_fake.early_before_ids; }
  static bool early_launch() { return g_fake.early; }
  static void note_replayed_pass(double walk_s, double tail_s) {
    if (walk_s < 0 || tail_s < 0) throw std::logic_error("a replayed pass's host times are not >= 0");
    ++g_fake.replays_noted;
  }
};

}  // namespace lockstep::model

namespace {

class DecodeGraphsLogic : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = Fake{};
    cfg_ = model::preset("bitnet-micro");
    cpu_ = model::make_cpu_model(cfg_);
    mt::randomize(cpu_->params(), 0x9a, 0.2);
    session_ = std::make_unique<Session>(cfg_, cpu_->params(), kernels_, 4, 0, [](int) {});
    ref_ = cpu_->decoder(4, 0);
    // Slots 0 and 1 hold a prompt (2 and 3 are empty: a pass there starts at position 0).
    g_fake.log.clear();
    for (std::size_t s = 0; s < 2; ++s) {
      const auto p = random_tokens(3 + s, cfg_.vocab_size, 50 + s);
      EXPECT_EQ(mt::differing_bits(session_->prefill(s, p, true, 1), ref_->prefill(s, p, true, 1)), 0u);
    }
    EXPECT_TRUE(g_fake.log.empty()) << "a prefill pass is never captured";
  }
  // One decode pass on both sessions; returns the graph events it logged and
  // checks the logits against the CPU model's when the pass ran its kernels.
  // (After a stand-in replay the session's cache lacks that pass's rows: from
  // then on its logits are not compared.)
  std::vector<std::string> pass(const std::vector<std::size_t>& slots, bool ran_kernels = true) {
    g_fake.log.clear();
    g_fake.rope_calls = 0;
    const auto toks = random_tokens(slots.size(), cfg_.vocab_size, ++seed_);
    const auto got = session_->decode(slots, toks, 1);
    const auto want = ref_->decode(slots, toks, 1);
    if (ran_kernels && !replayed_) {
      EXPECT_EQ(mt::differing_bits(got, want), 0u) << "a pass that ran its kernels";
    }
    if (!ran_kernels) replayed_ = true;
    return g_fake.log;
  }
  std::size_t layers() const { return static_cast<std::size_t>(cfg_.n_layer); }

  using Session = model::DecodeSession<FakeKernels, model::Param, void (*)(int)>;
  model::ModelConfig cfg_;
  std::unique_ptr<model::Model> cpu_;
  FakeKernels kernels_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<model::Decoder> ref_;
  std::uint64_t seed_ = 0;
  bool replayed_ = false;
};

using Log = std::vector<std::string>;

TEST_F(DecodeGraphsLogic, WarmThenCaptureThenReplay) {
  EXPECT_EQ(pass({0, 1}), Log{}) << "the first pass of a pattern runs launched";
  EXPECT_EQ(g_fake.rope_calls, 2 * layers());
  EXPECT_EQ(pass({0, 1}), (Log{"capture", "end", "launch"}));
  EXPECT_EQ(g_fake.rope_calls, 2 * layers()) << "a capture runs the pass's kernels into the graph";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(pass({0, 1}, false), Log{"launch"});
    EXPECT_EQ(g_fake.rope_calls, 0u) << "a replay launches no kernel";
  }
  // The same row count from other slots, in another order: the same graph.
  EXPECT_EQ(pass({1, 0}, false), Log{"launch"});
}

TEST_F(DecodeGraphsLogic, AFreedBufferMakesEveryGraphStale) {
  pass({0});
  pass({0});
  EXPECT_EQ(pass({0}, false), Log{"launch"});
  ++g_fake.epoch;  // a device block handed back: the graph may read a buffer that moved
  EXPECT_EQ(pass({0}), Log{}) << "warmed again";
  EXPECT_EQ(pass({0}), (Log{"capture", "end", "launch"}));
  EXPECT_EQ(pass({0}, false), Log{"launch"});
}

TEST_F(DecodeGraphsLogic, APassThatFreedABufferIsNotCapturedAfterIt) {
  pass({0});  // warm
  ++g_fake.epoch;
  EXPECT_EQ(pass({0}), Log{}) << "a block freed since the warm pass: warmed again, not captured";
  EXPECT_EQ(pass({0}), (Log{"capture", "end", "launch"}));
}

TEST_F(DecodeGraphsLogic, EachRowPatternHasItsGraph) {
  pass({0, 1});
  pass({0, 1});
  EXPECT_EQ(pass({0}), Log{}) << "a new pattern is warmed";
  EXPECT_EQ(pass({0}), (Log{"capture", "end", "launch"}));
  EXPECT_EQ(pass({0, 1}, false), Log{"launch"}) << "the two-row graph is still valid";
  // A row at position 0 (slot 2 is empty: the prefill attention over its own row) is another pattern.
  EXPECT_EQ(pass({2, 0}), Log{}) << "(its cached attention runs from row 1: first_row)";
}

TEST_F(DecodeGraphsLogic, AHostWaitInACaptureAbandonsItAndThePassIsRecomputed) {
  pass({0});
  g_fake.wait_while_capturing = true;
  EXPECT_EQ(pass({0}), (Log{"capture", "end", "abandon"})) << "its logits: the recomputed pass's";
  EXPECT_EQ(g_fake.rope_calls, 4 * layers()) << "captured, then launched again";
  g_fake.wait_while_capturing = false;
  EXPECT_EQ(pass({0}), Log{}) << "an abandoned pattern is not captured again";
  EXPECT_EQ(pass({0}), Log{});
}

TEST_F(DecodeGraphsLogic, OffMeansLaunched) {
  g_fake.on = false;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pass({0, 1}), Log{});
}

// A replayed pass's graph launched at the end of its walk (default), or, with
// early launch, right after its ids are staged; each replay's host times noted.
// The planted bug: the graph launched before the ids (the GPU test sees the
// logits change).
TEST_F(DecodeGraphsLogic, EarlyLaunchReplaysRightAfterTheIds) {
  g_fake.log_io = true;
  EXPECT_EQ(pass({0}), (Log{"stage ids", "copy logits"})) << "warm";
  EXPECT_EQ(pass({0}), (Log{"stage ids", "capture", "end", "launch", "copy logits"}));
  EXPECT_EQ(g_fake.replays_noted, 0u) << "a capture is not a replay";
  EXPECT_EQ(pass({0}, false), (Log{"stage ids", "launch", "copy logits"}));
  g_fake.early = true;
  EXPECT_EQ(pass({0}, false), (Log{"stage ids", "launch", "copy logits"}));
  EXPECT_EQ(g_fake.replays_noted, 2u);
  EXPECT_EQ(pass({0, 1}), (Log{"stage ids", "copy logits"})) << "early launch changes nothing but a replay";
  EXPECT_EQ(pass({0, 1}), (Log{"stage ids", "capture", "end", "launch", "copy logits"}));
  g_fake.early_before_ids = true;
  EXPECT_EQ(pass({0, 1}, false), (Log{"launch", "stage ids", "copy logits"})) << "planted: launched before the ids";
  EXPECT_EQ(g_fake.replays_noted, 3u);
  // Without early launch the same plant is harmless: the graph waits for the walk's end (so the
  // launch above was early's, at the pass's decision).
  g_fake.early = false;
  EXPECT_EQ(pass({0, 1}, false), (Log{"stage ids", "launch", "copy logits"}));
}

// The planted bug of the GPU test, here: the key without the rows replays the
// two-row graph for one row (the GPU test sees its logits change).
TEST_F(DecodeGraphsLogic, PlantedKeyWithoutRowsReplaysAcrossPatterns) {
  g_fake.key_ignores_rows = true;
  pass({0, 1});
  pass({0, 1});
  EXPECT_EQ(pass({0}, false), Log{"launch"});
}

}  // namespace
