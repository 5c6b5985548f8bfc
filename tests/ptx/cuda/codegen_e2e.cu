#include <cstdio>
#include <cassert>
#include <cuda_pipeline.h>
extern "C" __global__ void vecAdd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
#define T 16
extern "C" __global__ void matmul(const float *A, const float *B, float *C, int N) {
  __shared__ float As[T][T], Bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0;
  for (int k0 = 0; k0 < N; k0 += T) {
    As[ty][tx] = A[row * N + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * N + col];
    __syncthreads();
    for (int k = 0; k < T; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * N + col] = acc;
}
extern "C" __global__ void reduce(const float *in, float *out, int n) {
  extern __shared__ float s[];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0.f;
  __syncthreads();
  for (int st = blockDim.x / 2; st > 0; st >>= 1) {
    if (t < st) s[t] += s[t + st];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void shflreduce(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  float w = v;
  for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffff, w, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
  if ((threadIdx.x & 31) == 1) atomicAdd(out + 1, w);
}
extern "C" __global__ void hist(const unsigned *in, unsigned *h, int n) {
  __shared__ unsigned sh[64];
  for (int j = threadIdx.x; j < 64; j += blockDim.x) sh[j] = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&sh[in[i] & 63], 1u);
  __syncthreads();
  for (int j = threadIdx.x; j < 64; j += blockDim.x) atomicAdd(&h[j], sh[j]);
}
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ float sq(float x) { return x * x; }
extern "C" __global__ void devfn(int *o, float *f) {
  int t = threadIdx.x;
  o[t] = fib(t);
  f[t] = sq((float)t);
}
extern "C" __global__ void pr(int x) {
  printf("hello %d from %d %f\n", x, threadIdx.x, 1.5);
}
extern "C" __global__ void trapk(int *p) { if (threadIdx.x == 3) __trap(); p[threadIdx.x] = 1; }
extern "C" __global__ void assk(int *p) { assert(p[threadIdx.x] == 0); }
extern "C" __global__ void divk(const int *a, const int *b, int *c, unsigned *d) {
  int t = threadIdx.x; c[t] = a[t] / b[t]; d[t] = (unsigned)a[t] % (unsigned)b[t];
}

__device__ __noinline__ float blockSum(float v, float *sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = v;
  __syncthreads();
  float r = 0;
  if (threadIdx.x == 0) for (int i = 0; i < blockDim.x / 32; i++) r += sh[i];
  __syncthreads();
  return r;
}
extern "C" __global__ void bsum(const float *x, float *out) {
  __shared__ float sh[32];
  float r = blockSum(x[blockIdx.x * blockDim.x + threadIdx.x], sh);
  if (threadIdx.x == 0) out[blockIdx.x] = r;
}
extern "C" __global__ void votes(const int *x, unsigned *ballot, int *all, int *any, unsigned *act) {
  int t = threadIdx.x;
  int p = x[t] > 0;
  ballot[t] = __ballot_sync(0xffffffff, p);
  all[t] = __all_sync(0xffffffff, p);
  any[t] = __any_sync(0xffffffff, p);
  if (t % 3 == 0) act[t] = __activemask(); else act[t] = 0;
}
extern "C" __global__ void async_copy(const float *g, float *o) {
  __shared__ float s[256];
  __pipeline_memcpy_async(&s[threadIdx.x], &g[blockIdx.x * 256 + threadIdx.x], 4);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  o[blockIdx.x * 256 + threadIdx.x] = s[255 - threadIdx.x];
}
__device__ int counter;
__constant__ float coef[4];
extern "C" __global__ void globs(float *o) {
  atomicAdd(&counter, 1);
  o[threadIdx.x] = coef[threadIdx.x & 3] * threadIdx.x;
}
extern "C" __global__ void earlyexit(int *o, int n) {
  __shared__ int s;
  if (threadIdx.x == 0) s = 0;
  __syncthreads();
  if (threadIdx.x >= n) return;
  atomicAdd(&s, 1);
  __syncthreads();
  o[threadIdx.x] = s;
}
extern "C" __global__ void mall(int *out) {
  int *p = (int *)malloc(16 * sizeof(int));
  for (int i = 0; i < 16; i++) p[i] = threadIdx.x * i;
  int s = 0;
  for (int i = 0; i < 16; i++) s += p[i];
  free(p);
  out[threadIdx.x] = s;
}
