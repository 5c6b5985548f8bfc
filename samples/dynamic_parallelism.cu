// nvcc-flags: -rdc=true -lcudadevrt
// CUDA dynamic parallelism (CDP2) and device-set graph conditions: kernels launching kernels recursively
// with parameters, a parent's writes seen by its children, two children in one stream in order, device
// streams, cudaMemcpyAsync/cudaMemsetAsync from the device in stream order, a tail launch that sees
// everything else its parent launched (children, grandchildren, fire-and-forget) finished, device-side
// cudaGetLastError/cudaPeekAtLastError after a bad launch, and a conditional WHILE graph node driven by
// cudaGraphSetConditional. Every result is checked against a host computation.
#include "sample_common.h"

#define TREE_DEPTH 6                        // a full binary tree of launches: 2^7 - 1 grids
#define TREE_NODES ((1 << (TREE_DEPTH + 1)) - 1)
#define LEAF_WIDTH 37

__device__ int node_value(int node, int depth, int seed) { return node * 7919 + depth * 104729 + seed; }

// Each grid writes its node's values, then launches its two children (heap numbering) with parameters.
__global__ void tree(int *out, int node, int depth, int seed) {
    out[node * LEAF_WIDTH + threadIdx.x] = node_value(node, depth, seed) + (int)threadIdx.x;
    if (threadIdx.x == 0 && depth < TREE_DEPTH) {
        tree<<<1, LEAF_WIDTH>>>(out, 2 * node + 1, depth + 1, seed);
        tree<<<1, LEAF_WIDTH>>>(out, 2 * node + 2, depth + 1, seed ^ 0x55);
    }
}

// --- ordering ------------------------------------------------------------------------------------------
struct Log {
    int parent_data[64];      // written by the parent before it launches `square`
    int squared[64];          // written by `square` from parent_data
    int first;                // set by the first child of the NULL stream
    int second_saw;           // what the second child of the NULL stream saw of `first`
    int done;                 // children and grandchildren finished (atomic)
    int tail_saw_done;        // `done` as the tail launch saw it
    int copied[64];           // cudaMemcpyAsync'd from parent_data in a device stream
    int after_copy_sum;       // what a kernel behind that copy in the same stream summed
    unsigned char filled[64]; // cudaMemsetAsync'd
    int err_peek, err_get, err_after;
};

__global__ void square(Log *log) {
    log->squared[threadIdx.x] = log->parent_data[threadIdx.x] * log->parent_data[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(&log->done, 1);
}

__global__ void set_first(Log *log, int v) {
    log->first = v;
    atomicAdd(&log->done, 1);
}

__global__ void read_first(Log *log) {
    log->second_saw = log->first;
    atomicAdd(&log->done, 1);
}

__global__ void grandchild(Log *log) { atomicAdd(&log->done, 1); }

__global__ void with_grandchild(Log *log) {
    atomicAdd(&log->done, 1);
    grandchild<<<1, 1>>>(log);
}

__global__ void sum_copied(Log *log) {
    int s = 0;
    for (int i = 0; i < 64; i++) s += log->copied[i];
    log->after_copy_sum = s;
    atomicAdd(&log->done, 1);
}

__global__ void tail(Log *log) { log->tail_saw_done = atomicAdd(&log->done, 0); }

__global__ void never(Log *log) { log->done = -1000; }

__global__ void parent(Log *log, int seed) {
    log->parent_data[threadIdx.x] = seed + 3 * (int)threadIdx.x;
    __syncthreads();
    if (threadIdx.x != 0) return;
    square<<<1, 64>>>(log);                                   // NULL stream: 1 to `done`
    set_first<<<1, 1>>>(log, seed);                           // NULL stream, after `square`
    read_first<<<1, 1>>>(log);                                // NULL stream, after `set_first`
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMemcpyAsync(log->copied, log->parent_data, sizeof log->copied, cudaMemcpyDeviceToDevice, s);
    sum_copied<<<1, 1, 0, s>>>(log);                          // behind the copy in `s`
    cudaMemsetAsync(log->filled, seed & 0xff, sizeof log->filled, s);
    cudaStreamDestroy(s);
    with_grandchild<<<1, 1, 0, cudaStreamFireAndForget>>>(log); // 2 to `done`
    tail<<<1, 1, 0, cudaStreamTailLaunch>>>(log);             // after all of the above
    // a launch the device runtime must refuse: 2048 threads in a block
    never<<<1, 2048>>>(log);
    log->err_peek = (int)cudaPeekAtLastError();
    log->err_get = (int)cudaGetLastError();
    log->err_after = (int)cudaGetLastError();
}

// --- a conditional WHILE node: the body runs while its kernel sets the condition ------------------------
__global__ void loop_body(int *state, cudaGraphConditionalHandle handle) {
    // state[0]: countdown, state[1]: running sum of the countdown values, state[2]: iterations
    state[1] += state[0] * state[0];
    state[2] += 1;
    state[0] -= 1;
    cudaGraphSetConditional(handle, state[0] > 0);
}

__global__ void loop_prepare(int *state, int start, cudaGraphConditionalHandle handle) {
    state[0] = start;
    state[1] = 0;
    state[2] = 0;
    cudaGraphSetConditional(handle, start > 0);
}

static void check_tree(int seed) {
    int *d_out;
    CHECK(cudaMalloc(&d_out, TREE_NODES * LEAF_WIDTH * sizeof(int)));
    CHECK(cudaMemset(d_out, 0xA5, TREE_NODES * LEAF_WIDTH * sizeof(int)));
    tree<<<1, LEAF_WIDTH>>>(d_out, 0, 0, seed);
    CHECK_LAUNCH();
    int *got = (int *)malloc(TREE_NODES * LEAF_WIDTH * sizeof(int));
    int *want = (int *)malloc(TREE_NODES * LEAF_WIDTH * sizeof(int));
    CHECK(cudaMemcpy(got, d_out, TREE_NODES * LEAF_WIDTH * sizeof(int), cudaMemcpyDeviceToHost));
    // the host walks the same tree: node, depth and the seed each node was launched with
    int seeds[TREE_NODES], depths[TREE_NODES];
    seeds[0] = seed;
    depths[0] = 0;
    for (int n = 0; n < TREE_NODES; n++) {
        for (int t = 0; t < LEAF_WIDTH; t++)
            want[n * LEAF_WIDTH + t] = n * 7919 + depths[n] * 104729 + seeds[n] + t;
        if (depths[n] < TREE_DEPTH) {
            seeds[2 * n + 1] = seeds[n];
            seeds[2 * n + 2] = seeds[n] ^ 0x55;
            depths[2 * n + 1] = depths[2 * n + 2] = depths[n] + 1;
        }
    }
    compare_exact("tree", got, want, TREE_NODES * LEAF_WIDTH);
    free(got);
    free(want);
    CHECK(cudaFree(d_out));
}

static void check_order(int seed) {
    Log *d_log, h;
    CHECK(cudaMalloc(&d_log, sizeof(Log)));
    CHECK(cudaMemset(d_log, 0, sizeof(Log)));
    parent<<<1, 64>>>(d_log, seed);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(&h, d_log, sizeof h, cudaMemcpyDeviceToHost));
    int want_sq[64], want_copied[64], sum = 0;
    for (int i = 0; i < 64; i++) {
        int v = seed + 3 * i;
        want_sq[i] = v * v;
        want_copied[i] = v;
        sum += v;
    }
    compare_exact("squared", h.squared, want_sq, 64);
    compare_exact("copied", h.copied, want_copied, 64);
    unsigned char want_fill[64];
    memset(want_fill, seed & 0xff, sizeof want_fill);
    for (int i = 0; i < 64; i++)
        if (h.filled[i] != want_fill[i]) report_mismatch("filled", i, "?", "seed byte");
    compare_exact("second child saw the first's write", &h.second_saw, &seed, 1);
    compare_exact("sum behind the device copy", &h.after_copy_sum, &sum, 1);
    int want_done = 6;      // square, set_first, read_first, sum_copied, with_grandchild and its grandchild
    compare_exact("children done", &h.done, &want_done, 1);
    compare_exact("what the tail launch saw", &h.tail_saw_done, &want_done, 1);
    // the refused launch: an error the device runtime reports, peeked then taken, then cleared
    if (h.err_peek == 0) report_mismatch("device cudaPeekAtLastError after a 2048-thread launch", 0, "0", "an error");
    compare_exact("device cudaGetLastError", &h.err_get, &h.err_peek, 1);
    int zero = 0;
    compare_exact("device cudaGetLastError again", &h.err_after, &zero, 1);
    CHECK(cudaFree(d_log));
}

static void check_while_graph(int start) {
    int *d_state;
    CHECK(cudaMalloc(&d_state, 3 * sizeof(int)));
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
    cudaGraphNode_t prep, cond, body;
    cudaGraphNodeParams kp = {cudaGraphNodeTypeKernel};
    void *prep_args[] = {&d_state, &start, &handle};
    kp.kernel.func = (void *)loop_prepare;
    kp.kernel.gridDim = dim3(1);
    kp.kernel.blockDim = dim3(1);
    kp.kernel.kernelParams = prep_args;
    CHECK(cudaGraphAddNode(&prep, graph, NULL, NULL, 0, &kp));
    cudaGraphNodeParams cp = {cudaGraphNodeTypeConditional};
    cp.conditional.handle = handle;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    CHECK(cudaGraphAddNode(&cond, graph, &prep, NULL, 1, &cp));
    void *body_args[] = {&d_state, &handle};
    kp.kernel.func = (void *)loop_body;
    kp.kernel.kernelParams = body_args;
    CHECK(cudaGraphAddNode(&body, cp.conditional.phGraph_out[0], NULL, NULL, 0, &kp));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int round = 0; round < 2; round++) {
        CHECK(cudaMemset(d_state, 0xEE, 3 * sizeof(int)));
        CHECK(cudaGraphLaunch(exec, 0));
        CHECK(cudaDeviceSynchronize());
        int got[3], want[3] = {0, 0, start};
        for (int v = start; v > 0; v--) want[1] += v * v;
        CHECK(cudaMemcpy(got, d_state, sizeof got, cudaMemcpyDeviceToHost));
        compare_exact("while graph", got, want, 3);
    }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(d_state));
}

int main() {
    Rng rng(2024);
    int seed = rng.range(1, 1 << 20);
    check_tree(seed);
    check_order(seed & 0xffff);
    check_while_graph(rng.range(5, 40));
    printf("%d grids in the launch tree; %s\n", TREE_NODES, g_failures ? "mismatches above" : "all checked");
    printf("%s\n", g_failures ? "FAIL" : "PASS");
    return g_failures ? 1 : 0;
}
