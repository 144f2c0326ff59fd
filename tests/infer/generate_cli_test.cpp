// `lockstep generate`'s flags as a user sees them: float defaults printed as
// written, bad sampling values refused with the flag's name and exit 2.
#include <gtest/gtest.h>

#include <string>

#include "../common/run_command.hpp"

namespace {

std::string cli(const std::string& args, int* status) {
  return lockstep::test::run_command(std::string(LOCKSTEP_CLI_PATH) + " " + args, status);
}

TEST(GenerateCli, HelpPrintsFloatDefaultsAsWritten) {
  int st = -1;
  const std::string h = cli("generate --help", &st);
  EXPECT_EQ(st, 0);
  EXPECT_NE(h.find("--temperature NUM=0.8 "), std::string::npos) << h;
  EXPECT_NE(h.find("--top-p NUM=0.95 "), std::string::npos) << h;
  EXPECT_NE(h.find("--repetition-penalty NUM=1 "), std::string::npos) << h;
  EXPECT_EQ(h.find("0.800000011920929"), std::string::npos) << h;
  EXPECT_EQ(h.find("0.949999988079071"), std::string::npos) << h;
}

TEST(GenerateCli, BadSamplingFlagsAreRefusedByName) {
  for (const char* bad : {"--repetition-penalty 0", "--repeat-last-n -2", "--context -1", "--top-p 2",
                          "--stop-id -5", "--device tpu"}) {
    int st = -1;
    const std::string out = cli(std::string("generate --checkpoint /nonexistent ") + bad, &st);
    EXPECT_EQ(st, 2) << bad << ": " << out;
    const std::string flag = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(out.find(flag), std::string::npos) << bad << ": " << out;
  }
}

}  // namespace
