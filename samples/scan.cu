// Exclusive prefix sum of a large array: a work-efficient (Blelloch) scan per block in shared memory,
// a scan of the block totals, and a uniform add — three kernels, many barriers.
#include "sample_common.h"

#define SCAN_BLOCK 512  // elements per block; 256 threads, two elements each

__global__ void scan_blocks(const unsigned *in, unsigned *out, unsigned *block_totals, int n) {
    __shared__ unsigned s[SCAN_BLOCK];
    int t = threadIdx.x, base = blockIdx.x * SCAN_BLOCK;
    s[2 * t] = base + 2 * t < n ? in[base + 2 * t] : 0;
    s[2 * t + 1] = base + 2 * t + 1 < n ? in[base + 2 * t + 1] : 0;
    int offset = 1;
    for (int d = SCAN_BLOCK >> 1; d > 0; d >>= 1) {  // up-sweep
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            s[bi] += s[ai];
        }
        offset *= 2;
    }
    if (t == 0) {
        if (block_totals) block_totals[blockIdx.x] = s[SCAN_BLOCK - 1];
        s[SCAN_BLOCK - 1] = 0;
    }
    for (int d = 1; d < SCAN_BLOCK; d *= 2) {  // down-sweep
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            unsigned tmp = s[ai];
            s[ai] = s[bi];
            s[bi] += tmp;
        }
    }
    __syncthreads();
    if (base + 2 * t < n) out[base + 2 * t] = s[2 * t];
    if (base + 2 * t + 1 < n) out[base + 2 * t + 1] = s[2 * t + 1];
}

__global__ void add_block_offsets(unsigned *data, const unsigned *offsets, int n) {
    int i = blockIdx.x * SCAN_BLOCK + threadIdx.x;
    unsigned off = offsets[blockIdx.x];
    if (i < n) data[i] += off;
    if (i + SCAN_BLOCK / 2 < n) data[i + SCAN_BLOCK / 2] += off;
}

// Scans any n up to SCAN_BLOCK^2 with one level of recursion (enough for 1<<18).
static void scan(const unsigned *din, unsigned *dout, int n) {
    int blocks = (n + SCAN_BLOCK - 1) / SCAN_BLOCK;
    unsigned *totals, *totals_scanned;
    CHECK(cudaMalloc(&totals, blocks * sizeof(unsigned)));
    CHECK(cudaMalloc(&totals_scanned, blocks * sizeof(unsigned)));
    scan_blocks<<<blocks, SCAN_BLOCK / 2>>>(din, dout, totals, n);
    CHECK(cudaGetLastError());
    scan_blocks<<<1, SCAN_BLOCK / 2>>>(totals, totals_scanned, nullptr, blocks);
    CHECK(cudaGetLastError());
    add_block_offsets<<<blocks, SCAN_BLOCK / 2>>>(dout, totals_scanned, n);
    CHECK_LAUNCH();
    CHECK(cudaFree(totals)); CHECK(cudaFree(totals_scanned));
}

int main() {
    const int sizes[] = {1 << 18, 100000, 513, 1};
    for (int n : sizes) {
        unsigned *h = new unsigned[n], *ref = new unsigned[n], *got = new unsigned[n];
        Rng rng(7 + n);
        unsigned acc = 0;
        for (int i = 0; i < n; i++) { h[i] = rng.u32() % 1000; ref[i] = acc; acc += h[i]; }
        unsigned *din, *dout;
        CHECK(cudaMalloc(&din, n * sizeof(unsigned)));
        CHECK(cudaMalloc(&dout, n * sizeof(unsigned)));
        CHECK(cudaMemcpy(din, h, n * sizeof(unsigned), cudaMemcpyHostToDevice));
        CHECK(cudaMemset(dout, 0xFF, n * sizeof(unsigned)));
        scan(din, dout, n);
        CHECK(cudaMemcpy(got, dout, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
        char name[32];
        sprintf(name, "scan%d", n);
        compare_exact(name, got, ref, n);
        CHECK(cudaFree(din)); CHECK(cudaFree(dout));
        delete[] h; delete[] ref; delete[] got;
    }
    return finish();
}
