// The CPU's BitLinear product on 2-bit weight codes (issue 15: decoding reads
// every weight once a pass, so the bytes a weight decide the speed).
//
//   y[n, m] = ops::BitLinear::epilogue(acc[n, m], step[n], scale)
//           = (f32(acc[n, m]) * step[n]) * scale,
//   acc[n, m] = Σ_k xq[n, k] · code[m, k]   (exact int32: |acc| <= 127·131071)
//
// bit for bit ops::BitLinear::forward given the same codes (the spec's
// quantize_rows and quantize_ternary). The weights are packed once in the code
// word of ternary_word.hpp (the CUDA ternary_gemv's layout: code + 1 in 2 bits,
// 16 codes a 32-bit word, ternary_units(K) 16-byte units a row), 1/16 of the
// f32 codes' bytes. Every sum is an int32 sum of exact terms, so any order
// gives the same acc, and any implementation below gives the same bits:
//   * scalar: ternary_word_dot per word (the header's portable dp4a), the
//     row's Σx taken off (the fields carry +1);
//   * vnni (AVX-512 VNNI, chosen at run time from cpuid): vpdpbusd is u8 × s8,
//     which the fields (0, 1, 2) are as they stand — one shift and one mask
//     turn 64 bytes of words into 64 unsigned fields, multiplied against the
//     activation codes permuted once a call to the fields' order; the same Σx
//     correction. |Σ field·x| <= 254·131071 < 2^31: no lane can wrap.
//   * avx2 (machines without AVX-512 VNNI, from cpuid): the same fields and
//     codes half a chunk a ymm, vpmaddubsw (u8 × s8 pair sums, <= 508: no
//     int16 saturation) then vpmaddwd into int32 lanes; the same correction.
//   * amx (AMX-INT8, from cpuid and the kernel's tile permission): tdpbssd
//     on blocks of 16 weight rows × 16 activation rows × 64 codes; the A tile
//     is the same shift-and-mask of the words (fields 0..2 are valid signed
//     bytes), the B tile the activation codes in the fields' order, 16 rows
//     side by side; the same Σx correction. It pays where there are rows to
//     share a tile (prefill, batched decode): chosen_path(rows) takes it from
//     kAmxMinRows activation rows on. amx_emulated runs the same packing,
//     blocking and stores with the tile instructions in C++ (Intel's
//     pseudo-code), so the kernel's logic is tested on machines without AMX.
// Threads split the output rows m; a cell is computed whole by one thread, so
// the bits depend neither on the thread count nor on the other rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::cpu {

// A BitLinear weight [M, K] as 2-bit codes, in groups of kGroupRows rows
// interleaved chunk by chunk, so that a pass reads each thread's rows as one
// sequential stream (8 rows side by side were 8 short streams, too many and
// too short for the hardware prefetchers: docs/perf/DECODE_CPU.md):
//   a row is `chunks` chunks of 16 words (256 codes; the words past
//   4·units hold code 0), the rows padded to whole groups with code-0 rows;
//   word g of row m at word_index(m, g): group m / 8, then chunk g / 16, then
//   row m % 8, then g % 16 — a group is [chunks][8 rows][16 words].
struct TernaryMatrix {
  static constexpr std::size_t kGroupRows = 8, kChunkWords = 16;
  std::size_t rows = 0, cols = 0, units = 0;  // M, K, ternary_units(K)
  std::size_t chunks = 0;                     // ceil(4·units / 16): 256-code chunks a row
  std::vector<std::uint32_t> words;           // [ceil(M / 8)][chunks][8][16]
  float scale = 0.0f;                         // the weights' absmean (ops::quantize_ternary)
  std::size_t bytes() const { return words.size() * sizeof(std::uint32_t); }
  std::size_t groups() const { return (rows + kGroupRows - 1) / kGroupRows; }
  std::size_t group_words() const { return chunks * kGroupRows * kChunkWords; }
  std::size_t word_index(std::size_t m, std::size_t g) const {
    return (m / kGroupRows) * group_words() + (g / kChunkWords) * kGroupRows * kChunkWords +
           (m % kGroupRows) * kChunkWords + g % kChunkWords;
  }
};

// codes [M, K] in {-1, 0, 1} (ops::quantize_ternary's q) to the words; throws
// std::invalid_argument naming the code and its place when one is not ternary.
TernaryMatrix pack_ternary(const std::int8_t* codes, std::size_t M, std::size_t K, float scale, int threads);

namespace ternary {

enum class Path { scalar, vnni, avx2, amx, amx_emulated };
const char* path_name(Path p);
// Whether this machine runs the VNNI path (avx512f + avx512bw + avx512_vnni
// and the OS saves the zmm state: cpuid, not the compile flags), and whether
// it was compiled in.
bool vnni_available();
// Whether this machine runs the AVX2 path (cpuid and the OS's ymm state), for
// machines without AVX-512 VNNI.
bool avx2_available();
// Whether this machine runs the AMX path (amx_tile + amx_int8, the OS saves
// the tile state and granted this process the tile permission), and whether
// it was compiled in; amx_emulated_available: compiled in (x86-64, any CPU).
bool amx_available();
bool amx_emulated_available();
// From this many activation rows on, ternary_gemm takes the AMX path where
// available (measured on a 2-core Xeon: docs/perf/DECODE_CPU.md §6).
inline constexpr std::size_t kAmxMinRows = 4;
// The path ternary_gemm takes here for `rows` activation rows: amx where
// available and rows >= kAmxMinRows, else vnni where available, else avx2
// where available, else scalar.
Path chosen_path(std::size_t rows);
// Whether `path` can run here.
bool path_available(Path p);

// y [N, M] from xq [N, K] int8 codes (|code| <= 127), their steps [N] and the
// packed weights, through `path` (which must be available) on `threads`
// threads. Throws std::invalid_argument for K > ops::kMaxQuantK or an
// unavailable path.
void gemm(Path path, const TernaryMatrix& w, const std::int8_t* xq, std::size_t N, const float* step, float* y,
          int threads);

// Known bugs for the tests to see fail (tests/cpu/ternary_gemm_test.cpp); never set otherwise.
// The VNNI path's software prefetch distance ahead on a thread's stream of
// words (0: none), for the benchmark's sweep; the bits do not depend on it.
inline constexpr std::size_t kDefaultPrefetchBytes = 8192;
void set_prefetch_bytes(std::size_t bytes);

enum class Mutant {
  none,
  vnni_tail_chunk_dropped,
  avx2_tail_chunk_dropped,
  scalar_no_offset_correction,
  amx_upper_group_dropped
};
void set_mutant(Mutant m);

}  // namespace ternary

// ternary::gemm through ternary::chosen_path(N).
void ternary_gemm(const TernaryMatrix& w, const std::int8_t* xq, std::size_t N, const float* step, float* y,
                  int threads);

}  // namespace lockstep::cpu
