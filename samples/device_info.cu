// Device and version queries: cudaGetDeviceCount, cudaGetDeviceProperties vs cudaDeviceGetAttribute
// (they must agree), cudaDriverGetVersion/cudaRuntimeGetVersion, cudaMemGetInfo around an
// allocation, cudaDeviceGetLimit/SetLimit, cudaChooseDevice, cudaDeviceGetPCIBusId round trip.
#include "sample_common.h"

__global__ void warp_size_kernel(int *out) { out[threadIdx.x] = warpSize; }

int main() {
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    expect(count >= 1, "at least one device");
    int drv = 0, rt = 0;
    CHECK(cudaDriverGetVersion(&drv));
    CHECK(cudaRuntimeGetVersion(&rt));
    printf("devices: %d, driver %d, runtime %d\n", count, drv, rt);
    expect(rt >= 13000, "runtime is CUDA 13");
    expect(drv >= rt, "the driver is at least as new as the runtime");
    CHECK(cudaSetDevice(0));
    int cur = -1;
    CHECK(cudaGetDevice(&cur));
    expect(cur == 0, "current device");
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    printf("name: %s, cc %d.%d, SMs %d, global %zu MiB\n", p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem >> 20);
    struct { cudaDeviceAttr attr; int prop; const char *what; } pairs[] = {
        {cudaDevAttrComputeCapabilityMajor, p.major, "major"},
        {cudaDevAttrComputeCapabilityMinor, p.minor, "minor"},
        {cudaDevAttrMultiProcessorCount, p.multiProcessorCount, "SM count"},
        {cudaDevAttrMaxThreadsPerBlock, p.maxThreadsPerBlock, "max threads per block"},
        {cudaDevAttrWarpSize, p.warpSize, "warp size"},
        {cudaDevAttrMaxBlockDimX, p.maxThreadsDim[0], "max block x"},
        {cudaDevAttrMaxBlockDimZ, p.maxThreadsDim[2], "max block z"},
        {cudaDevAttrMaxGridDimX, p.maxGridSize[0], "max grid x"},
        {cudaDevAttrMaxGridDimY, p.maxGridSize[1], "max grid y"},
        {cudaDevAttrMaxSharedMemoryPerBlock, (int)p.sharedMemPerBlock, "shared per block"},
        {cudaDevAttrMaxSharedMemoryPerBlockOptin, (int)p.sharedMemPerBlockOptin, "shared opt-in"},
        {cudaDevAttrMaxRegistersPerBlock, p.regsPerBlock, "registers per block"},
        {cudaDevAttrMaxThreadsPerMultiProcessor, p.maxThreadsPerMultiProcessor, "threads per SM"},
        {cudaDevAttrTotalConstantMemory, (int)p.totalConstMem, "constant memory"},
        {cudaDevAttrUnifiedAddressing, p.unifiedAddressing, "unified addressing"},
        {cudaDevAttrManagedMemory, p.managedMemory, "managed memory"},
        {cudaDevAttrConcurrentKernels, p.concurrentKernels, "concurrent kernels"},
        {cudaDevAttrPciBusId, p.pciBusID, "PCI bus"},
        {cudaDevAttrL2CacheSize, p.l2CacheSize, "L2 size"},
    };
    for (auto &pr : pairs) {
        int v = -12345;
        CHECK(cudaDeviceGetAttribute(&v, pr.attr, 0));
        if (v != pr.prop) { printf("attribute %s = %d, property = %d\n", pr.what, v, pr.prop); g_failures++; }
    }
    expect(p.warpSize == 32, "warp size 32");
    expect(p.maxThreadsPerBlock == 1024, "1024 threads per block");
    expect(p.maxThreadsDim[0] == 1024 && p.maxThreadsDim[1] == 1024 && p.maxThreadsDim[2] == 64, "block dims");
    expect(p.maxGridSize[0] == 2147483647 && p.maxGridSize[1] == 65535 && p.maxGridSize[2] == 65535, "grid dims");
    expect(p.sharedMemPerBlock == 48 * 1024, "48 KiB default shared memory per block");
    expect(p.totalConstMem == 64 * 1024, "64 KiB constant memory");
    expect(p.major >= 7, "compute capability 7.0 or newer");

    // The kernel sees the same warp size.
    int *dws, ws[64];
    CHECK(cudaMalloc(&dws, sizeof(ws)));
    warp_size_kernel<<<1, 64>>>(dws);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(ws, dws, sizeof(ws), cudaMemcpyDeviceToHost));
    for (int k = 0; k < 64; k++) expect(ws[k] == 32, "warpSize in a kernel");

    size_t free0 = 0, total = 0, free1 = 0;
    CHECK(cudaMemGetInfo(&free0, &total));
    expect(free0 <= total && total > 0, "free <= total");
    expect(total <= p.totalGlobalMem + (64ull << 20), "total memory agrees with the properties");
    void *big;
    CHECK(cudaMalloc(&big, 256 << 20));
    CHECK(cudaMemGetInfo(&free1, &total));
    printf("free before %zu MiB, after a 256 MiB allocation %zu MiB\n", free0 >> 20, free1 >> 20);
    expect(free1 <= free0, "an allocation does not increase free memory");
    CHECK(cudaFree(big));

    size_t stack = 0, heap = 0, fifo = 0;
    CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 4096));
    CHECK(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
    CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    CHECK(cudaDeviceGetLimit(&fifo, cudaLimitPrintfFifoSize));
    expect(stack >= 4096, "stack limit was raised");
    expect(heap > 0 && fifo > 0, "heap and printf FIFO sizes");

    char bus[64];
    CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0));
    int back = -1;
    CHECK(cudaDeviceGetByPCIBusId(&back, bus));
    expect(back == 0, "PCI bus id round trip");
    printf("PCI bus id: %s\n", bus);

    cudaDeviceProp want;
    memset(&want, 0, sizeof(want));
    want.major = p.major;
    int chosen = -1;
    CHECK(cudaChooseDevice(&chosen, &want));
    expect(chosen >= 0 && chosen < count, "cudaChooseDevice picks a device");
    CHECK(cudaFree(dws));
    return finish();
}
