// The deterministic parallel-for (src/lockstep/util/parallel.*).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "lockstep/util/parallel.hpp"

namespace {

namespace util = lockstep::util;

TEST(Parallel, PartitionCoversExactlyOnce) {
  std::size_t checked = 0;
  for (std::size_t n : {0u, 1u, 2u, 7u, 64u, 1000u, 4097u}) {
    for (int threads : {1, 2, 3, 7, 64}) {
      for (std::size_t grain : {1u, 3u, 100u}) {
        std::vector<std::atomic<int>> hit(n);
        std::atomic<std::size_t> pieces{0};
        util::parallel_for(n, threads, grain, [&](std::size_t lo, std::size_t hi) {
          ASSERT_LT(lo, hi);
          ++pieces;
          for (std::size_t i = lo; i < hi; ++i) ++hit[i];
        });
        const util::Partition part = util::partition(n, threads, grain);
        EXPECT_EQ(pieces.load(), part.pieces);
        EXPECT_LE(part.pieces, static_cast<std::size_t>(threads));
        if (n > 0) {
          EXPECT_LE(part.pieces, (n + grain - 1) / grain);
        }
        for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(hit[i].load(), 1) << "n=" << n << " i=" << i;
        // Pieces are contiguous, in order, near-equal.
        for (std::size_t p = 0; p < part.pieces; ++p) {
          EXPECT_EQ(part.end(p), part.begin(p + 1));
          const std::size_t len = part.end(p) - part.begin(p);
          EXPECT_TRUE(len == n / part.pieces || len == n / part.pieces + 1);
        }
        if (part.pieces) {
          EXPECT_EQ(part.end(part.pieces - 1), n);
        }
        ++checked;
      }
    }
  }
  std::printf("partitions checked: %zu\n", checked);
}

TEST(Parallel, RunsOnSeveralThreads) {
  // 4 pieces that each wait for all 4 to have started: only passes if they
  // really run concurrently (a serial fallback would time out the wait).
  std::atomic<int> started{0};
  std::atomic<bool> all{true};
  util::parallel_for(4, 4, 1, [&](std::size_t, std::size_t) {
    ++started;
    for (long spin = 0; started.load() < 4; ++spin)
      if (spin > 2'000'000'000L) {
        all = false;
        return;
      }
  });
  EXPECT_TRUE(all.load());
}

TEST(Parallel, NestedCallsRunSerially) {
  std::vector<int> out(64, 0);
  util::parallel_for(8, 4, 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r = lo; r < hi; ++r)
      util::parallel_for(8, 4, 1, [&](std::size_t a, std::size_t b) {
        for (std::size_t c = a; c < b; ++c) out[r * 8 + c] += static_cast<int>(r * 8 + c);
      });
  });
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<int>(i));
}

TEST(Parallel, RethrowsTheLowestPiecesException) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    try {
      util::parallel_for(8, 8, 1, [&](std::size_t lo, std::size_t) {
        if (lo == 3 || lo == 6) throw std::runtime_error("piece " + std::to_string(lo));
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "piece 3");
    }
  }
}

TEST(Parallel, ResolveThreads) {
  EXPECT_GE(util::hardware_threads(), 1);
  EXPECT_EQ(util::resolve_threads(0), util::hardware_threads());
  EXPECT_EQ(util::resolve_threads(-3), util::hardware_threads());
  EXPECT_EQ(util::resolve_threads(5), 5);
}

}  // namespace
