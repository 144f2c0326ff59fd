// lockstep inspect and lockstep convert, run as a user runs them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../common/run_command.hpp"
#include "lockstep/io/gguf.hpp"
#include "lockstep/load/model_file.hpp"

namespace fs = std::filesystem;
using lockstep::test::run_command;

namespace {

const std::string kCli = LOCKSTEP_CLI_PATH;

fs::path dir() {
  const fs::path d = fs::temp_directory_path() / ("lockstep_cli_model_files_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

TEST(CliModelFiles, ConvertAndInspectRoundTrip) {
  const fs::path d = dir();
  int rc = 0;
  std::string out = run_command(kCli + " convert --synthetic bitnet-micro --type i2_s --out " + (d / "m.gguf").string(), &rc);
  ASSERT_EQ(rc, 0) << out;
  out = run_command(kCli + " inspect " + (d / "m.gguf").string(), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("general.architecture                         string \"bitnet-b1.58\""), std::string::npos) << out;
  EXPECT_NE(out.find("blk.1.ffn_down.weight                    I2_S   [64, 172]"), std::string::npos) << out;
  out = run_command(kCli + " convert " + (d / "m.gguf").string() + " --out " + (d / "hf").string(), &rc);
  ASSERT_EQ(rc, 0) << out;
  out = run_command(kCli + " inspect " + (d / "hf").string(), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("model.layers.0.mlp.down_proj.weight_scale                F32"), std::string::npos) << out;
  // GGUF -> HF packed -> GGUF: the same codes (the scale passes as 1/(1/s)).
  out = run_command(kCli + " convert " + (d / "hf").string() + " --type i2_s --out " + (d / "m2.gguf").string(), &rc);
  ASSERT_EQ(rc, 0) << out;
  const auto a = lockstep::load::load_model_file((d / "m.gguf").string(), {lockstep::load::TernaryAs::ternary2});
  const auto b = lockstep::load::load_model_file((d / "m2.gguf").string(), {lockstep::load::TernaryAs::ternary2});
  ASSERT_EQ(a.params.size(), b.params.size());
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    if (a.params[i].dtype != lockstep::tensor::DType::ternary2) continue;
    EXPECT_EQ(lockstep::tensor::codes_of(a.params[i].frozen_value), lockstep::tensor::codes_of(b.params[i].frozen_value));
    EXPECT_NEAR(a.params[i].frozen_value.scales()[0], b.params[i].frozen_value.scales()[0], 1e-8);
  }
  fs::remove_all(d);
}

// A key holding a NUL byte (and a truncated file): one line on stderr, the
// NUL printed as \x00, exit status 2.
TEST(CliModelFiles, InspectMalformedFileOneEscapedLine) {
  const fs::path d = dir();
  lockstep::io::GgufWriter w;
  w.set(std::string("bad\0key", 7), lockstep::io::GgufValue::string("x"));
  w.set("general.alignment2", lockstep::io::GgufValue::string("y"));
  auto bytes = w.serialize();
  bytes.resize(bytes.size() - 12);  // cut inside the second value
  std::ofstream((d / "bad.gguf").string(), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  int rc = 0;
  const std::string out = run_command("(" + kCli + " inspect " + (d / "bad.gguf").string() + " 2>&1 >/dev/null)", &rc);  // stderr alone
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
  EXPECT_NE(out.find("lockstep inspect: "), std::string::npos) << out;
  EXPECT_NE(out.find("unexpected end of file"), std::string::npos) << out;
  // The NUL-keyed file whole: inspect prints the key escaped.
  const auto whole = w.serialize();
  std::ofstream((d / "nul.gguf").string(), std::ios::binary).write(reinterpret_cast<const char*>(whole.data()), static_cast<std::streamsize>(whole.size()));
  const std::string ok = run_command(kCli + " inspect " + (d / "nul.gguf").string(), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(ok.find("bad\\x00key"), std::string::npos) << ok;
  const std::string missing = run_command(kCli + " inspect " + (d / "none.gguf").string(), &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
  fs::remove_all(d);
}

}  // namespace
