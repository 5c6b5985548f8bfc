// Streams, events and host callbacks: chunks of work pipelined over several streams (async copies from
// pinned memory, kernels), cross-stream waits on events, timing with events, cudaLaunchHostFunc and
// cudaStreamAddCallback running in stream order, and stream/event queries.
#include "sample_common.h"

__global__ void scale_add(float *x, int n, float a, float b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + b;
}

// A kernel slow enough that a query right after launch usually sees it still running; either answer
// (cudaSuccess or cudaErrorNotReady) is legal, anything else is not.
__global__ void spin(float *x, int iters) {
    float v = x[threadIdx.x];
    for (int i = 0; i < iters; i++) v = v * 0.999f + 0.001f;
    x[threadIdx.x] = v;
}

struct CallbackLog {
    int order[16];
    int count;
};

struct HostFuncArg {
    CallbackLog *log;
    int id;
};

static void CUDART_CB host_func(void *arg) {
    HostFuncArg *a = (HostFuncArg *)arg;
    int k = a->log->count;
    if (k < 16) a->log->order[k] = a->id;
    a->log->count = k + 1;
}

struct ChunkCheck {
    const float *host_out;  // filled by the D2H copy queued before this callback
    int n; float want0; int *ok;
};

// Runs after the D2H copy in the same stream: the data must already be there.
static void CUDART_CB check_chunk(cudaStream_t, cudaError_t status, void *arg) {
    ChunkCheck *c = (ChunkCheck *)arg;
    *c->ok = (status == cudaSuccess && c->host_out[0] == c->want0) ? 1 : 0;
}

int main() {
    const int nstreams = 4, chunk = 1 << 16, n = nstreams * chunk;
    float *h_in, *h_out;
    CHECK(cudaMallocHost(&h_in, n * sizeof(float)));
    CHECK(cudaMallocHost(&h_out, n * sizeof(float)));
    Rng rng(10);
    for (int i = 0; i < n; i++) { h_in[i] = (float)rng.range(-1000, 1000); h_out[i] = NAN; }
    float *d;
    CHECK(cudaMalloc(&d, n * sizeof(float)));

    cudaStream_t s[nstreams];
    for (int k = 0; k < nstreams; k++) CHECK(cudaStreamCreate(&s[k]));
    cudaEvent_t start, stop, done[nstreams];
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int k = 0; k < nstreams; k++) CHECK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));

    ChunkCheck checks[nstreams];
    int chunk_ok[nstreams] = {0};
    CHECK(cudaEventRecord(start, 0));
    for (int k = 0; k < nstreams; k++) {
        float *dk = d + k * chunk;
        CHECK(cudaMemcpyAsync(dk, h_in + k * chunk, chunk * sizeof(float), cudaMemcpyHostToDevice, s[k]));
        scale_add<<<chunk / 256, 256, 0, s[k]>>>(dk, chunk, 2.0f, (float)k);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(h_out + k * chunk, dk, chunk * sizeof(float), cudaMemcpyDeviceToHost, s[k]));
        checks[k] = {h_out + k * chunk, chunk, h_in[k * chunk] * 2.0f + (float)k, &chunk_ok[k]};
        CHECK(cudaStreamAddCallback(s[k], check_chunk, &checks[k], 0));
        CHECK(cudaEventRecord(done[k], s[k]));
    }
    // The legacy default stream waits for the others; the stop event therefore covers all of them.
    for (int k = 0; k < nstreams; k++) CHECK(cudaStreamWaitEvent(0, done[k], 0));
    CHECK(cudaEventRecord(stop, 0));
    CHECK(cudaEventSynchronize(stop));
    for (int k = 0; k < nstreams; k++) CHECK(cudaEventQuery(done[k]));
    float ms = -1;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    expect(ms >= 0.0f, "elapsed time is non-negative");
    printf("pipelined %d chunks in %.3f ms\n", nstreams, ms);
    // A timing-disabled event cannot be timed.
    float dummy;
    cudaError_t e = cudaEventElapsedTime(&dummy, start, done[0]);
    expect(e == cudaErrorInvalidResourceHandle, "elapsed time with a DisableTiming event is an error");
    if (e != cudaErrorInvalidResourceHandle) printf("  got %s\n", cudaGetErrorName(e));
    // The failed call is also the last error, until read.
    expect(cudaGetLastError() == cudaErrorInvalidResourceHandle, "the failed call is the last error");
    expect(cudaGetLastError() == cudaSuccess, "reading the last error clears it");

    float *ref = new float[n];
    for (int k = 0; k < nstreams; k++)
        for (int i = 0; i < chunk; i++) ref[k * chunk + i] = h_in[k * chunk + i] * 2.0f + (float)k;
    compare_exact("out", h_out, ref, n);
    for (int k = 0; k < nstreams; k++) expect(chunk_ok[k] == 1, "stream callback saw its chunk's data");

    // Cross-stream dependency: s[1] must not start its kernel before s[0]'s event.
    CHECK(cudaMemcpyAsync(d, h_in, chunk * sizeof(float), cudaMemcpyHostToDevice, s[0]));
    scale_add<<<chunk / 256, 256, 0, s[0]>>>(d, chunk, 3.0f, 0.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(done[0], s[0]));
    CHECK(cudaStreamWaitEvent(s[1], done[0], 0));
    scale_add<<<chunk / 256, 256, 0, s[1]>>>(d, chunk, 1.0f, 5.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(h_out, d, chunk * sizeof(float), cudaMemcpyDeviceToHost, s[1]));
    CHECK(cudaStreamSynchronize(s[1]));
    for (int i = 0; i < chunk; i++) ref[i] = h_in[i] * 3.0f + 5.0f;
    compare_exact("waited", h_out, ref, chunk);

    // Host functions run in stream order relative to each other and to the work around them.
    CallbackLog log = {};
    float *dspin;
    CHECK(cudaMalloc(&dspin, 256 * sizeof(float)));
    CHECK(cudaMemset(dspin, 0, 256 * sizeof(float)));
    spin<<<1, 256, 0, s[2]>>>(dspin, 20000);
    CHECK(cudaGetLastError());
    cudaError_t q = cudaStreamQuery(s[2]);
    expect(q == cudaSuccess || q == cudaErrorNotReady, "stream query answers success or not-ready");
    HostFuncArg args[5];
    for (int k = 0; k < 5; k++) {
        args[k] = {&log, 101 + k};
        CHECK(cudaLaunchHostFunc(s[2], host_func, &args[k]));
    }
    CHECK(cudaStreamSynchronize(s[2]));
    CHECK(cudaStreamQuery(s[2]));
    expect(log.count == 5, "five host functions ran");
    for (int k = 0; k < log.count; k++) expect(log.order[k] == 101 + k, "host functions ran in order");

    // A stream created with flags and priority behaves like any other.
    int lo, hi;
    CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t sp;
    CHECK(cudaStreamCreateWithPriority(&sp, cudaStreamNonBlocking, hi));
    unsigned flags = 0; int prio = 0;
    CHECK(cudaStreamGetFlags(sp, &flags));
    CHECK(cudaStreamGetPriority(sp, &prio));
    expect(flags == cudaStreamNonBlocking, "stream flags");
    expect(prio == hi, "stream priority");
    CHECK(cudaMemsetAsync(d, 0, n * sizeof(float), sp));
    CHECK(cudaStreamSynchronize(sp));
    CHECK(cudaMemcpy(h_out, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) ref[i] = 0.0f;
    compare_exact("memsetAsync", h_out, ref, n);
    CHECK(cudaStreamDestroy(sp));

    for (int k = 0; k < nstreams; k++) { CHECK(cudaStreamDestroy(s[k])); CHECK(cudaEventDestroy(done[k])); }
    CHECK(cudaEventDestroy(start)); CHECK(cudaEventDestroy(stop));
    CHECK(cudaFree(d)); CHECK(cudaFree(dspin));
    CHECK(cudaFreeHost(h_in)); CHECK(cudaFreeHost(h_out));
    return finish();
}
