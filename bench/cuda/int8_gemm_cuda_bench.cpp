// int8_gemm_cuda_bench: the int8 GEMMs of backend/cuda/int8_gemm.hpp (C = A·Bᵀ,
// int8 codes, int32 out) — DP4A, IMMA 128x128 and 128x256 — against
// cuBLASLt's int8 matmul in the same run, at 8192³ and at the GPT-2 124M
// training products (16384 tokens = B 16 × T 1024: the forward's four, the
// input gradients' four and the weight gradients' four, each written as the NT
// product it is once its operands are laid out k-contiguous), plus cuBLAS's
// bf16 GEMM at 8192³ as the bf16 ceiling. Each time is the best of `reps`
// calls after a warm-up (CUDA events); every implementation's C is compared
// with dp4a's cell for cell ("exact"). Then the start-up selection's line
// (the gates and the race of int8_gemm.hpp).
//
//   int8_gemm_cuda_bench [reps=10]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"

namespace {

namespace lc = lockstep::cuda;
namespace ll = lockstep::cuda::launch;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cublas status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

struct Shape {
  const char* what;
  std::size_t N, M, K;
};

// Random int8 codes in [-127, 127] (the units' range), tiled from one host block.
void fill_codes(lc::DeviceBuffer<std::int8_t>& b, std::uint64_t seed) {
  constexpr std::size_t kBlock = std::size_t{1} << 24;
  std::vector<std::int8_t> block(std::min(kBlock, b.size()));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-127, 127);
  for (auto& v : block) v = static_cast<std::int8_t>(d(rng));
  for (std::size_t at = 0; at < b.size(); at += block.size())
    lc::copy_to_device(b.data() + at, block.data(), std::min(block.size(), b.size() - at));
}

double bf16_tops(int reps) {
  const int n = 8192;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  check(cudaMalloc(&a, std::size_t{2} * n * n), "cudaMalloc");
  check(cudaMalloc(&b, std::size_t{2} * n * n), "cudaMalloc");
  check(cudaMalloc(&c, std::size_t{2} * n * n), "cudaMalloc");
  // bf16 0x3C00..: small values, nonzero.
  check(cudaMemset(a, 0x3C, std::size_t{2} * n * n), "memset");
  check(cudaMemset(b, 0x3B, std::size_t{2} * n * n), "memset");
  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  const float one = 1.0f, zero = 0.0f;
  const auto call = [&] {
    check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, c,
                       CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx bf16");
  };
  call();
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(e0), "record");
    call();
    check(cudaEventRecord(e1), "record");
    check(cudaEventSynchronize(e1), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    best = std::min(best, static_cast<double>(ms));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 2.0 * n * static_cast<double>(n) * n / (best * 1e-3) * 1e-12;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const std::size_t T = 16384, C = 768, F = 3072, Q = 2304;
  const std::vector<Shape> shapes = {
      {"8192^3", 8192, 8192, 8192},
      {"fwd qkv  x.Wt", T, Q, C},
      {"fwd attn proj", T, C, C},
      {"fwd fc", T, F, C},
      {"fwd mlp proj", T, C, F},
      {"dX qkv  dY.W", T, C, Q},
      {"dX attn proj", T, C, C},
      {"dX fc", T, C, F},
      {"dX mlp proj", T, F, C},
      {"dW qkv  dYt.X", Q, C, T},
      {"dW attn proj", C, C, T},
      {"dW fc", F, C, T},
      {"dW mlp proj", C, F, T},
  };
  std::size_t maxA = 0, maxB = 0, maxC = 0;
  for (const Shape& s : shapes) {
    maxA = std::max(maxA, s.N * s.K);
    maxB = std::max(maxB, s.M * s.K);
    maxC = std::max(maxC, s.N * s.M);
  }
  lc::DeviceBuffer<std::int8_t> a(maxA), b(maxB);
  lc::DeviceBuffer<std::int32_t> ref(maxC), out(maxC);
  fill_codes(a, 1);
  fill_codes(b, 2);

  const lc::Int8Impl impls[] = {lc::Int8Impl::dp4a, lc::Int8Impl::imma_128x128, lc::Int8Impl::imma_128x256,
                                lc::Int8Impl::cublaslt};
  std::printf("int8 GEMM, C[N,M] = A[N,K]·B[M,K]ᵀ, int32 out; TOPS = 2NMK / best of %d calls\n", reps);
  const lc::Int8Selection& sel = lc::int8_selection();  // the gates and the race, before the table
  std::printf("%-15s %6s %6s %6s | %7s %9s %9s %9s | %7s %-14s %s\n", "product", "N", "M", "K", "dp4a", "imma128",
              "imma256", "cublasLt", "own/Lt", "race picks", "exact");
  double own_ops = 0, own_ms = 0, lt_ms = 0;
  for (const Shape& s : shapes) {
    double tops[4] = {-1, -1, -1, -1}, ms[4] = {-1, -1, -1, -1};
    std::string exact = "yes";
    lc::int8_gemm_nt_with(lc::Int8Impl::dp4a, a.data(), b.data(), ref.data(), s.N, s.M, s.K);
    for (int i = 0; i < 4; ++i) {
      ms[i] = ll::int8_time_ms(i, a.data(), b.data(), out.data(), s.N, s.M, s.K, reps);
      if (ms[i] <= 0) continue;
      tops[i] = 2.0 * static_cast<double>(s.N) * static_cast<double>(s.M) * static_cast<double>(s.K) /
                (ms[i] * 1e-3) * 1e-12;
      if (i > 0) {
        lc::fill_words(out.data(), 0x7FC0DEADu, s.N * s.M);
        if (!lc::int8_gemm_nt_with(impls[i], a.data(), b.data(), out.data(), s.N, s.M, s.K).empty()) continue;
        const std::size_t at = ll::int32_first_difference(ref.data(), out.data(), s.N * s.M);
        if (at != s.N * s.M) exact = std::string("NO: ") + std::string(lc::int8_impl_name(impls[i])) + " cell " +
                                     std::to_string(at);
      }
    }
    const double own = std::max({tops[0], tops[1], tops[2]});
    const double own_best_ms = own > 0 ? 2.0 * static_cast<double>(s.N) * s.M * s.K / (own * 1e12) * 1e3 : 0;
    if (s.N != 8192 || s.K != 8192) {
      own_ops += 2.0 * static_cast<double>(s.N) * s.M * s.K;
      own_ms += own_best_ms;
      lt_ms += ms[3] > 0 ? ms[3] : own_best_ms;
    }
    const int cl = static_cast<int>(lc::int8_class_of(a.data(), b.data(), s.N, s.M, s.K));
    std::printf("%-15s %6zu %6zu %6zu | %7.0f %9.0f %9.0f %9.0f | %6.0f%% %-14s %s\n", s.what, s.N, s.M, s.K, tops[0],
                tops[1], tops[2], tops[3], tops[3] > 0 ? 100.0 * own / tops[3] : 0.0,
                std::string(lc::int8_impl_name(sel.choice[cl])).c_str(), exact.c_str());
  }
  std::printf("GPT-2 124M step's 12 int8 products: best own kernel each %.3f ms (%.0f TOPS), cuBLASLt %.3f ms "
              "(%.0f TOPS): own/Lt %.0f%%\n",
              own_ms, own_ops / (own_ms * 1e-3) * 1e-12, lt_ms, own_ops / (lt_ms * 1e-3) * 1e-12,
              100.0 * lt_ms / own_ms);
  std::printf("cuBLAS bf16 GEMM 8192^3 (fp32 accumulate): %.0f TFLOP/s\n", bf16_tops(reps));
  std::printf("%s\n", sel.report.c_str());
  return 0;
}
