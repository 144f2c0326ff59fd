// The floor a CUDA graph of many small dependent kernels sets on this device
// (docs/perf/DECODE_CUDA.md §20): a chain of N kernels, each of `ctas` CTAs
// of 256 threads that read one float written by the kernel before and write
// one (a real dependency, nothing else), captured as one graph and replayed;
// per kernel = the replay's event time / N. Variants: plain launches, and
// programmatic dependent launch (each kernel triggers at its first
// instruction and waits before its read). The decode pass's ~230-333 kernels
// a pass times this is the part of its 2.3 ms no kernel's work can remove.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                  \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__global__ void step(const float* in, float* out, int pdl) {
  if (pdl) asm volatile("griddepcontrol.launch_dependents;");
  if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = in[0] + 1.0f;
}

float chain_us(int n, int ctas, bool pdl, float* buf) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) {
    const float* in = buf + (i % 2);
    float* out = buf + 1 - (i % 2);
    if (pdl) {
      cudaLaunchConfig_t c{};
      c.gridDim = dim3(ctas);
      c.blockDim = dim3(256);
      c.stream = s;
      cudaLaunchAttribute a[1];
      a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      a[0].val.programmaticStreamSerializationAllowed = 1;
      c.attrs = a;
      c.numAttrs = 1;
      CHECK(cudaLaunchKernelEx(&c, step, in, out, 1));
    } else {
      step<<<ctas, 256, 0, s>>>(in, out, 0);
      CHECK(cudaGetLastError());
    }
  }
  CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiateWithFlags(&x, g, 0));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int w = 0; w < 3; ++w) CHECK(cudaGraphLaunch(x, s));
  std::vector<float> t;
  for (int r = 0; r < 20; ++r) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(s));
  return 1e3f * t[t.size() / 2] / static_cast<float>(n);
}

int main() {
  float* buf;
  CHECK(cudaMalloc(&buf, 2 * sizeof(float)));
  CHECK(cudaMemset(buf, 0, 2 * sizeof(float)));
  std::printf("%8s %6s %14s %14s\n", "kernels", "ctas", "plain us/kern", "pdl us/kern");
  for (int n : {100, 300})
    for (int ctas : {1, 20, 132, 480, 1728})
      std::printf("%8d %6d %14.3f %14.3f\n", n, ctas, chain_us(n, ctas, false, buf), chain_us(n, ctas, true, buf));
  float h[2];
  CHECK(cudaMemcpy(h, buf, sizeof h, cudaMemcpyDeviceToHost));
  std::printf("(chain value %.0f: the kernels ran)\n", h[0] > h[1] ? h[0] : h[1]);
  return 0;
}
