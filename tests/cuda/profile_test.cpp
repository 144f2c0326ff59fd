// The step profile on the device (backend/cuda/profile.hpp): each interval is
// charged to the launch that opened it, every launch of a training step opens
// one, the intervals tile the profiled span, the model's LOCKSTEP_CUDA_PROFILE
// writes its step's profile, and the pool's peak memory is a high-water mark.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/profile.hpp"
#include "lockstep/backend/cuda/trace.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"

#include "../common/tokens.hpp"

namespace fs = std::filesystem;
using namespace lockstep;
namespace pf = cuda::profile;

namespace {

const pf::Row* find_kernel(const std::vector<pf::Row>& rows, const std::string& kernel) {
  for (const auto& r : rows)
    if (r.kernel == kernel) return &r;
  return nullptr;
}

}  // namespace

// A long copy followed by a one-word fill: the copy's interval holds nearly
// the whole span, the fill's almost nothing (an interval charged to the next
// launch instead would swap them).
TEST(StepProfileDevice, AnIntervalIsChargedToTheLaunchThatOpenedIt) {
  const std::size_t n = std::size_t{1} << 28;  // 1 GiB of floats each way
  cuda::DeviceBuffer<float> a(n), b(n), one(1);
  cuda::copy_on_device(b.data(), a.data(), n * sizeof(float));  // warm
  pf::begin();
  cuda::copy_on_device(b.data(), a.data(), n * sizeof(float));
  for (int i = 0; i < 4; ++i) cuda::fill_words(one.data(), 0, 1);
  const pf::Result r = pf::end();
  const auto k = pf::by_kernel(r);
  const pf::Row* copy = find_kernel(k, "copy on device");
  const pf::Row* fill = find_kernel(k, "fill_words");
  ASSERT_TRUE(copy && fill);
  std::printf("copy of 1 GiB: %.3f ms; 4 one-word fills: %.4f ms; span %.3f ms in %ld intervals\n", copy->ms,
              fill->ms, r.device_ms, r.intervals);
  EXPECT_EQ(copy->calls, 1);
  EXPECT_EQ(fill->calls, 4);
  EXPECT_GT(copy->ms, 0.2);  // 2 GiB of traffic: at least ~0.5 ms on an H200
  EXPECT_GT(copy->ms, 0.8 * r.device_ms);
  EXPECT_LT(fill->ms, 0.1 * copy->ms);
  EXPECT_EQ(r.intervals, 1 + 1 + 4);  // the opening interval, the copy, the fills
  double sum = 0;
  for (const auto& row : r.rows) sum += row.ms;
  EXPECT_NEAR(sum, r.device_ms, 1e-3 * r.device_ms + 1e-3);
}

// Every launch of a GPT-2 step (as the launch trace counts them) opens one
// interval of the kernel's name; the linear products carry their op scope.
TEST(StepProfileDevice, EveryLaunchOfAStepIsTimedUnderItsOp) {
  model::ModelConfig cfg = model::preset("gpt2-micro");
  auto gpu = model::make_cuda_model(cfg, "off");
  gpu->init(1);
  const std::int64_t B = 4, T = 32;
  const auto in = test::tokens(B * T, cfg.vocab_size, 7), tg = test::tokens(B * T, cfg.vocab_size, 8);
  const train::AdamWConfig adamw;
  auto step = [&](std::int64_t t) {
    train::run_step(*gpu->step_stages(), {in, tg, B, T, 1}, 1.0f, train::adamw_scalars(adamw, 1e-3f, t), {}, 0);
  };
  step(1);
  cuda::trace::process_log().reset_launches();
  pf::begin();
  step(2);
  const pf::Result r = pf::end();
  const auto launches = cuda::trace::process_log().launches();
  const auto k = pf::by_kernel(r);
  long traced = 0;
  for (const auto& [name, count] : launches) {
    const pf::Row* row = find_kernel(k, name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(row->calls, count) << name;
    traced += count;
  }
  EXPECT_GT(traced, 50);
  bool linear_scoped = false, optimizer_glue = false;
  for (const auto& row : r.rows) {
    linear_scoped |= row.scope.starts_with("linear fwd ") && row.kernel.starts_with("gemm");
    optimizer_glue |= row.scope.empty() && row.kernel == "adamw_all";
  }
  EXPECT_TRUE(linear_scoped);
  EXPECT_TRUE(optimizer_glue);
  std::printf("%s", pf::table(r, 1, 0.0, 10).c_str());
}

TEST(StepProfileDevice, TheModelProfilesTheStepItIsAskedFor) {
  const fs::path out = fs::temp_directory_path() / ("lockstep_profile_" + std::to_string(::getpid()) + ".json");
  fs::remove(out);
  ::setenv("LOCKSTEP_CUDA_PROFILE", (out.string() + ":2").c_str(), 1);
  model::ModelConfig cfg = model::preset("gpt2-micro");
  auto gpu = model::make_cuda_model(cfg, "off");
  ::unsetenv("LOCKSTEP_CUDA_PROFILE");
  gpu->init(1);
  const std::int64_t B = 2, T = 16;
  const auto in = test::tokens(B * T, cfg.vocab_size, 3), tg = test::tokens(B * T, cfg.vocab_size, 4);
  const train::AdamWConfig adamw;
  for (std::int64_t t = 1; t <= 3; ++t) {
    train::run_step(*gpu->step_stages(), {in, tg, B, T, 1}, 1.0f, train::adamw_scalars(adamw, 1e-3f, t), {}, 0);
    EXPECT_EQ(fs::exists(out), t >= 2) << "after step " << t;
    EXPECT_FALSE(pf::active());
  }
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j.at("step"), 2);
  EXPECT_GT(j.at("unprofiled_ms_per_step").get<double>(), 0.0);
  EXPECT_GT(j.at("rows").size(), 10u);
  fs::remove(out);

  ::setenv("LOCKSTEP_CUDA_PROFILE", "x.json:0", 1);
  EXPECT_THROW(model::make_cuda_model(cfg, "off"), std::invalid_argument);
  ::unsetenv("LOCKSTEP_CUDA_PROFILE");
}

TEST(DevicePool, ThePeakIsAHighWaterMark) {
  cuda::reset_peak_bytes_in_use();
  const std::size_t base = cuda::bytes_in_use();
  EXPECT_EQ(cuda::peak_bytes_in_use(), base);
  {
    cuda::DeviceBuffer<float> big(std::size_t{64} << 20);  // 256 MiB
    EXPECT_GE(cuda::peak_bytes_in_use(), base + (std::size_t{256} << 20));
  }
  EXPECT_EQ(cuda::bytes_in_use(), base);
  EXPECT_GE(cuda::peak_bytes_in_use(), base + (std::size_t{256} << 20));
  EXPECT_GE(cuda::bytes_reserved(), cuda::peak_bytes_in_use());
  EXPECT_GE(cuda::device_bytes_used(), cuda::bytes_reserved());
  cuda::reset_peak_bytes_in_use();
  EXPECT_EQ(cuda::peak_bytes_in_use(), base);
}
