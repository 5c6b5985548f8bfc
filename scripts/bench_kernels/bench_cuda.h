// The CUDA side of scripts/bench_cpu's harness: error checks and the timing of launch + synchronize as a
// user's program sees it (host clock around both, best of the runs).
#ifndef BENCH_CUDA_H
#define BENCH_CUDA_H

#include <cuda_runtime.h>
#include "bench_ref.h"

#define CUDA_CHECK(call)                                                                         \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess)                                                                   \
            bench_fail(SHAPE, "%s -> %d (%s)", #call, (int)e_, cudaGetErrorString(e_));          \
    } while (0)

// Seconds for one launch + cudaDeviceSynchronize; a launch error or a fault is a FAIL.
template <class Launch> static double time_launch(const char *shape, Launch launch) {
    double t0 = bench_now();
    launch();
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    double dt = bench_now() - t0;
    if (e != cudaSuccess) bench_fail(shape, "launch -> %d (%s)", (int)e, cudaGetErrorString(e));
    return dt;
}

template <class Launch> static bench_times time_repeats(const char *shape, const bench_args &a, Launch launch) {
    bench_times t;
    t.count = 0;
    t.spent = 0;
    while (bench_more(&t, &a)) bench_add(&t, time_launch(shape, launch));
    return t;
}

// Device buffers filled from host arrays; outputs start as 0xff bytes (a NaN in every float) so that an
// element the kernel never writes cannot pass a check.
template <class T> static T *to_device(const char *shape, const T *host, size_t count) {
    T *d = nullptr;
    cudaError_t e = cudaMalloc(&d, count * sizeof(T));
    if (e == cudaSuccess) e = cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) bench_fail(shape, "cudaMalloc/cudaMemcpy -> %d (%s)", (int)e, cudaGetErrorString(e));
    return d;
}

template <class T> static T *device_poisoned(const char *shape, size_t count) {
    T *d = nullptr;
    cudaError_t e = cudaMalloc(&d, count * sizeof(T));
    if (e == cudaSuccess) e = cudaMemset(d, 0xff, count * sizeof(T));
    if (e != cudaSuccess) bench_fail(shape, "cudaMalloc/cudaMemset -> %d (%s)", (int)e, cudaGetErrorString(e));
    return d;
}

template <class T> static void to_host(const char *shape, T *host, const T *dev, size_t count) {
    cudaError_t e = cudaMemcpy(host, dev, count * sizeof(T), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) bench_fail(shape, "cudaMemcpy to host -> %d (%s)", (int)e, cudaGetErrorString(e));
}

// Starts the context before anything is timed, so that a first launch holds module load and compile only.
static void start_device(const char *shape) {
    cudaError_t e = cudaFree(0);
    if (e != cudaSuccess) bench_fail(shape, "cudaFree(0) -> %d (%s)", (int)e, cudaGetErrorString(e));
}

static int multiprocessors(const char *shape) {
    int sms = 0;
    cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (e != cudaSuccess) bench_fail(shape, "cudaDeviceGetAttribute -> %d (%s)", (int)e, cudaGetErrorString(e));
    return sms;
}

#endif
