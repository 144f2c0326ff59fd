// The CLI as a user meets it: exit codes and messages of the lockstep binary.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "lockstep/version.hpp"

namespace {

struct Result {
  int status;
  std::string out;
};

// Runs the lockstep binary with `args` (stderr merged into stdout).
Result run(const std::string& args) {
  const std::string cmd = std::string(LOCKSTEP_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
  const int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

}  // namespace

TEST(Cli, VersionPrintsNumericSpecVersion) {
  const Result r = run("version");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("NUMERIC_SPEC_VERSION " + std::to_string(lockstep::NUMERIC_SPEC_VERSION)),
            std::string::npos)
      << r.out;
}

TEST(Cli, HelpListsSubcommands) {
  const Result r = run("--help");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("verify"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("version"), std::string::npos) << r.out;
}

TEST(Cli, NoSubcommandIsAnError) {
  const Result r = run("");
  EXPECT_NE(r.status, 0) << r.out;
}

TEST(Cli, UnknownSuiteIsRejectedWithTheKnownNames) {
  const Result r = run("verify no-such-suite");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("unknown suite 'no-such-suite'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ieee"), std::string::npos) << r.out;
}

TEST(Cli, BadNumericFlagIsRejectedNamingTheFlag) {
  const Result r = run("verify --effort -1");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("--effort"), std::string::npos) << r.out;
  const Result r2 = run("verify --seed banana");
  EXPECT_NE(r2.status, 0) << r2.out;
  EXPECT_NE(r2.out.find("--seed"), std::string::npos) << r2.out;
}

TEST(Cli, VerifyListNamesEverySuite) {
  const Result r = run("verify --list");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("ieee"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reduce"), std::string::npos) << r.out;
}
