/* The virtual memory API through libcuda.so.1: reserve a range, create physical memory, map two pieces of
 * it, open them to the device, copy and run a kernel over the mapped range, read access back, retain the
 * handle from an address, unmap, release and free; a block shared with another process (this program
 * run again, the descriptor passed over a socket as memMapIPCDrv does); NVIDIA's refusals (an H200's
 * answers) of unaligned sizes and addresses, bad flags, overlapping maps and unreserved ranges.
 * Prints "FAIL ..." per failed check and "ALL PASSED". */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks, failures;
#define CHECK(c) do { checks++; if (!(c)) { failures++; printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); } } while (0)
#define EXPECT(call, want) do { CUresult r_ = (call); checks++; if (r_ != (want)) { failures++; \
    printf("FAIL %s:%d: %s -> %d, want %d\n", __FILE__, __LINE__, #call, (int)r_, (int)(want)); } } while (0)
#define OK(call) EXPECT(call, CUDA_SUCCESS)

static const char *PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry twice(.param .u64 p, .param .u32 n)\n{\n"
    "  .reg .pred %q;\n  .reg .b32 %r<6>;\n  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %tid.x;\n  mov.u32 %r3, %ctaid.x;\n  mov.u32 %r4, %ntid.x;\n"
    "  mad.lo.u32 %r2, %r3, %r4, %r2;\n  setp.ge.u32 %q, %r2, %r1;\n  @%q bra done;\n"
    "  mul.wide.u32 %rd2, %r2, 4;\n  add.u64 %rd3, %rd1, %rd2;\n"
    "  ld.global.u32 %r5, [%rd3];\n  mad.lo.u32 %r5, %r5, 2, 1;\n  st.global.u32 [%rd3], %r5;\n"
    "done:\n  ret;\n}\n";

static CUmemAllocationProp device_prop(int handle_types)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    p.requestedHandleTypes = (CUmemAllocationHandleType)handle_types;
    return p;
}

static CUmemAccessDesc rw(void)
{
    CUmemAccessDesc d;
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
}

/* One byte carrying one descriptor (SCM_RIGHTS), over `iov` and `ctl`. */
struct fd_message { char byte; char ctl[CMSG_SPACE(sizeof(int))]; struct iovec iov; struct msghdr msg; };

static struct msghdr *fd_message(struct fd_message *m)
{
    memset(m, 0, sizeof *m);
    m->iov.iov_base = &m->byte;
    m->iov.iov_len = 1;
    m->msg.msg_iov = &m->iov;
    m->msg.msg_iovlen = 1;
    m->msg.msg_control = m->ctl;
    m->msg.msg_controllen = sizeof m->ctl;
    return &m->msg;
}

static void send_fd(int sock, int fd)
{
    struct fd_message m;
    struct msghdr *msg = fd_message(&m);
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    CHECK(sendmsg(sock, msg, 0) == 1);
}

static int recv_fd(int sock)
{
    struct fd_message m;
    struct msghdr *msg = fd_message(&m);
    if (recvmsg(sock, msg, 0) != 1 || !CMSG_FIRSTHDR(msg))
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(msg)), sizeof(int));
    return fd;
}

/* The other process: imports the block whose descriptor comes over `sock` and adds 5 to its first word. */
static int child(int sock, size_t size)
{
    CUdevice dev;
    CUcontext ctx;
    CUmemGenericAllocationHandle imp;
    CUdeviceptr cva = 0;
    uint32_t w = 0;
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    int fd = recv_fd(sock);
    int ok = fd >= 0 && cuInit(0) == 0 && cuDeviceGet(&dev, 0) == 0 && cuDevicePrimaryCtxRetain(&ctx, dev) == 0
             && cuCtxSetCurrent(ctx) == 0
             && cuMemImportFromShareableHandle(&imp, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0
             && cuMemAddressReserve(&cva, size, 0, 0, 0) == 0 && cuMemMap(cva, size, 0, imp, 0) == 0
             && cuMemSetAccess(cva, size, &acc, 1) == 0 && cuMemcpyDtoH(&w, cva, 4) == 0;
    w += 5;
    ok = ok && cuMemcpyHtoD(cva, &w, 4) == 0 && cuMemUnmap(cva, size) == 0 && cuMemRelease(imp) == 0
         && cuMemAddressFree(cva, size) == 0;
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "child") == 0)
        return child(atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 10));
    CUdevice dev;
    CUcontext ctx;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    int vmm = 0, fd_ok = 0;
    OK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    OK(cuDeviceGetAttribute(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev));
    CHECK(vmm == 1 && fd_ok == 1);
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));

    CUmemAllocationProp prop = device_prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    size_t gran = 0, rec = 0;
    OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    OK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CHECK(gran > 0 && rec % gran == 0);
    EXPECT(cuMemGetAllocationGranularity(&gran, &prop, (CUmemAllocationGranularity_flags)7), CUDA_ERROR_INVALID_VALUE);

    /* two blocks mapped back to back in one reservation */
    size_t size = 2 * gran;
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 2 * size, 0, 0, 0));
    CHECK(va != 0 && va % gran == 0);
    CUmemGenericAllocationHandle h[2];
    OK(cuMemCreate(&h[0], size, &prop, 0));
    OK(cuMemCreate(&h[1], size, &prop, 0));
    EXPECT(cuMemCreate(&h[1], gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemCreate(&h[1], size, &prop, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemMap(va, size, 0, h[0], 0));
    EXPECT(cuMemMap(va, size, 0, h[1], 0), CUDA_ERROR_INVALID_VALUE);          /* already mapped */
    EXPECT(cuMemMap(va + size + 4096, gran, 0, h[1], 0), CUDA_ERROR_NOT_SUPPORTED);   /* unaligned (H200) */
    OK(cuMemMap(va + size, size, 0, h[1], 0));
    CUmemAccessDesc acc = rw();
    OK(cuMemSetAccess(va, 2 * size, &acc, 1));
    unsigned long long flags = 0;
    OK(cuMemGetAccess(&flags, &acc.location, va + size + 8));
    CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* copies and a kernel across the two blocks */
    unsigned n = (unsigned)(2 * size / 4);
    uint32_t *host = malloc((size_t)n * 4), *back = malloc((size_t)n * 4);
    for (unsigned i = 0; i < n; i++) host[i] = i * 2654435761u;
    OK(cuMemcpyHtoD(va, host, (size_t)n * 4));
    CUmodule mod;
    CUfunction fn;
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&fn, mod, "twice"));
    void *args[] = {&va, &n};
    OK(cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(back, va, (size_t)n * 4));
    int bad = 0;
    for (unsigned i = 0; i < n; i++) bad += back[i] != host[i] * 2 + 1;
    CHECK(bad == 0);
    /* the second block's bytes through its own mapping elsewhere */
    CUdeviceptr va2 = 0;
    OK(cuMemAddressReserve(&va2, size, 0, 0, 0));
    OK(cuMemMap(va2, size, 0, h[1], 0));
    OK(cuMemSetAccess(va2, size, &acc, 1));
    uint32_t probe = 0;
    OK(cuMemcpyDtoH(&probe, va2 + 40, 4));
    CHECK(probe == host[size / 4 + 10] * 2 + 1);

    /* retain from an address; properties; the handle outlives cuMemRelease while mapped */
    CUmemGenericAllocationHandle again = 0;
    OK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + size + 64)));
    CHECK(again == h[1]);
    CUmemAllocationProp got;
    OK(cuMemGetAllocationPropertiesFromHandle(&got, h[1]));
    CHECK(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.id == 0 &&
          got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    OK(cuMemRelease(again));
    OK(cuMemRelease(h[1]));
    OK(cuMemcpyDtoH(&probe, va + size + 40, 4));        /* still mapped: still there */
    CHECK(probe == host[size / 4 + 10] * 2 + 1);

    /* another process (this program again) imports block 0 through a descriptor, adds 5 to its first word */
    int fd = -1, sv[2];
    OK(cuMemExportToShareableHandle(&fd, h[0], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char sock[16], bytes[32];
        snprintf(sock, sizeof sock, "%d", sv[1]);
        snprintf(bytes, sizeof bytes, "%zu", size);
        execl("/proc/self/exe", argv[0], "child", sock, bytes, (char *)NULL);
        _exit(2);
    }
    send_fd(sv[0], fd);
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    close(sv[1]);
    OK(cuMemcpyDtoH(&probe, va, 4));
    CHECK(probe == host[0] * 2 + 1 + 5);
    close(fd);

    /* teardown, and what NVIDIA refuses on the way */
    EXPECT(cuMemAddressFree(va, 2 * size), CUDA_ERROR_INVALID_VALUE);      /* still mapped */
    EXPECT(cuMemUnmap(va, size + gran), CUDA_ERROR_INVALID_VALUE);         /* not whole mappings */
    OK(cuMemUnmap(va, 2 * size));
    OK(cuMemUnmap(va2, size));
    EXPECT(cuMemGetAccess(&flags, &acc.location, va), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemRelease(h[0]));
    EXPECT(cuMemRelease(h[0]), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(va, 2 * size));
    OK(cuMemAddressFree(va2, size));
    EXPECT(cuMemAddressFree(va, 2 * size), CUDA_ERROR_INVALID_VALUE);
    OK(cuModuleUnload(mod));
    free(host);
    free(back);
    printf("%d checks, %d failed\n", checks, failures);
    if (!failures)
        printf("ALL PASSED\n");
    return failures != 0;
}
