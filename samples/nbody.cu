// N-body: all-pairs gravitational forces with shared-memory tiles of bodies, rsqrtf, float4 loads,
// and a few integration steps; checked against a double-precision host simulation.
#include "sample_common.h"

#define TILE 128
#define SOFTENING 0.01f

__global__ void forces(const float4 *pos, float3 *acc, int n) {
    __shared__ float4 tile[TILE];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 me = i < n ? pos[i] : make_float4(0, 0, 0, 0);
    float3 a = make_float3(0, 0, 0);
    for (int base = 0; base < n; base += TILE) {
        int j = base + threadIdx.x;
        tile[threadIdx.x] = j < n ? pos[j] : make_float4(0, 0, 0, 0);  // w = 0: no mass, no force
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TILE; k++) {
            float4 o = tile[k];
            float dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
            float d2 = dx * dx + dy * dy + dz * dz + SOFTENING;
            float inv = rsqrtf(d2);
            float s = o.w * inv * inv * inv;
            a.x += dx * s; a.y += dy * s; a.z += dz * s;
        }
        __syncthreads();
    }
    if (i < n) acc[i] = a;
}

__global__ void integrate(float4 *pos, float3 *vel, const float3 *acc, int n, float dt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float3 v = vel[i];
    v.x += acc[i].x * dt; v.y += acc[i].y * dt; v.z += acc[i].z * dt;
    vel[i] = v;
    pos[i].x += v.x * dt; pos[i].y += v.y * dt; pos[i].z += v.z * dt;
}

int main() {
    const int n = 2000, steps = 3;
    const float dt = 0.001f;
    float4 *p = new float4[n];
    float3 *v = new float3[n];
    double (*rp)[4] = new double[n][4], (*rv)[3] = new double[n][3], (*ra)[3] = new double[n][3];
    Rng rng(22);
    for (int i = 0; i < n; i++) {
        p[i] = make_float4(rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(0.5f, 1.5f) / n);
        v[i] = make_float3(rng.uniform(-0.1f, 0.1f), rng.uniform(-0.1f, 0.1f), rng.uniform(-0.1f, 0.1f));
        rp[i][0] = p[i].x; rp[i][1] = p[i].y; rp[i][2] = p[i].z; rp[i][3] = p[i].w;
        rv[i][0] = v[i].x; rv[i][1] = v[i].y; rv[i][2] = v[i].z;
    }
    float4 *dp; float3 *dv, *da;
    CHECK(cudaMalloc(&dp, n * sizeof(float4)));
    CHECK(cudaMalloc(&dv, n * sizeof(float3)));
    CHECK(cudaMalloc(&da, n * sizeof(float3)));
    CHECK(cudaMemcpy(dp, p, n * sizeof(float4), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dv, v, n * sizeof(float3), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(da, 0xFF, n * sizeof(float3)));
    int blocks = (n + TILE - 1) / TILE;
    for (int s = 0; s < steps; s++) {
        forces<<<blocks, TILE>>>(dp, da, n);
        CHECK(cudaGetLastError());
        integrate<<<blocks, TILE>>>(dp, dv, da, n, dt);
        CHECK(cudaGetLastError());
        for (int i = 0; i < n; i++) {
            double ax = 0, ay = 0, az = 0;
            for (int j = 0; j < n; j++) {
                double dx = rp[j][0] - rp[i][0], dy = rp[j][1] - rp[i][1], dz = rp[j][2] - rp[i][2];
                double d2 = dx * dx + dy * dy + dz * dz + SOFTENING;
                double s3 = rp[j][3] / (d2 * sqrt(d2));
                ax += dx * s3; ay += dy * s3; az += dz * s3;
            }
            ra[i][0] = ax; ra[i][1] = ay; ra[i][2] = az;
        }
        for (int i = 0; i < n; i++)
            for (int c = 0; c < 3; c++) { rv[i][c] += ra[i][c] * dt; rp[i][c] += rv[i][c] * dt; }
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(p, dp, n * sizeof(float4), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(v, dv, n * sizeof(float3), cudaMemcpyDeviceToHost));
    float3 *a = new float3[n];
    CHECK(cudaMemcpy(a, da, n * sizeof(float3), cudaMemcpyDeviceToHost));
    // Float accumulation over 2000 bodies: relative 1e-3 of the force, absolute against cancellation.
    float *got = new float[n * 9], *want = new float[n * 9];
    for (int i = 0; i < n; i++) {
        float g[9] = {a[i].x, a[i].y, a[i].z, v[i].x, v[i].y, v[i].z, p[i].x, p[i].y, p[i].z};
        double w[9] = {ra[i][0], ra[i][1], ra[i][2], rv[i][0], rv[i][1], rv[i][2], rp[i][0], rp[i][1], rp[i][2]};
        for (int c = 0; c < 9; c++) { got[i * 9 + c] = g[c]; want[i * 9 + c] = (float)w[c]; }
    }
    compare_close("nbody state", got, want, (size_t)n * 9, 1e-3, 1e-4);
    CHECK(cudaFree(dp)); CHECK(cudaFree(dv)); CHECK(cudaFree(da));
    return finish();
}
