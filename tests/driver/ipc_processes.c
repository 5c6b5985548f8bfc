/* IPC memory and event handles between two processes through the real libcuda.so.1. The second process is
 * forked before either initialises CUDA (`fork` mode) or started with exec after the first has (`exec`
 * mode, as NVIDIA's simpleIPC does). Each side's kernels spin before they write, so data read after a wait
 * on the other side's event is only right when the wait really waited; every word is checked, buffers are
 * poisoned first. Also: an exporter's cuMemFree while the importer still has the memory open (the importer
 * keeps the bytes, the exporter's next allocation shares nothing), a handle of freed memory, and the
 * errors NVIDIA documents. Prints ALL PASSED (parent) and child ok. Usage: ipc_processes fork|exec SEED */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
static const char *who = "parent";
#define CHECK(c) do { if (!(c)) { failures++; if (failures < 20) printf("%s FAIL line %d: %s\n", who, __LINE__, #c); } } while (0)
#define OK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { printf("%s FAIL %s -> %d\n", who, #call, r_); exit(1); } } while (0)
#define IS(call, want) do { CUresult r_ = (call); if (r_ != (want)) { failures++; printf("%s FAIL %s -> %d, want %d\n", who, #call, r_, want); } } while (0)

static const char PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    /* after thread 0 spun `ns` nanoseconds: p[i] = i * seed + (seed >> 3) for i < n, the block's threads
       striding */
    ".visible .entry slowfill(.param .u64 p, .param .u32 n, .param .u32 seed, .param .u64 ns)\n{\n"
    "  .reg .b32 %r<8>;\n  .reg .b64 %rd<9>;\n  .reg .pred %p;\n"
    "  mov.u32 %r3, %tid.x;\n  setp.ne.u32 %p, %r3, 0;\n  @%p bra GO;\n"
    "  ld.param.u64 %rd4, [ns];\n  mov.u64 %rd5, %globaltimer;\n"
    "SPIN:\n  mov.u64 %rd6, %globaltimer;\n  sub.u64 %rd7, %rd6, %rd5;\n  setp.lt.u64 %p, %rd7, %rd4;\n"
    "  @%p bra SPIN;\n"
    "GO:\n  bar.sync 0;\n  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [n];\n  ld.param.u32 %r2, [seed];\n"
    "  shr.u32 %r6, %r2, 3;\n  mov.u32 %r3, %tid.x;\n  mov.u32 %r7, %ntid.x;\n"
    "LOOP:\n  setp.ge.u32 %p, %r3, %r1;\n  @%p bra DONE;\n"
    "  mad.lo.u32 %r4, %r3, %r2, %r6;\n  mul.wide.u32 %rd2, %r3, 4;\n  add.u64 %rd3, %rd1, %rd2;\n"
    "  st.global.u32 [%rd3], %r4;\n  add.u32 %r3, %r3, %r7;\n  bra LOOP;\n"
    "DONE:\n  ret;\n}\n";

typedef struct {
    CUipcMemHandle big, small, freed;
    CUipcEventHandle event;
    uint32_t n_big, n_small, seed;
} offer_t;

static CUfunction slowfill;
static int rfd, wfd;          /* this side's ends of the two pipes */

static void put(const void *p, size_t n) { if (write(wfd, p, n) != (ssize_t)n) { perror("write"); exit(1); } }
static void get(void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(rfd, (char *)p + got, n - got);
        if (r <= 0) { printf("%s: the other side went away\n", who); exit(1); }
        got += (size_t)r;
    }
}
static void say(char c) { put(&c, 1); }
static void expect(char want) { char c; get(&c, 1); if (c != want) { printf("%s: got '%c', want '%c'\n", who, c, want); exit(1); } }

static void init_cuda(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    OK(cuInit(0));
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, PTX));
    OK(cuModuleGetFunction(&slowfill, mod, "slowfill"));
}

static void fill(CUdeviceptr p, uint32_t n, uint32_t seed, uint64_t ns, CUstream s)
{
    void *args[] = {&p, &n, &seed, &ns};
    OK(cuLaunchKernel(slowfill, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

static int matches(const uint32_t *h, uint32_t n, uint32_t seed)
{
    int bad = 0;
    for (uint32_t i = 0; i < n; i++) bad += h[i] != i * seed + (seed >> 3);
    return bad == 0;
}

static void child(void)
{
    offer_t o;
    CUdeviceptr big, small, again;
    CUevent ev;
    CUstream s;
    who = "child";
    init_cuda();
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    get(&o, sizeof o);
    OK(cuIpcOpenMemHandle(&big, o.big, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    OK(cuIpcOpenMemHandle(&small, o.small, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    OK(cuIpcOpenEventHandle(&ev, o.event));
    IS(cuIpcOpenMemHandle(&again, o.freed, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_HANDLE);
    uint32_t *h = malloc(4ull * o.n_big);
    /* The parent's kernels are still spinning: only a real wait on its event sees their data. */
    memset(h, 0, 4ull * o.n_big);
    OK(cuStreamWaitEvent(s, ev, 0));
    OK(cuMemcpyDtoHAsync(h, big, 4ull * o.n_big, s));
    OK(cuStreamSynchronize(s));
    CHECK(matches(h, o.n_big, o.seed));
    OK(cuEventSynchronize(ev));
    IS(cuEventQuery(ev), CUDA_SUCCESS);
    OK(cuMemcpyDtoH(h, small, 4ull * o.n_small));
    CHECK(matches(h, o.n_small, o.seed + 1));
    /* Opened twice: the same address, counted. */
    OK(cuIpcOpenMemHandle(&again, o.small, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(again == small);
    OK(cuIpcCloseMemHandle(again));
    /* Now this side writes, slowly, and records the parent's event. */
    fill(big, o.n_big, o.seed * 3, 300000000ull, s);
    OK(cuEventRecord(ev, s));
    IS(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    say('R');
    /* The parent frees its allocation: this side keeps the bytes; its next allocation shares nothing. */
    expect('F');
    memset(h, 0, 4ull * o.n_big);
    OK(cuMemcpyDtoH(h, big, 4ull * o.n_big));
    CHECK(matches(h, o.n_big, o.seed * 3));
    say('C');
    expect('N');
    OK(cuMemcpyDtoH(h, big, 4ull * o.n_big));
    CHECK(matches(h, o.n_big, o.seed * 3));
    OK(cuMemcpyDtoH(h, small, 4ull * o.n_small));
    CHECK(matches(h, o.n_small, o.seed + 1));
    OK(cuIpcCloseMemHandle(big));
    OK(cuIpcCloseMemHandle(small));
    IS(cuIpcCloseMemHandle(small), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventDestroy(ev));
    free(h);
    printf("child %s\n", failures ? "FAILED" : "ok");
    fflush(stdout);
    say(failures ? 'X' : 'D');
    exit(failures ? 1 : 0);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "child")) {
        rfd = atoi(argv[2]);
        wfd = atoi(argv[3]);
        child();
    }
    if (argc != 3 || (strcmp(argv[1], "fork") && strcmp(argv[1], "exec"))) {
        fprintf(stderr, "usage: %s fork|exec SEED\n", argv[0]);
        return 2;
    }
    int exec_mode = !strcmp(argv[1], "exec");
    uint32_t seed = (uint32_t)strtoul(argv[2], NULL, 10) | 1;
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent)) { perror("pipe"); return 1; }
    /* the parent's ends stay out of an exec'd child, so that either side sees the other go away */
    fcntl(to_parent[0], F_SETFD, FD_CLOEXEC);
    fcntl(to_child[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = -1;
    if (!exec_mode) {
        pid = fork();       /* before either side has touched CUDA */
        if (pid == 0) {
            close(to_parent[0]);
            close(to_child[1]);
            rfd = to_child[0];
            wfd = to_parent[1];
            child();
        }
    }
    rfd = to_parent[0];
    wfd = to_child[1];
    init_cuda();
    if (exec_mode) {
        pid = fork();       /* after this side initialised CUDA: the child execs at once, as simpleIPC */
        if (pid == 0) {
            char r[16], w[16];
            snprintf(r, sizeof r, "%d", to_child[0]);
            snprintf(w, sizeof w, "%d", to_parent[1]);
            execl("/proc/self/exe", argv[0], "child", r, w, argv[2], (char *)NULL);
            _exit(127);
        }
    }
    close(to_child[0]);
    close(to_parent[1]);
    offer_t o;
    CUdeviceptr big, small, freed, fresh, opened;
    CUevent ev, plain, bad;
    CUstream s;
    memset(&o, 0, sizeof o);
    o.seed = seed;
    o.n_big = (3u << 18) + (seed % 4096);               /* 3 MiB and some: whole pages of its own */
    o.n_small = 100 + seed % 700;                        /* shares its pages with other blocks */
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&big, 4ull * o.n_big));
    OK(cuMemAlloc(&small, 4ull * o.n_small));
    OK(cuMemAlloc(&freed, 1 << 20));
    OK(cuMemsetD32(big, 0xDEADBEEF, o.n_big));
    OK(cuMemsetD32(small, 0xDEADBEEF, o.n_small));
    OK(cuIpcGetMemHandle(&o.freed, freed));
    OK(cuMemFree(freed));
    IS(cuEventCreate(&bad, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    OK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
    IS(cuIpcGetEventHandle(&o.event, plain), CUDA_ERROR_INVALID_VALUE);
    OK(cuIpcGetMemHandle(&o.big, big));
    OK(cuIpcGetMemHandle(&o.small, small + 4 * (o.n_small / 2)));   /* inside: the allocation's handle */
    OK(cuIpcGetEventHandle(&o.event, ev));
    fill(big, o.n_big, seed, 300000000ull, s);
    fill(small, o.n_small, seed + 1, 1000000ull, s);
    OK(cuEventRecord(ev, s));
    IS(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    float ms;
    IS(cuEventElapsedTime(&ms, ev, ev), CUDA_ERROR_INVALID_HANDLE);
    /* This process's own handle, garbage and a pointer that is no import. */
    IS(cuIpcOpenMemHandle(&opened, o.big, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT);
    CUipcMemHandle junk;
    memset(&junk, 0x5A, sizeof junk);
    IS(cuIpcOpenMemHandle(&opened, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
    IS(cuIpcCloseMemHandle(big), CUDA_ERROR_INVALID_VALUE);
    put(&o, sizeof o);
    /* The child records this event behind its own slow kernel: wait for that record in stream order. */
    expect('R');
    uint32_t *h = malloc(4ull * o.n_big);
    memset(h, 0, 4ull * o.n_big);
    OK(cuStreamWaitEvent(s, ev, 0));
    OK(cuMemcpyDtoHAsync(h, big, 4ull * o.n_big, s));
    OK(cuStreamSynchronize(s));
    CHECK(matches(h, o.n_big, seed * 3));
    OK(cuEventSynchronize(ev));
    IS(cuEventQuery(ev), CUDA_SUCCESS);
    OK(cuMemFree(big));
    say('F');
    expect('C');
    /* Likely the same address again: nothing written here may reach the child's mapping. */
    OK(cuMemAlloc(&fresh, 4ull * o.n_big));
    OK(cuMemsetD32(fresh, 0x11111111, o.n_big));
    OK(cuCtxSynchronize());
    say('N');
    char last;
    get(&last, 1);
    CHECK(last == 'D');
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    OK(cuMemFree(small));
    OK(cuMemFree(fresh));
    OK(cuEventDestroy(ev));
    OK(cuEventDestroy(plain));
    free(h);
    printf("%s\n", failures ? "FAILED" : "ALL PASSED");
    return failures ? 1 : 0;
}
