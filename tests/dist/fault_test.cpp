// The test-fault spec (dist/fault.hpp) and the launcher detection (dist/comm.hpp):
// plain functions of text and the environment, no MPI.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/dist/comm.hpp"
#include "lockstep/dist/fault.hpp"

using lockstep::dist::Fault;
using lockstep::dist::parse_fault;

TEST(DistFault, ParsesEachKind) {
  EXPECT_EQ(parse_fault("").kind, Fault::Kind::none);
  const Fault b = parse_fault("bitflip:rank=1:step=3:tensor=2:index=7:bit=30");
  EXPECT_EQ(b.kind, Fault::Kind::bitflip);
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.step, 3);
  EXPECT_EQ(b.tensor, 2);
  EXPECT_EQ(b.index, 7);
  EXPECT_EQ(b.bit, 30);
  EXPECT_TRUE(b.hits(1, 3));
  EXPECT_FALSE(b.hits(0, 3));
  EXPECT_FALSE(b.hits(1, 2));
  const Fault s = parse_fault("stall:rank=2:step=4:seconds=1.5");
  EXPECT_EQ(s.kind, Fault::Kind::stall);
  EXPECT_DOUBLE_EQ(s.seconds, 1.5);
  EXPECT_EQ(parse_fault("drop:rank=1:step=2").kind, Fault::Kind::drop);
  EXPECT_EQ(parse_fault("update-bitflip:rank=1:step=2").kind, Fault::Kind::update_bitflip);
  EXPECT_EQ(parse_fault("kill:rank=0:step=9").kind, Fault::Kind::kill);
  EXPECT_EQ(parse_fault("version:rank=1").kind, Fault::Kind::version);
}

TEST(DistFault, RefusesMalformedSpecsNamingThePart) {
  const auto message = [](const std::string& text) {
    try {
      parse_fault(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("melt:rank=1:step=2").find("unknown fault 'melt'"), std::string::npos);
  EXPECT_NE(message("bitflip:step=3").find("rank=R is required"), std::string::npos);
  EXPECT_NE(message("stall:rank=1").find("step=S"), std::string::npos);
  EXPECT_NE(message("bitflip:rank=1:step=1").find("S >= 2"), std::string::npos);
  EXPECT_NE(message("bitflip:rank=1:step=3:bit=32").find("bit must be 0..31"), std::string::npos);
  EXPECT_NE(message("kill:rank=x:step=3").find("rank=x is not a number"), std::string::npos);
  EXPECT_NE(message("kill:rank=1:step=3:when=now").find("unknown key 'when'"), std::string::npos);
  EXPECT_NE(message("kill:rank=1:step").find("expected key=value"), std::string::npos);
}

TEST(DistLaunch, OnlyALauncherEnvironmentMakesAReplica) {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) unsetenv(v);
  EXPECT_FALSE(lockstep::dist::launch_from_env().under_launcher);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  auto l = lockstep::dist::launch_from_env();
  EXPECT_TRUE(l.under_launcher);
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.world, 3);
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  setenv("PMIX_RANK", "1", 1);
  setenv("PMI_SIZE", "2", 1);
  l = lockstep::dist::launch_from_env();
  EXPECT_TRUE(l.under_launcher);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.world, 2);
  unsetenv("PMIX_RANK");
  unsetenv("PMI_SIZE");
  EXPECT_FALSE(lockstep::dist::launch_from_env().under_launcher);
}
