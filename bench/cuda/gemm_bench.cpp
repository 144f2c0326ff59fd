// gemm_bench: the canonical CUDA GEMM (launch::gemm_xwt / gemm_dyw /
// gemm_dytx) at the GPT-2 124M training shapes (N = 16384 rows), timed with
// CUDA events (median of several runs after a warm-up), beside cuBLAS SGEMM in
// pedantic mode (CUBLAS_PEDANTIC_MATH: no TF32, no reduced precision) on the
// same operands. Also counts the cells where cuBLAS's bits differ from ours
// (a sample of up to 16M cells per product).
//
//   gemm_bench [rows=16384] [reps=7]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/gemm_launch.hpp"

namespace {

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

struct Buf {
  float* p = nullptr;
  std::size_t n = 0;
  explicit Buf(std::size_t count) : n(count) { check(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc"); }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// Random values in [-1, 1) (never zeros: zeros hide bugs and run faster),
// tiled from one host block at a varying offset.
void fill_random(Buf& b, std::uint64_t seed) {
  static std::vector<float> block;
  constexpr std::size_t kBlock = std::size_t{1} << 22;
  if (block.empty()) {
    block.resize(kBlock + 4096);
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (float& x : block) x = d(rng);
  }
  for (std::size_t at = 0; at < b.n; at += kBlock) {
    const std::size_t len = std::min(kBlock, b.n - at);
    const std::size_t off = (seed * 977 + at / kBlock * 131) % 4096;
    check(cudaMemcpy(b.p + at, block.data() + off, len * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
}

template <class F>
double median_ms(int reps, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  f();  // warm-up
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(a), "record");
    f();
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms);
  }
  check(cudaGetLastError(), "launch");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::size_t differing_cells(const Buf& x, const Buf& y, std::size_t n) {
  n = std::min<std::size_t>(n, std::size_t{1} << 24);
  std::vector<std::uint32_t> hx(n), hy(n);
  check(cudaMemcpy(hx.data(), x.p, n * 4, cudaMemcpyDeviceToHost), "download");
  check(cudaMemcpy(hy.data(), y.p, n * 4, cudaMemcpyDeviceToHost), "download");
  std::size_t d = 0;
  for (std::size_t i = 0; i < n; ++i) d += hx[i] != hy[i];
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t N = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 16384;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  check(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "pedantic");
  const float one = 1.0f, zero = 0.0f;

  struct Shape {
    const char* name;
    std::size_t M, K;  // out, in
    int per_step;      // uses per training step (GPT-2 124M: 12 layers)
  };
  const Shape shapes[] = {{"attn.qkv", 2304, 768, 12},
                          {"attn.proj", 768, 768, 12},
                          {"mlp.fc", 3072, 768, 12},
                          {"mlp.proj", 768, 3072, 12},
                          {"lm_head", 50257, 768, 1}};
  std::printf("%-10s %-5s %6s %6s %6s | %9s %7s | %9s %7s | %6s | %s\n", "layer", "prod", "I", "J", "K", "ours ms",
              "TFLOP/s", "cuBLAS ms", "TFLOP/s", "ratio", "cells differing from ours (sampled) | ms with each tile forced (1: 64x64, 2: 128x128, 3: 144x128, 4: 112x128, "
              "5: 48x128, 6: 128x144, 7: 128x128 8x4 warps k tiles of 16)");
  std::printf("(ratio = cuBLAS time / our time: above 1, ours is faster)\n");
  double step_ours = 0, step_cublas = 0, step_flop = 0, step_v11 = 0, step_best = 0;
  // v1.1's rule (tiles 1 and 2 only), for the before/after comparison in one run.
  const auto v11_tile = [&](std::size_t I, std::size_t J) {
    const long sms = prop.multiProcessorCount;
    const long blocks = static_cast<long>((I + 127) / 128) * static_cast<long>((J + 127) / 128);
    const long rounds = (blocks + sms - 1) / sms;
    return 4 * blocks >= 3 * rounds * sms ? 2 : 1;
  };
  for (const Shape& s : shapes) {
    const std::size_t M = s.M, K = s.K;
    Buf x(N * K), w(M * K), dy(N * M);
    fill_random(x, 1);
    fill_random(w, 2);
    fill_random(dy, 3);
    const double flop = 2.0 * double(N) * double(M) * double(K);
    const int r = flop > 1e12 ? std::max(3, reps / 2) : reps;
    for (int layout = 0; layout < 3; ++layout) {
      const std::size_t cells = layout == 0 ? N * M : layout == 1 ? N * K : M * K;
      Buf c1(cells), c2(cells);
      double ours = 0, theirs = 0;
      const char* prod = "";
      std::size_t I = 0, J = 0, KK = 0;
      if (layout == 0) {  // Y[N,M] = X·Wᵀ; column-major: Yᵀ = W·Xᵀ
        prod = "xwt", I = N, J = M, KK = K;
        ours = median_ms(r, [&] { lockstep::cuda::launch::gemm_xwt(N, M, K, x.p, w.p, c1.p); });
        theirs = median_ms(r, [&] {
          check(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, int(M), int(N), int(K), &one, w.p, int(K), x.p, int(K), &zero,
                            c2.p, int(M)),
                "sgemm");
        });
      } else if (layout == 1) {  // dX[N,K] = dY·W; column-major: dXᵀ = Wᵀ·dYᵀ
        prod = "dyw", I = N, J = K, KK = M;
        ours = median_ms(r, [&] { lockstep::cuda::launch::gemm_dyw(N, M, K, dy.p, w.p, c1.p); });
        theirs = median_ms(r, [&] {
          check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(K), int(N), int(M), &one, w.p, int(K), dy.p, int(M), &zero,
                            c2.p, int(K)),
                "sgemm");
        });
      } else {  // dW[M,K] = dYᵀ·X; column-major: dWᵀ = Xᵀ·dY
        prod = "dytx", I = M, J = K, KK = N;
        ours = median_ms(r, [&] { lockstep::cuda::launch::gemm_dytx(N, M, K, dy.p, x.p, c1.p); });
        theirs = median_ms(r, [&] {
          check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, int(K), int(M), int(N), &one, x.p, int(K), dy.p, int(M), &zero,
                            c2.p, int(K)),
                "sgemm");
        });
      }
      check(cudaDeviceSynchronize(), "products");
      // The two block tiles forced (the launcher picks one by the grid size).
      constexpr int kTiles = lockstep::cuda::launch::kGemmTiles;
      double forced[kTiles] = {};
      for (int tile = 1; tile <= kTiles; ++tile) {
        lockstep::cuda::launch::gemm_tile_override(tile);
        forced[tile - 1] = median_ms(r, [&] {
          if (layout == 0) lockstep::cuda::launch::gemm_xwt(N, M, K, x.p, w.p, c1.p);
          else if (layout == 1) lockstep::cuda::launch::gemm_dyw(N, M, K, dy.p, w.p, c1.p);
          else lockstep::cuda::launch::gemm_dytx(N, M, K, dy.p, x.p, c1.p);
        });
        lockstep::cuda::launch::gemm_tile_override(0);
      }
      const std::size_t diff = differing_cells(c1, c2, cells);
      std::printf("%-10s %-5s %6zu %6zu %6zu | %9.3f %7.2f | %9.3f %7.2f | %6.3f | %zu of %zu |", s.name, prod, I, J, KK,
                  ours, flop / ours * 1e-9, theirs, flop / theirs * 1e-9, theirs / ours, diff,
                  std::min<std::size_t>(cells, std::size_t{1} << 24));
      double best = forced[0];
      for (int tile = 1; tile <= kTiles; ++tile) {
        std::printf(" %d:%.3f", tile, forced[tile - 1]);
        best = std::min(best, forced[tile - 1]);
      }
      const double v11 = forced[v11_tile(I, J) - 1];
      std::printf(" | v1.1 %.3f\n", v11);
      step_v11 += v11 * s.per_step;
      step_best += best * s.per_step;
      step_ours += ours * s.per_step;
      step_cublas += theirs * s.per_step;
      step_flop += flop * s.per_step;
    }
    // The bias gradient (column sums of dY) at this width.
    if (s.per_step > 1) {
      Buf db(M);
      const double ms = median_ms(reps, [&] { lockstep::cuda::launch::column_sums(dy.p, N, M, db.p); });
      std::printf("%-10s %-5s %6zu %6zu %6s | %9.3f %7s   (%.0f GB/s)\n", s.name, "db", N, M, "", ms, "",
                  double(N) * double(M) * 4 / ms * 1e-6);
    }
  }
  std::printf("GPT-2 124M step, all linear-layer products (12 layers + head, fwd + bwd): %.1f TFLOP; ours %.1f ms "
              "(%.2f TFLOP/s), cuBLAS pedantic %.1f ms (%.2f TFLOP/s), ratio %.3f\n",
              step_flop * 1e-12, step_ours, step_flop / step_ours * 1e-9, step_cublas,
              step_flop / step_cublas * 1e-9, step_cublas / step_ours);
  std::printf("same run: v1.1 rule (tiles 1/2) %.1f ms (%.2f TFLOP/s); best forced tile per product %.1f ms (%.2f TFLOP/s)\n",
              step_v11, step_flop / step_v11 * 1e-9, step_best, step_flop / step_best * 1e-9);
  cublasDestroy(h);
  return 0;
}
