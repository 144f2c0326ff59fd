// Regression tests for bugs this project found and fixed that had no test of
// their own; scripts/mutation_catalogue.py re-plants each bug ("history"
// entries) and scores it against the instruments like the catalogue's mutants.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/data/rdata.hpp"

namespace {

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

// An .rdb blob whose length word claims 1 GiB with a few bytes of data behind
// it: refused by the claim check before anything is allocated (the bug: the
// reader allocated what the header claimed, then failed in zlib).
TEST(History, AnRdbBlobClaimingAGigabyteIsRefusedWithoutAllocatingIt) {
  std::vector<std::uint8_t> rdb = {0x40, 0x00, 0x00, 0x00};  // big-endian 2^30
  for (int i = 0; i < 12; ++i) rdb.push_back(static_cast<std::uint8_t>(0x78 + i));
  const long before = max_rss_kib();
  std::string what;
  try {
    lockstep::data::parse_rdb(rdb, "claim.rdb");
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  const long grew = max_rss_kib() - before;
  EXPECT_NE(what.find("claims 1073741824 bytes"), std::string::npos) << what;
  EXPECT_LT(grew, 128L * 1024) << "the reader's peak memory grew by " << grew << " KiB";
}
