// Unified memory: cudaMallocManaged buffers touched by host and device in turn, __managed__
// variables, a linked list of managed nodes walked by the device, and pointer attributes.
#include "sample_common.h"

__managed__ int m_calls = 0;
__managed__ float m_scale = 1.0f;

__global__ void update(float *x, int n, int round) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * m_scale + (float)round;
    if (i == 0) atomicAdd(&m_calls, 1);
}

struct Node { int value; Node *next; };

// Walks a linked list built on the host in managed memory: the pointers are the same on both sides.
__global__ void walk_list(Node *head, int *sum, int *count) {
    int s = 0, c = 0;
    for (Node *p = head; p; p = p->next) { s += p->value; c++; p->value *= 2; }
    *sum = s; *count = c;
}

int main() {
    int dev = 0, managed = 0;
    CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, dev));
    expect(managed == 1, "device supports managed memory");
    const int n = 1 << 18;
    float *x;
    CHECK(cudaMallocManaged(&x, n * sizeof(float)));
    float *ref = new float[n];
    Rng rng(15);
    for (int i = 0; i < n; i++) x[i] = ref[i] = (float)rng.range(-1000, 1000);
    for (int round = 1; round <= 3; round++) {
        m_scale = (float)round;  // host writes the managed variable between launches
        update<<<(n + 255) / 256, 256>>>(x, n, round);
        CHECK_LAUNCH();
        for (int i = 0; i < n; i++) ref[i] = ref[i] * (float)round + (float)round;
        // The host reads the device's results in place and changes some before the next round.
        for (int i = 0; i < n; i += 1000) { x[i] += 1.0f; ref[i] += 1.0f; }
    }
    compare_exact("x", x, ref, n);
    expect(m_calls == 3, "managed counter incremented by each launch");

    cudaPointerAttributes attr;
    CHECK(cudaPointerGetAttributes(&attr, x));
    expect(attr.type == cudaMemoryTypeManaged, "pointer attributes say managed");
    expect(attr.devicePointer == x && attr.hostPointer == x, "managed pointer is the same on host and device");

    // A list of nodes, each its own managed allocation.
    const int nodes = 100;
    Node *head = nullptr;
    int ref_sum = 0;
    Node *all[nodes];
    for (int k = 0; k < nodes; k++) {
        Node *nd;
        CHECK(cudaMallocManaged(&nd, sizeof(Node), cudaMemAttachGlobal));
        nd->value = rng.range(-100, 100);
        ref_sum += nd->value;
        nd->next = head;
        head = nd;
        all[k] = nd;
    }
    int *res;
    CHECK(cudaMallocManaged(&res, 2 * sizeof(int)));
    res[0] = res[1] = -1;
    walk_list<<<1, 1>>>(head, &res[0], &res[1]);
    CHECK_LAUNCH();
    expect(res[0] == ref_sum, "list sum");
    expect(res[1] == nodes, "list length");
    int doubled = 0;
    for (Node *p = head; p; p = p->next) doubled += p->value;
    expect(doubled == 2 * ref_sum, "device writes through list pointers are visible to the host");
    if (res[0] != ref_sum) printf("list sum %d want %d\n", res[0], ref_sum);

    for (int k = 0; k < nodes; k++) CHECK(cudaFree(all[k]));
    CHECK(cudaFree(res));
    CHECK(cudaFree(x));
    return finish();
}
