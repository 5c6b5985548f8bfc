/* The bench kernels as OpenCL C, for PoCL (same algorithms as the .cu files). */
__kernel void vec_add(__global const float *a, __global const float *b, __global float *c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}

#define TILE 16
__kernel void sgemm_tiled(__global const float *A, __global const float *B, __global float *C, int n) {
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * TILE + ty, col = get_group_id(0) * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        As[ty][tx] = A[row * n + t + tx];
        Bs[ty][tx] = B[(t + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[row * n + col] = acc;
}

__kernel void sgemm_naive(__global const float *A, __global const float *B, __global float *C, int n) {
    int row = get_global_id(1), col = get_global_id(0);
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; k++) acc += A[row * n + k] * B[k * n + col];
        C[row * n + col] = acc;
    }
}

__kernel void reduce_smem(__global const float *in, __global float *out) {
    __local float s[256];
    unsigned t = get_local_id(0);
    s[t] = in[get_group_id(0) * 256 + t];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (unsigned stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) out[get_group_id(0)] = s[0];
}

__kernel void empty(void) {}
