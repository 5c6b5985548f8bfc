#include <cstdio>
#include <cassert>
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
