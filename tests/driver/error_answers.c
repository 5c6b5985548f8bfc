/* The answers a program can observe from the driver when things go wrong: sticky faults (700, 719, 710) and
 * what they poison, a primary context used after its last release, odd arguments, cuLaunchKernel's
 * kernelParams/extra abuse, and which thread runs host functions. The same binary ran on NVIDIA's driver
 * (tests/data/nvidia_error_answers.json) and runs on the shim (tests/driver/test_error_answers.py).
 * `error_answers` with no argument runs every case in its own process (a fault poisons the process) and
 * prints "case.step code" lines; `error_answers CASE` runs one case in this process. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The forms every driver since CUDA 12.0 exports, whatever cuda.h this is compiled against. */
#undef cuCtxCreate
#undef cuEventElapsedTime
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent start, CUevent end);
#define cuCtxCreate cuCtxCreate_v2

static const char *cur;
/* "case.step code" and, for a call, the function called (for the log check) */
static void report(const char *step, int code, const char *call) {
    printf("%s.%s %d", cur, step, code);
    static const char ident[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    if (call) printf(" %.*s", (int)strspn(call, ident), call);
    printf("\n");
}
#define R(step, call) report(step, (int)(call), #call)
#define V(step, val) report(step, (int)(val), NULL)

/* fault(out, v, bad): out[0] = v; when bad, also *bad = v (the wild store).  trap(): trap.  boom(): a failed
   device assert.  none(): nothing, no parameters. */
static const char *PTX =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".extern .func __assertfail(.param .b64 a, .param .b64 b, .param .b32 c, .param .b64 d, .param .b64 e);\n"
    ".global .align 1 .b8 msg[2] = {65, 0};\n"
    ".visible .entry fault(.param .u64 out, .param .u32 v, .param .u64 bad)\n{\n"
    "  .reg .pred %p1;\n  .reg .b32 %r1;\n  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [out];\n  ld.param.u32 %r1, [v];\n  ld.param.u64 %rd2, [bad];\n"
    "  st.global.u32 [%rd1], %r1;\n  setp.eq.u64 %p1, %rd2, 0;\n  @%p1 bra DONE;\n"
    "  st.global.u32 [%rd2], %r1;\nDONE:\n  ret;\n}\n"
    ".visible .entry trap()\n{\n  trap;\n  ret;\n}\n"
    ".visible .entry boom()\n{\n  .reg .b64 %rd<2>;\n"
    "  mov.u64 %rd1, msg;\n  cvta.global.u64 %rd1, %rd1;\n"
    "  {\n  .param .b64 p0;\n  st.param.b64 [p0], %rd1;\n  .param .b64 p1;\n  st.param.b64 [p1], %rd1;\n"
    "  .param .b32 p2;\n  st.param.b32 [p2], 1;\n  .param .b64 p3;\n  st.param.b64 [p3], %rd1;\n"
    "  .param .b64 p4;\n  st.param.b64 [p4], 1;\n"
    "  call.uni __assertfail, (p0, p1, p2, p3, p4);\n  }\n  ret;\n}\n"
    ".visible .entry none()\n{\n  ret;\n}\n";

static CUdevice dev;
static CUcontext pctx;
static CUmodule mod;
static CUfunction f_fault, f_trap, f_boom, f_none;

static void setup(void) {
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&pctx, dev) || cuCtxSetCurrent(pctx)) {
        printf("%s.setup FAILED\n", cur);
        exit(1);
    }
}

static CUresult load(void) {
    CUresult r = cuModuleLoadData(&mod, PTX);
    if (!r) r = cuModuleGetFunction(&f_fault, mod, "fault");
    if (!r) r = cuModuleGetFunction(&f_trap, mod, "trap");
    if (!r) r = cuModuleGetFunction(&f_boom, mod, "boom");
    if (!r) r = cuModuleGetFunction(&f_none, mod, "none");
    return r;
}

static CUresult run_fault(CUdeviceptr out, uint64_t bad) {
    unsigned v = 7;
    void *args[] = {&out, &v, &bad};
    return cuLaunchKernel(f_fault, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL);
}

/* --- sticky faults: which calls answer the fault afterwards ------------------------------------------ */
static void after_fault(CUdeviceptr d) {
    CUdeviceptr d2 = 0;
    uint32_t h[2];
    size_t fr, tot;
    CUstream s;
    CUevent e;
    CUmodule m2;
    CUdevice dv;
    unsigned ver;
    int attr;
    CUcontext c2 = NULL, got;
    R("sync", cuCtxSynchronize());
    R("sync_again", cuCtxSynchronize());
    R("stream_query", cuStreamQuery(0));
    R("mem_alloc", cuMemAlloc(&d2, 64));
    R("memcpy_dtoh", cuMemcpyDtoH(h, d, sizeof h));
    R("launch", run_fault(d, 0));
    R("stream_create", cuStreamCreate(&s, 0));
    R("event_create", cuEventCreate(&e, 0));
    R("module_load", cuModuleLoadData(&m2, PTX));
    R("ctx_get_device", cuCtxGetDevice(&dv));
    R("ctx_get_current", cuCtxGetCurrent(&got));
    V("ctx_current_is_primary", got == pctx);
    R("ctx_api_version", cuCtxGetApiVersion(pctx, &ver));
    R("mem_get_info", cuMemGetInfo(&fr, &tot));
    R("device_attribute", cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
    R("mem_free", cuMemFree(d));
    R("ctx_create", cuCtxCreate(&c2, 0, dev));
    R("ctx_create.mem_alloc", cuMemAlloc(&d2, 64));
    R("ctx_create.module_load", cuModuleLoadData(&m2, PTX));
    R("ctx_create.sync", cuCtxSynchronize());
    if (c2) R("ctx_destroy", cuCtxDestroy(c2));
    R("set_current_primary", cuCtxSetCurrent(pctx));
    R("primary_release", cuDevicePrimaryCtxRelease(dev));
    R("primary_reset", cuDevicePrimaryCtxReset(dev));
    c2 = NULL;
    R("primary_retain", cuDevicePrimaryCtxRetain(&c2, dev));
    if (c2) {
        R("retained.set_current", cuCtxSetCurrent(c2));
        R("retained.mem_alloc", cuMemAlloc(&d2, 64));
        R("retained.sync", cuCtxSynchronize());
    }
    R("init_again", cuInit(0));
    R("device_get", cuDeviceGet(&dv, 0));
}

/* Straight to a reset after the fault: does a reset primary context work again? */
static void case_fault_reset(void) {
    setup();
    R("load", load());
    CUdeviceptr d, d2;
    R("alloc", cuMemAlloc(&d, 64));
    R("fault_launch", run_fault(d, 0x10));
    R("sync", cuCtxSynchronize());
    R("primary_reset", cuDevicePrimaryCtxReset(dev));
    R("get_current_after_reset", cuCtxGetCurrent(&pctx));
    CUcontext c = NULL;
    R("primary_retain", cuDevicePrimaryCtxRetain(&c, dev));
    V("retain_gave_context", c != NULL);
    if (c) {
        R("set_current", cuCtxSetCurrent(c));
        R("mem_alloc", cuMemAlloc(&d2, 64));
        R("sync_after", cuCtxSynchronize());
    }
    R("primary_release", cuDevicePrimaryCtxRelease(dev));
}

static void case_fault(int kind) {
    setup();
    R("load", load());
    CUdeviceptr d;
    R("alloc", cuMemAlloc(&d, 64));
    CUresult r = kind == 700 ? run_fault(d, 0x10)
               : cuLaunchKernel(kind == 719 ? f_trap : f_boom, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL);
    R("fault_launch", r);
    after_fault(d);
}

/* The fault in a created context: what the primary context (made before the fault) answers after. */
static void case_fault_created(void) {
    setup();
    R("load_primary", load());
    CUfunction prim_fault = f_fault;
    CUdeviceptr dp;
    R("alloc_primary", cuMemAlloc(&dp, 64));
    CUcontext c;
    R("ctx_create", cuCtxCreate(&c, 0, dev));
    R("load", load());
    CUdeviceptr d;
    R("alloc", cuMemAlloc(&d, 64));
    R("fault_launch", run_fault(d, 0x10));
    R("sync", cuCtxSynchronize());
    R("set_current_primary", cuCtxSetCurrent(pctx));
    R("primary.sync", cuCtxSynchronize());
    CUdeviceptr d2;
    R("primary.mem_alloc", cuMemAlloc(&d2, 64));
    unsigned v = 1;
    uint64_t bad = 0;
    void *args[] = {&dp, &v, &bad};
    R("primary.launch", cuLaunchKernel(prim_fault, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
    R("primary.sync_after_launch", cuCtxSynchronize());
    R("ctx_destroy", cuCtxDestroy(c));
}

/* --- a primary context after its last release ----------------------------------------------------- */
static void case_released(void) {
    setup();
    R("load", load());
    CUdeviceptr d, d2;
    R("alloc", cuMemAlloc(&d, 64));
    R("release", cuDevicePrimaryCtxRelease(dev));
    CUcontext got;
    R("get_current", cuCtxGetCurrent(&got));
    V("current_is_primary", got == pctx);
    R("mem_alloc", cuMemAlloc(&d2, 64));
    R("sync", cuCtxSynchronize());
    CUstream s;
    R("stream_create", cuStreamCreate(&s, 0));
    CUdevice dv;
    R("ctx_get_device", cuCtxGetDevice(&dv));
    unsigned ver;
    R("api_version", cuCtxGetApiVersion(pctx, &ver));
    R("push", cuCtxPushCurrent(pctx));
    R("push.mem_alloc", cuMemAlloc(&d2, 64));
    R("pop", cuCtxPopCurrent(&got));
    R("release_again", cuDevicePrimaryCtxRelease(dev));
    R("set_current", cuCtxSetCurrent(pctx));
    R("set_current.mem_alloc", cuMemAlloc(&d2, 64));
    R("set_current.launch", cuLaunchKernel(f_none, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
    CUcontext c2;
    R("retain", cuDevicePrimaryCtxRetain(&c2, dev));
    V("retain_same_handle", c2 == pctx);
    R("retained.set_current", cuCtxSetCurrent(c2));
    /* before the next allocation, which may reuse the address here (NVIDIA ran it after) */
    R("retained.free_from_before", cuMemFree(d));
    R("retained.mem_alloc", cuMemAlloc(&d2, 64));
    R("retained.launch_old_function", cuLaunchKernel(f_none, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
    R("retained.sync", cuCtxSynchronize());
}

/* --- odd arguments -------------------------------------------------------------------------------- */
static void case_args(void) {
    setup();
    CUdeviceptr d, base;
    size_t sz;
    R("alloc_1m", cuMemAlloc(&d, 1 << 20));
    R("range_end_1m", cuMemGetAddressRange(&base, &sz, d + (1 << 20)));
    R("range_last_1m", cuMemGetAddressRange(&base, &sz, d + (1 << 20) - 1));
    CUdeviceptr d1000;
    R("alloc_1000", cuMemAlloc(&d1000, 1000));
    R("range_end_1000", cuMemGetAddressRange(&base, &sz, d1000 + 1000));
    R("range_last_1000", cuMemGetAddressRange(&base, &sz, d1000 + 999));
    R("range_null_both", cuMemGetAddressRange(NULL, NULL, d1000));
    R("push_null", cuCtxPushCurrent(NULL));
    CUcontext got;
    R("pop_after_push_null", cuCtxPopCurrent(&got));
    R("pop_now_empty", cuCtxPopCurrent(&got));
    R("push_null_empty", cuCtxPushCurrent(NULL));
    R("set_current_back", cuCtxSetCurrent(pctx));

    CUevent e1, e2, e3;
    float ms;
    cuEventCreate(&e1, 0);
    cuEventCreate(&e2, 0);
    cuEventCreate(&e3, 0);
    R("elapsed_unrecorded", cuEventElapsedTime(&ms, e1, e2));
    cuEventRecord(e1, 0);
    cuEventRecord(e2, 0);
    cuEventSynchronize(e2);
    R("elapsed_null_ms", cuEventElapsedTime(NULL, e1, e2));
    R("elapsed_null_start", cuEventElapsedTime(&ms, NULL, e2));
    R("elapsed_null_end", cuEventElapsedTime(&ms, e1, NULL));
    R("elapsed_end_unrecorded", cuEventElapsedTime(&ms, e1, e3));
    R("elapsed_ok", cuEventElapsedTime(&ms, e1, e2));

    R("load", load());
    CUfunction fn;
    R("get_function_empty", cuModuleGetFunction(&fn, mod, ""));
    R("get_function_missing", cuModuleGetFunction(&fn, mod, "nosuch"));
    R("get_function_null_name", cuModuleGetFunction(&fn, mod, NULL));
    R("get_function_null_out", cuModuleGetFunction(NULL, mod, "fault"));
    CUmodule m;
    R("module_load_dir", cuModuleLoad(&m, "/"));
    R("module_load_missing", cuModuleLoad(&m, "/nonexistent/none.ptx"));
    char tmpl[] = "/tmp/error_answers_XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    R("module_load_empty_file", cuModuleLoad(&m, tmpl));
    unlink(tmpl);

    void *p;
    R("host_alloc_0", cuMemHostAlloc(&p, 0, 0));
    R("alloc_host_0", cuMemAllocHost(&p, 0));
    R("mem_alloc_0", cuMemAlloc(&d, 0));
    R("managed_0", cuMemAllocManaged(&d, 0, CU_MEM_ATTACH_GLOBAL));
    R("sync", cuCtxSynchronize());
}

/* --- cuLaunchKernel's kernelParams / extra ------------------------------------------------------ */
struct packed { uint64_t out; uint32_t v; uint32_t pad; };

static void launch_case(const char *which) {
    setup();
    R("load", load());
    CUdeviceptr d;
    R("alloc", cuMemAlloc(&d, 64));
    cuMemsetD32(d, 0, 16);
    unsigned v = 7;
    uint64_t bad = 0;
    void *args[] = {&d, &v, &bad};
    struct { uint64_t out; uint32_t v; uint32_t pad; uint64_t bad; } buf = {d, 7, 0, 0};
    size_t sz = sizeof buf, small = 8, large = 64, twelve = 20;
    void *ok[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz, CU_LAUNCH_PARAM_END};
    CUresult r = 999;
    CUfunction f = f_fault;
    void **kp = NULL, **ex = NULL;
    /* a missing END: the array goes on with words that are no key */
    void *no_end[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz,
                      (void *)0x7777, (void *)0x7777, (void *)0x7777, (void *)0x7777, NULL};
    void *small_sz[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                        CU_LAUNCH_PARAM_END};
    void *large_sz[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &large,
                        CU_LAUNCH_PARAM_END};
    void *unpadded[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &twelve,
                        CU_LAUNCH_PARAM_END};
    void *no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_END};
    void *no_ptr[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &sz, CU_LAUNCH_PARAM_END};
    void *empty[] = {CU_LAUNCH_PARAM_END};
    void *unknown[] = {(void *)0x5, &buf, CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz,
                       CU_LAUNCH_PARAM_END};
    void *null_buf[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, NULL, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz,
                        CU_LAUNCH_PARAM_END};
    void *null_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, NULL,
                         CU_LAUNCH_PARAM_END};
    void *twice[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_POINTER, &buf,
                     CU_LAUNCH_PARAM_BUFFER_SIZE, &sz, CU_LAUNCH_PARAM_END};
    size_t zero = 0;
    void *none_zero[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &zero,
                         CU_LAUNCH_PARAM_END};
    void *args_null_entry[] = {&d, NULL, &bad};
    if (!strcmp(which, "ok_params")) kp = args;
    else if (!strcmp(which, "ok_extra")) ex = ok;
    else if (!strcmp(which, "both")) kp = args, ex = ok;
    else if (!strcmp(which, "neither")) ;
    else if (!strcmp(which, "extra_no_end")) ex = no_end;
    else if (!strcmp(which, "extra_size_small")) ex = small_sz;
    else if (!strcmp(which, "extra_size_large")) ex = large_sz;
    else if (!strcmp(which, "extra_size_unpadded")) ex = unpadded;
    else if (!strcmp(which, "extra_no_size")) ex = no_size;
    else if (!strcmp(which, "extra_no_pointer")) ex = no_ptr;
    else if (!strcmp(which, "extra_empty")) ex = empty;
    else if (!strcmp(which, "extra_unknown_key")) ex = unknown;
    else if (!strcmp(which, "extra_null_buffer")) ex = null_buf;
    else if (!strcmp(which, "extra_null_size")) ex = null_size;
    else if (!strcmp(which, "extra_pointer_twice")) ex = twice;
    else if (!strcmp(which, "params_null_entry")) kp = args_null_entry;
    else if (!strcmp(which, "noparam_neither")) f = f_none;
    else if (!strcmp(which, "noparam_params")) f = f_none, kp = args;
    else if (!strcmp(which, "noparam_extra_empty")) f = f_none, ex = empty;
    else if (!strcmp(which, "noparam_extra_size0")) f = f_none, ex = none_zero;
    else if (!strcmp(which, "noparam_extra_buffer")) f = f_none, ex = ok;
    fflush(stdout);
    r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, kp, ex);
    R("launch", r);
    R("sync", cuCtxSynchronize());
    uint32_t h = 0;
    if (cuMemcpyDtoH(&h, d, 4) == CUDA_SUCCESS) V("wrote", h == 7);
}

static const char *LAUNCH_CASES[] = {
    "ok_params", "ok_extra", "both", "neither", "extra_no_end", "extra_size_small", "extra_size_large",
    "extra_size_unpadded", "extra_no_size", "extra_no_pointer", "extra_empty", "extra_unknown_key",
    "extra_null_buffer", "extra_null_size", "extra_pointer_twice", "params_null_entry", "noparam_neither",
    "noparam_params", "noparam_extra_empty", "noparam_extra_size0", "noparam_extra_buffer", NULL};

/* --- host functions: on which thread, and may they wait for the caller ----------------------------- */
static volatile int go, ran;
static long cb_tid;

static void CUDA_CB host_fn(void *arg) {
    (void)arg;
    cb_tid = syscall(SYS_gettid);
    for (int i = 0; i < 500 && !go; i++) usleep(10000);     /* gives up after 5 s: no hang, a wrong answer */
    ran = go ? 1 : 2;
}

static void CUDA_CB stream_cb(CUstream s, CUresult status, void *arg) {
    (void)s, (void)status;
    host_fn(arg);
}

static void case_host_fn(int callback) {
    setup();
    CUstream s;
    R("stream_create", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    go = ran = 0;
    R("enqueue", callback ? cuStreamAddCallback(s, stream_cb, NULL, 0) : cuLaunchHostFunc(s, host_fn, NULL));
    /* the callback waits for us: a query must answer NOT_READY, not run it here */
    R("query_before_signal", cuStreamQuery(s));
    go = 1;
    R("sync", cuStreamSynchronize(s));
    V("ran_after_signal", ran == 1);
    V("other_thread", cb_tid != 0 && cb_tid != syscall(SYS_gettid));
}

/* --- the driver --------------------------------------------------------------------------------- */
static void case_info(void) {
    int ver = 0;
    char nm[256] = "";
    cuInit(0);
    cuDriverGetVersion(&ver);
    cuDeviceGet(&dev, 0);
    cuDeviceGetName(nm, sizeof nm, dev);
    printf("info.device %s\ninfo.driver_version %d\n", nm, ver);
}

static const char *CASES[] = {"info", "fault700", "fault719", "fault710", "fault_created", "fault_reset", "released", "args",
                              "host_fn", "stream_callback", NULL};

static void run_one(const char *name) {
    cur = name;
    alarm(60);
    if (!strcmp(name, "info")) case_info();
    else if (!strcmp(name, "fault700")) case_fault(700);
    else if (!strcmp(name, "fault719")) case_fault(719);
    else if (!strcmp(name, "fault710")) case_fault(710);
    else if (!strcmp(name, "fault_created")) case_fault_created();
    else if (!strcmp(name, "fault_reset")) case_fault_reset();
    else if (!strcmp(name, "released")) case_released();
    else if (!strcmp(name, "args")) case_args();
    else if (!strcmp(name, "host_fn")) case_host_fn(0);
    else if (!strcmp(name, "stream_callback")) case_host_fn(1);
    else if (!strncmp(name, "launch.", 7)) launch_case(name + 7);
    else printf("%s.unknown_case 1\n", name);
    fflush(stdout);
}

static void spawn(const char *self, const char *name) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, name, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) printf("%s.died_by_signal %d\n", name, WTERMSIG(st));
    else if (WEXITSTATUS(st)) printf("%s.exit_status %d\n", name, WEXITSTATUS(st));
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1) {
        for (int i = 1; i < argc; i++) run_one(argv[i]);
        return 0;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 2;
    self[n] = 0;
    for (int i = 0; CASES[i]; i++) spawn(self, CASES[i]);
    char name[128];
    for (int i = 0; LAUNCH_CASES[i]; i++) {
        snprintf(name, sizeof name, "launch.%s", LAUNCH_CASES[i]);
        spawn(self, name);
    }
    return 0;
}
