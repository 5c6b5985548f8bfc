// Device printf: formats of every common kind, printed in a deterministic order (one thread at a time,
// separate launches synchronised in between); the test checks these exact lines.
#include "sample_common.h"

__global__ void print_formats(int i, unsigned u, long long ll, float f, double d) {
    const char *s = "hello";
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        printf("printf: int=%d unsigned=%u hex=%x HEX=%08X\n", i, u, u, u);
        printf("printf: ll=%lld neg=%d char=%c str=%s pct=%%\n", ll, -i, 'Z', s);
        printf("printf: float=%.3f double=%.6f exp=%.2e width=[%6.1f] left=[%-5d]\n", f, d, d, f, i);
    }
}

// One line per block, in block order: each launch prints one line and the host waits for it.
__global__ void print_block_line(int launch) {
    if (threadIdx.x == 0) printf("printf: launch %d block %d of %d threads %d\n", launch, blockIdx.x, gridDim.x, blockDim.x);
}

// A single thread loops, so the lines come out in loop order.
__global__ void print_loop(const int *data, int n) {
    for (int k = 0; k < n; k++) printf("printf: data[%d] = %d\n", k, data[k]);
}

__global__ void square(int *data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * data[i];
}

__constant__ char c_msg[] = "from constant memory";

__global__ void print_string_arg() {
    printf("printf: %s\n", c_msg);
}

int main() {
    print_formats<<<2, 32>>>(42, 3735928559u, -1234567890123ll, 3.14159f, 2.718281828459045);
    CHECK_LAUNCH();
    for (int l = 0; l < 3; l++) {
        print_block_line<<<1, 64>>>(l);
        CHECK_LAUNCH();
    }
    int h[5] = {1, -2, 3, -4, 5}, want[5], got[5];
    int *d;
    CHECK(cudaMalloc(&d, sizeof(h)));
    CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
    square<<<1, 32>>>(d, 5);
    CHECK(cudaGetLastError());
    print_loop<<<1, 1>>>(d, 5);
    CHECK_LAUNCH();
    print_string_arg<<<1, 1>>>();
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(got, d, sizeof(got), cudaMemcpyDeviceToHost));
    for (int k = 0; k < 5; k++) want[k] = h[k] * h[k];
    compare_exact("squares", got, want, 5);
    CHECK(cudaFree(d));
    fflush(stdout);
    return finish();
}
