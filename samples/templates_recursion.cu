// Templates (kernels over types, functors, non-type parameters, unrolled loops), __device__ functions
// (inlined and __noinline__), and recursion on the device (factorial, Fibonacci, gcd, a recursive
// walk with a local array) with results checked against the same code on the host.
#include "sample_common.h"

template <typename T> struct Square { __host__ __device__ T operator()(T x) const { return x * x; } };
template <typename T> struct AffineOp {
    T a, b;
    __host__ __device__ T operator()(T x) const { return a * x + b; }
};

template <typename T, typename Op>
__global__ void map_kernel(const T *in, T *out, int n, Op op) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = op(in[i]);
}

template <int K, typename T>
__global__ void sum_k_neighbours(const T *in, T *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T s = 0;
#pragma unroll
    for (int k = 0; k < K; k++) s += in[(i + k) % n];
    out[i] = s;
}

__host__ __device__ __noinline__ unsigned long long factorial(unsigned n) { return n <= 1 ? 1ull : n * factorial(n - 1); }
__host__ __device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__host__ __device__ int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }

// Recursive digit sum with a local array passed down (exercises the stack with locals).
__host__ __device__ __noinline__ int digit_path(int x, int depth, int *trail) {
    trail[depth] = x % 10;
    if (x < 10) return depth + 1;
    return digit_path(x / 10, depth + 1, trail);
}

__host__ __device__ int collatz_steps(long long x) {
    int steps = 0;
    while (x != 1) { x = (x & 1) ? 3 * x + 1 : x / 2; steps++; }
    return steps;
}

__global__ void recursion_kernel(const int *in, unsigned long long *fact, int *fibs, int *gcds, int *digits, int *coll, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    fact[i] = factorial(v % 21);
    fibs[i] = fib(v % 16);
    gcds[i] = gcd(v, 360360);
    int trail[12];
    int len = digit_path(v, 0, trail);
    int packed = len;
    for (int k = 0; k < len; k++) packed = packed * 7 + trail[k];
    digits[i] = packed;
    coll[i] = collatz_steps(v % 10000 + 1);
}

template <typename T>
static void run_maps(Rng &rng, const char *tname) {
    const int n = 1 << 16;
    T *h = new T[n], *ref = new T[n], *got = new T[n];
    for (int i = 0; i < n; i++) h[i] = (T)rng.range(-100, 100);
    T *din, *dout;
    CHECK(cudaMalloc(&din, n * sizeof(T)));
    CHECK(cudaMalloc(&dout, n * sizeof(T)));
    CHECK(cudaMemcpy(din, h, n * sizeof(T), cudaMemcpyHostToDevice));
    char name[64];

    CHECK(cudaMemset(dout, 0xFF, n * sizeof(T)));
    map_kernel<<<n / 256, 256>>>(din, dout, n, Square<T>());
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dout, n * sizeof(T), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ref[i] = Square<T>()(h[i]);
    sprintf(name, "square<%s>", tname);
    compare_exact(name, got, ref, n);

    AffineOp<T> aff{(T)3, (T)-7};
    CHECK(cudaMemset(dout, 0xFF, n * sizeof(T)));
    map_kernel<<<n / 256, 256>>>(din, dout, n, aff);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dout, n * sizeof(T), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ref[i] = aff(h[i]);
    sprintf(name, "affine<%s>", tname);
    compare_exact(name, got, ref, n);

    CHECK(cudaMemset(dout, 0xFF, n * sizeof(T)));
    sum_k_neighbours<5, T><<<n / 256, 256>>>(din, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, dout, n * sizeof(T), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) { T s = 0; for (int k = 0; k < 5; k++) s += h[(i + k) % n]; ref[i] = s; }
    sprintf(name, "sum5<%s>", tname);
    compare_exact(name, got, ref, n);

    CHECK(cudaFree(din)); CHECK(cudaFree(dout));
    delete[] h; delete[] ref; delete[] got;
}

int main() {
    // Deep recursion needs more than the default per-thread stack on some GPUs.
    CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 16384));
    Rng rng(13);
    run_maps<int>(rng, "int");
    run_maps<float>(rng, "float");
    run_maps<double>(rng, "double");
    run_maps<long long>(rng, "long long");

    const int n = 4096;
    int *h = new int[n];
    for (int i = 0; i < n; i++) h[i] = rng.range(1, 1000000000);
    int *din, *dfib, *dgcd, *ddig, *dcol; unsigned long long *dfact;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dfact, n * sizeof(unsigned long long)));
    CHECK(cudaMalloc(&dfib, n * sizeof(int))); CHECK(cudaMalloc(&dgcd, n * sizeof(int)));
    CHECK(cudaMalloc(&ddig, n * sizeof(int))); CHECK(cudaMalloc(&dcol, n * sizeof(int)));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    recursion_kernel<<<n / 128, 128>>>(din, dfact, dfib, dgcd, ddig, dcol, n);
    CHECK_LAUNCH();
    unsigned long long *gf = new unsigned long long[n], *rf = new unsigned long long[n];
    int *g1 = new int[n], *g2 = new int[n], *g3 = new int[n], *g4 = new int[n];
    int *r1 = new int[n], *r2 = new int[n], *r3 = new int[n], *r4 = new int[n];
    CHECK(cudaMemcpy(gf, dfact, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g1, dfib, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g2, dgcd, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g3, ddig, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(g4, dcol, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int v = h[i];
        rf[i] = factorial(v % 21);
        r1[i] = fib(v % 16);
        r2[i] = gcd(v, 360360);
        int trail[12];
        int len = digit_path(v, 0, trail), packed = len;
        for (int k = 0; k < len; k++) packed = packed * 7 + trail[k];
        r3[i] = packed;
        r4[i] = collatz_steps(v % 10000 + 1);
    }
    compare_exact("factorial", gf, rf, n);
    compare_exact("fib", g1, r1, n);
    compare_exact("gcd", g2, r2, n);
    compare_exact("digits", g3, r3, n);
    compare_exact("collatz", g4, r4, n);
    CHECK(cudaFree(din)); CHECK(cudaFree(dfact)); CHECK(cudaFree(dfib));
    CHECK(cudaFree(dgcd)); CHECK(cudaFree(ddig)); CHECK(cudaFree(dcol));
    return finish();
}
