// What an NVIDIA GPU gives for c[i] = a[i] + b[i] (scripts/bench_kernels/vec_add.cu's kernel) when c is a shifted
// by `shift` elements, one block of 256 threads: a race, so no order is promised; this records which value each
// thread read (the one before the other thread's write, or after it) for tests/data/nvidia_overlap_race.json.
// Each element of c is classed "old" (a's value before the launch), "new" (the value another thread wrote there)
// or "other"; prints one JSON object per line.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main() {
    const int n = 256, base = 64, total = n + 2 * base;
    std::vector<float> init(total), b(n), out(total);
    for (int i = 0; i < total; i++) init[i] = (float)((i * 7919) % 1000) / 8.0f + 1.0f;
    for (int i = 0; i < n; i++) b[i] = (float)(1 + i % 13) * 1024.0f;
    float *dbuf, *db;
    cudaMalloc(&dbuf, total * sizeof(float));
    cudaMalloc(&db, n * sizeof(float));
    cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    const int shifts[] = {1, 3, 8, 16, 20, 31, 32, 33, -5, -1};
    for (int shift : shifts) {
        for (int trial = 0; trial < 5; trial++) {
            cudaMemcpy(dbuf, init.data(), total * sizeof(float), cudaMemcpyHostToDevice);
            vec_add<<<1, n>>>(dbuf + base, db, dbuf + base + shift, n);
            cudaMemcpy(out.data(), dbuf, total * sizeof(float), cudaMemcpyDeviceToHost);
            // the value at a[i] after the launch: what thread i could have read if it read after the write there
            int old_n = 0, new_n = 0, other = 0;
            std::string cls;
            for (int i = 0; i < n; i++) {
                float got = out[base + shift + i];
                float old_v = init[base + i] + b[i];
                float new_v = out[base + i] + b[i];
                char c = got == old_v ? 'o' : got == new_v ? 'n' : 'x';
                if (c == 'o') old_n++; else if (c == 'n') new_n++; else other++;
                cls += c;
            }
            printf("{\"shift\": %d, \"trial\": %d, \"old\": %d, \"new\": %d, \"other\": %d, \"classes\": \"%s\"}\n",
                   shift, trial, old_n, new_n, other, cls.c_str());
        }
    }
    cudaError_t e = cudaGetLastError();
    printf("{\"error\": \"%s\"}\n", cudaGetErrorString(e));
    return 0;
}
