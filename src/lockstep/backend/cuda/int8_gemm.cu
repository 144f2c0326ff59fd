// The int8 GEMM launchers (int8_gemm_launch.hpp): DP4A and IMMA kernels
// (int8_gemm_kernels.cuh, clean and mutated instantiations), cuBLASLt's int8
// product, the race's timer and a device-side comparison.
#include <cuda_runtime.h>
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/int8_gemm_kernels.cuh"
#include "lockstep/backend/cuda/int8_gemm_launch.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::launch {
namespace {

constexpr std::size_t kIntMax = 0x7FFFFFFF;

void check_dims(const char* who, std::size_t N, std::size_t M, std::size_t K) {
  if (N > kIntMax || M > kIntMax || K > kIntMax)
    throw std::invalid_argument(std::string(who) + ": N " + std::to_string(N) + " M " + std::to_string(M) + " K " +
                                std::to_string(K) + " beyond the kernels' 32-bit extents");
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

template <bool WORDS, int MUT>
void dp4a_with(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
               std::size_t K, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((M + int8k::kDp4aTile - 1) / int8k::kDp4aTile),
                  static_cast<unsigned>((N + int8k::kDp4aTile - 1) / int8k::kDp4aTile));
  int8k::dp4a_kernel<WORDS, MUT>
      <<<grid, 256, 0, stream>>>(A, B, C, static_cast<int>(N), static_cast<int>(M), K);
}

int multiprocessors() {
  static const int n = [] {
    int dev = 0, count = 0;
    check(cudaGetDevice(&dev), "int8_imma: device");
    check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev), "int8_imma: multiprocessors");
    return count > 0 ? count : 1;
  }();
  return n;
}

// The split-K rule (a function of the shape and the device's multiprocessor
// count): split only while the output's blocks leave multiprocessors idle,
// each split at least 4 k tiles, at most 16 splits.
int imma_splits(std::size_t blocks, std::size_t K) {
  const std::size_t sms = static_cast<std::size_t>(multiprocessors());
  if (blocks >= sms) return 1;
  const std::size_t k_tiles = (K + int8k::kImmaK - 1) / int8k::kImmaK;
  std::size_t s = (sms + blocks - 1) / blocks;
  s = std::min<std::size_t>({s, k_tiles / 4, 16});
  return s < 2 ? 1 : static_cast<int>(s);
}

template <int BM, int BN, bool ASYNC, int MUT, bool SPLIT>
void imma_with(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
               std::size_t K, bool pairs, int splits, cudaStream_t stream) {
  using S = int8k::ImmaShape<BM, BN>;
  static const bool raised = [] {
    check(cudaFuncSetAttribute(int8k::imma_kernel<BM, BN, ASYNC, MUT, SPLIT>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, S::smem_bytes),
          "int8_imma: raising the shared-memory limit");
    return true;
  }();
  (void)raised;
  const std::size_t blocks = ((N + BM - 1) / BM) * ((M + BN - 1) / BN);
  if (blocks > kIntMax) throw std::invalid_argument("int8_imma: more than 2^31 blocks");
  const int k_tiles = static_cast<int>((K + int8k::kImmaK - 1) / int8k::kImmaK);
  const int per_split = (k_tiles + splits - 1) / splits;
  if (SPLIT) check(cudaMemsetAsync(C, 0, N * M * sizeof(std::int32_t), stream), "int8_imma: zeroing C for split-K");
  const dim3 grid(static_cast<unsigned>(blocks), SPLIT ? static_cast<unsigned>(splits) : 1u);
  int8k::imma_kernel<BM, BN, ASYNC, MUT, SPLIT><<<grid, S::threads, S::smem_bytes, stream>>>(
      A, B, C, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), pairs, per_split);
}

template <int BM, int BN, int MUT>
void imma_tile(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
               std::size_t K, cudaStream_t stream, const char* const (&paths)[4]) {
  const bool async = K % 16 == 0 && aligned(A, 16) && aligned(B, 16);
  const bool pairs = M % 2 == 0 && aligned(C, 8);
  const int splits = imma_splits(((N + BM - 1) / BM) * ((M + BN - 1) / BN), K);
  trace::launched(paths[(async ? 0 : 1) + (splits > 1 ? 2 : 0)]);
  if (splits > 1) {
    if (async) imma_with<BM, BN, true, MUT, true>(A, B, C, N, M, K, pairs, splits, stream);
    else imma_with<BM, BN, false, MUT, true>(A, B, C, N, M, K, pairs, splits, stream);
  } else {
    if (async) imma_with<BM, BN, true, MUT, false>(A, B, C, N, M, K, pairs, 1, stream);
    else imma_with<BM, BN, false, MUT, false>(A, B, C, N, M, K, pairs, 1, stream);
  }
}

template <int MUT>
void imma_mut(int tile, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
              std::size_t K, cudaStream_t stream) {
  // The launch trace's names: tile, loads, split-K, mutant.
  static const char* const paths[2][2][4] = {
      {{"int8 imma 128x128 [cp.async 16B]", "int8 imma 128x128 [byte loads]", "int8 imma 128x128 [cp.async 16B, split-K]",
        "int8 imma 128x128 [byte loads, split-K]"},
       {"int8 imma 128x128 [cp.async 16B] (mutant)", "int8 imma 128x128 [byte loads] (mutant)",
        "int8 imma 128x128 [cp.async 16B, split-K] (mutant)", "int8 imma 128x128 [byte loads, split-K] (mutant)"}},
      {{"int8 imma 128x256 [cp.async 16B]", "int8 imma 128x256 [byte loads]", "int8 imma 128x256 [cp.async 16B, split-K]",
        "int8 imma 128x256 [byte loads, split-K]"},
       {"int8 imma 128x256 [cp.async 16B] (mutant)", "int8 imma 128x256 [byte loads] (mutant)",
        "int8 imma 128x256 [cp.async 16B, split-K] (mutant)", "int8 imma 128x256 [byte loads, split-K] (mutant)"}}};
  constexpr int m = MUT != kInt8Clean ? 1 : 0;
  if (tile == 0) imma_tile<128, 128, MUT>(A, B, C, N, M, K, stream, paths[0][m]);
  else imma_tile<128, 256, MUT>(A, B, C, N, M, K, stream, paths[1][m]);
}

// --- cuBLASLt ---------------------------------------------------------------------

constexpr std::size_t kLtWorkspace = 32u << 20;

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string refused;  // "" when the plan is usable
};

struct Lt {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer<float> workspace;
  std::map<std::tuple<std::size_t, std::size_t, std::size_t>, LtPlan> plans;
  std::mutex mu;
};

Lt& lt() {
  static Lt* s = [] {
    Lt* l = new Lt;  // never destroyed: cuBLASLt may not be torn down after the CUDA runtime
    if (cublasLtCreate(&l->handle) != CUBLAS_STATUS_SUCCESS) l->handle = nullptr;
    else l->workspace.resize(kLtWorkspace / sizeof(float));
    return l;
  }();
  return *s;
}

std::string lt_status(const char* what, cublasStatus_t s) {
  return std::string("cuBLASLt ") + what + ": status " + std::to_string(static_cast<int>(s));
}

// The plan of one shape: C (column-major M×N, ld M) = op_T(B as K×M, ld K) · (A as K×N, ld K).
LtPlan make_plan(Lt& l, std::size_t N, std::size_t M, std::size_t K) {
  LtPlan p;
  const auto ok = [&](cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS && p.refused.empty()) p.refused = lt_status(what, s);
    return p.refused.empty();
  };
  if (!ok(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32I, CUDA_R_32I), "matmul desc")) return p;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  ok(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  ok(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  ok(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8I, K, M, static_cast<std::int64_t>(K)), "layout of B");
  ok(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8I, K, N, static_cast<std::int64_t>(K)), "layout of A");
  ok(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32I, M, N, static_cast<std::int64_t>(M)), "layout of C");
  if (!p.refused.empty()) return p;
  cublasLtMatmulPreference_t pref = nullptr;
  if (!ok(cublasLtMatmulPreferenceCreate(&pref), "preference")) return p;
  const std::uint64_t ws = kLtWorkspace;
  const std::uint32_t align = 16;
  ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace");
  ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align),
     "alignment of A");
  ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align),
     "alignment of B");
  ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align),
     "alignment of C");
  ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align),
     "alignment of D");
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  if (p.refused.empty() &&
      ok(cublasLtMatmulAlgoGetHeuristic(l.handle, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found), "heuristic")) {
    if (found < 1) p.refused = "cuBLASLt: no int8 algorithm for this shape";
    else p.algo = res.algo;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return p;
}

__global__ void first_diff_kernel(const std::int32_t* a, const std::int32_t* b, std::size_t n,
                                  unsigned long long* first) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    if (a[i] != b[i]) atomicMin(first, static_cast<unsigned long long>(i));
}

}  // namespace

void int8_dp4a(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
               std::size_t K, cudaStream_t stream, int mut) {
  if (N == 0 || M == 0) return;
  check_dims("int8_dp4a", N, M, K);
  if ((N + int8k::kDp4aTile - 1) / int8k::kDp4aTile > 65535)
    throw std::invalid_argument("int8_dp4a: N " + std::to_string(N) + " beyond 65535 block rows of 64");
  const bool words = K % 4 == 0 && aligned(A, 4) && aligned(B, 4);
  const bool m = mut != kInt8Clean;
  trace::launched(words ? (m ? "int8 dp4a [4B words] (mutant)" : "int8 dp4a [4B words]")
                        : (m ? "int8 dp4a [byte loads] (mutant)" : "int8 dp4a [byte loads]"));
  const bool int16 = mut == kInt8Dp4aInt16;
  if (words) {
    if (int16) dp4a_with<true, kInt8Dp4aInt16>(A, B, C, N, M, K, stream);
    else dp4a_with<true, kInt8Clean>(A, B, C, N, M, K, stream);
  } else {
    if (int16) dp4a_with<false, kInt8Dp4aInt16>(A, B, C, N, M, K, stream);
    else dp4a_with<false, kInt8Clean>(A, B, C, N, M, K, stream);
  }
  check_launch("int8_dp4a");
}

void int8_imma(int tile, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
               std::size_t M, std::size_t K, cudaStream_t stream, int mut) {
  if (N == 0 || M == 0) return;
  check_dims("int8_imma", N, M, K);
  if (tile < 0 || tile >= kImmaTiles) throw std::invalid_argument("int8_imma: no tile " + std::to_string(tile));
  switch (mut) {
    case kInt8ImmaKTailDropped: imma_mut<kInt8ImmaKTailDropped>(tile, A, B, C, N, M, K, stream); break;
    case kInt8ImmaLastColumn: imma_mut<kInt8ImmaLastColumn>(tile, A, B, C, N, M, K, stream); break;
    default: imma_mut<kInt8Clean>(tile, A, B, C, N, M, K, stream); break;
  }
  check_launch("int8_imma");
}

const char* imma_tile_name(int tile) { return tile == 0 ? "128x128" : tile == 1 ? "128x256" : "?"; }

const char* int8_cublaslt_requirement(const void* A, const void* B, const void* C, std::size_t N, std::size_t M,
                                      std::size_t K) {
  if (N == 0 || M == 0 || K == 0) return "cuBLASLt: an empty extent";
  if (K % 4 != 0) return "cuBLASLt: K not a multiple of 4";
  if (M % 4 != 0) return "cuBLASLt: M not a multiple of 4";
  if (!aligned(A, 16) || !aligned(B, 16) || !aligned(C, 16)) return "cuBLASLt: an operand not 16-byte aligned";
  if (N > kIntMax || M > kIntMax || K > kIntMax) return "cuBLASLt: an extent beyond 2^31";
  return "";
}

const char* int8_cublaslt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
                          std::size_t M, std::size_t K, cudaStream_t stream) {
  const char* req = int8_cublaslt_requirement(A, B, C, N, M, K);
  if (*req != '\0') return req;
  Lt& l = lt();
  if (l.handle == nullptr) return "cuBLASLt: cublasLtCreate failed";
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = l.plans.find({N, M, K});
  if (it == l.plans.end()) it = l.plans.emplace(std::make_tuple(N, M, K), make_plan(l, N, M, K)).first;
  LtPlan& p = it->second;
  if (!p.refused.empty()) return p.refused.c_str();
  const std::int32_t alpha = 1, beta = 0;
  trace::launched("int8 cublasLt [TN, s8 -> s32]");
  const cublasStatus_t s = cublasLtMatmul(l.handle, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo,
                                          l.workspace.data(), kLtWorkspace,
                                          // cuBLASLt's stream 0 is the legacy stream; the backend's is the
                                          // calling thread's (CMakeLists.txt: --default-stream=per-thread).
                                          stream != nullptr ? stream : cudaStreamPerThread);
  if (s != CUBLAS_STATUS_SUCCESS) {
    p.refused = lt_status("matmul", s);
    return p.refused.c_str();
  }
  return "";
}

double int8_time_ms(int impl, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
                    std::size_t M, std::size_t K, int reps) {
  const auto call = [&]() -> bool {
    if (impl == 0) int8_dp4a(A, B, C, N, M, K, nullptr);
    else if (impl <= kImmaTiles) int8_imma(impl - 1, A, B, C, N, M, K, nullptr);
    else return *int8_cublaslt(A, B, C, N, M, K, nullptr) == '\0';
    return true;
  };
  if (!call()) return -1.0;
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "int8_time_ms: event");
  check(cudaEventCreate(&e1), "int8_time_ms: event");
  double best = -1.0;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(e0), "int8_time_ms: record");
    call();
    check(cudaEventRecord(e1), "int8_time_ms: record");
    check(cudaEventSynchronize(e1), "int8_time_ms: wait");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "int8_time_ms: elapsed");
    if (best < 0 || ms < best) best = ms;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

std::size_t int32_first_difference(const std::int32_t* a, const std::int32_t* b, std::size_t n) {
  DeviceBuffer<unsigned long long> first(1);
  const unsigned long long none = n;
  copy_to_device(first.data(), &none, sizeof none);
  if (n > 0) {
    trace::launched("int32 first difference");
    first_diff_kernel<<<1024, 256>>>(a, b, n, first.data());
    check_launch("int32_first_difference");
  }
  unsigned long long out = n;
  copy_to_host(&out, first.data(), sizeof out);
  return static_cast<std::size_t>(out);
}

}  // namespace lockstep::cuda::launch
