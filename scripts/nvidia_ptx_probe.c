/* What a CUDA driver answers for PTX module loads: each DIR/NAME.ptx (names in DIR/cases.txt) through
 * cuModuleLoadDataEx with both JIT logs and CU_JIT_LOG_VERBOSE, then JIT-option and cuLink cases; prints
 * JSON. Built with `gcc -O1 -o probe nvidia_ptx_probe.c -ldl`; run against NVIDIA's libcuda.so.1 or the shim
 * (LD_LIBRARY_PATH) with the same binary, so tests/data/nvidia_ptx_answers.json and our answers compare. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fn_t)();
static void *lib;
static fn_t sym(const char *n) {
    fn_t f = (fn_t)dlsym(lib, n);
    if (!f) { fprintf(stderr, "missing %s\n", n); exit(2); }
    return f;
}

static void jstr(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c >= 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = calloc(1, n + 1);
    if (fread(b, 1, n, f) != (size_t)n) { fclose(f); free(b); return NULL; }
    fclose(f);
    return b;
}

enum { INFO_BUF = 3, INFO_SIZE = 4, ERR_BUF = 5, ERR_SIZE = 6, VERBOSE = 12 };
#define LOG 8192
static char info[LOG], err[LOG];
static int first = 1;

static void record(const char *name, int code, int nopt, void **vals) {
    printf("%s\n  ", first ? "" : ",");
    first = 0;
    printf("\"%s\": {\"code\": %d", name, code);
    if (nopt >= 4) {
        printf(", \"info_log\": "); jstr(info, LOG);
        printf(", \"info_size_out\": %llu", (unsigned long long)(uintptr_t)vals[1]);
        printf(", \"error_log\": "); jstr(err, LOG);
        printf(", \"error_size_out\": %llu", (unsigned long long)(uintptr_t)vals[3]);
    }
    printf("}");
    fflush(stdout);
}

static void logs(int *opts, void **vals, int verbose) {
    memset(info, 0, LOG); memset(err, 0, LOG);
    opts[0] = INFO_BUF; vals[0] = info; opts[1] = INFO_SIZE; vals[1] = (void *)(uintptr_t)LOG;
    opts[2] = ERR_BUF; vals[2] = err; opts[3] = ERR_SIZE; vals[3] = (void *)(uintptr_t)LOG;
    opts[4] = VERBOSE; vals[4] = (void *)(uintptr_t)verbose;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s CASE_DIR\n", argv[0]); return 2; }
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    fn_t cuInit = sym("cuInit"), cuDeviceGet = sym("cuDeviceGet"), cuDeviceGetName = sym("cuDeviceGetName"),
         cuDeviceGetAttribute = sym("cuDeviceGetAttribute"), cuDriverGetVersion = sym("cuDriverGetVersion"),
         cuCtxRetain = sym("cuDevicePrimaryCtxRetain"), cuCtxSetCurrent = sym("cuCtxSetCurrent"),
         cuLoadEx = sym("cuModuleLoadDataEx"), cuUnload = sym("cuModuleUnload"),
         cuLinkCreate = sym("cuLinkCreate_v2"), cuLinkAddData = sym("cuLinkAddData_v2"),
         cuLinkComplete = sym("cuLinkComplete"), cuLinkDestroy = sym("cuLinkDestroy");
    int dev, major = 0, minor = 0, version = 0;
    char devname[256] = {0};
    uint64_t ctx = 0, mod = 0;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "no device\n");
        return 2;
    }
    cuDeviceGetName(devname, 255, dev);
    cuDeviceGetAttribute(&major, 75, dev);
    cuDeviceGetAttribute(&minor, 76, dev);
    cuDriverGetVersion(&version);
    printf("{\"device\": "); jstr(devname, 256);
    printf(", \"compute_capability\": \"%d.%d\", \"driver_version\": %d, \"cases\": {", major, minor, version);

    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/cases.txt", argv[1]);
    FILE *list = fopen(path, "r");
    if (!list) { fprintf(stderr, "no %s\n", path); return 2; }
    int opts[8];
    void *vals[8];
    char *valid = NULL, *bad = NULL, *v99 = NULL, *big_shared = NULL;
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        snprintf(path, sizeof path, "%s/%s.ptx", argv[1], line);
        char *text = slurp(path);
        if (!text) { fprintf(stderr, "no %s\n", path); return 2; }
        logs(opts, vals, 1);
        mod = 0;
        int r = cuLoadEx(&mod, text, 5, opts, vals);
        record(line, r, 5, vals);
        if (r == 0) cuUnload(mod);
        if (!strcmp(line, "valid")) valid = text;
        else if (!strcmp(line, "ld_parma")) bad = text;
        else if (!strcmp(line, "version_9_9")) v99 = text;
        else if (!strcmp(line, "shared_256k")) big_shared = text;
        else free(text);
    }
    printf("\n  }, \"options\": {");
    first = 1;
    if (!valid || !bad || !v99 || !big_shared) { fprintf(stderr, "cases missing\n"); return 2; }

    logs(opts, vals, 0);                     /* both logs, no verbose: what a success writes */
    int r = cuLoadEx(&mod, valid, 4, opts, vals);
    record("valid_not_verbose", r, 4, vals);
    if (r == 0) cuUnload(mod);
    logs(opts, vals, 0);
    r = cuLoadEx(&mod, bad, 4, opts, vals);
    record("bad_not_verbose", r, 4, vals);
    logs(opts, vals, 0);                     /* an error log too small for the message */
    vals[3] = (void *)(uintptr_t)16;
    r = cuLoadEx(&mod, bad, 4, opts, vals);
    record("bad_error_log_16_bytes", r, 4, vals);
    {
        int o[1] = {999};
        void *v[1] = {0};
        r = cuLoadEx(&mod, valid, 1, o, v);
        record("unknown_option_999", r, 0, v);
        if (r == 0) cuUnload(mod);
        o[0] = 35;                           /* CU_JIT_NUM_OPTIONS */
        r = cuLoadEx(&mod, valid, 1, o, v);
        record("option_num_options", r, 0, v);
        if (r == 0) cuUnload(mod);
    }
    logs(opts, vals, 0);
    r = cuLoadEx(&mod, valid, 2, NULL, vals);
    record("null_options_array", r, 0, vals);
    if (r == 0) cuUnload(mod);
    logs(opts, vals, 0);
    r = cuLoadEx(&mod, valid, 2, opts, NULL);
    record("null_values_array", r, 0, vals);
    if (r == 0) cuUnload(mod);
    r = cuLoadEx(&mod, valid, 0, NULL, NULL);
    record("zero_options_null_arrays", r, 0, vals);
    if (r == 0) cuUnload(mod);

    printf("\n  }, \"link\": {");
    first = 1;
    const char *inputs[4] = {bad, v99, big_shared, valid};
    const char *names[4] = {"add_ld_parma", "add_version_9_9", "add_shared_256k", "add_valid"};
    for (int i = 0; i < 4; i++) {
        uint64_t state = 0;
        logs(opts, vals, 1);
        r = cuLinkCreate(5, opts, vals, &state);
        if (r) { record("create", r, 5, vals); break; }
        r = cuLinkAddData(state, 1, inputs[i], strlen(inputs[i]) + 1, names[i], 0, NULL, NULL);
        record(names[i], r, 5, vals);
        if (r == 0) {
            void *cubin = NULL;
            size_t size = 0;
            r = cuLinkComplete(state, &cubin, &size);
            char n[64];
            snprintf(n, sizeof n, "%s_complete", names[i]);
            record(n, r, 5, vals);
        }
        cuLinkDestroy(state);
    }
    {
        uint64_t state = 0;
        int o[1] = {999};
        void *v[1] = {0};
        r = cuLinkCreate(1, o, v, &state);
        record("create_unknown_option_999", r, 0, v);
        if (r == 0) cuLinkDestroy(state);
        r = cuLinkCreate(2, NULL, vals, &state);
        record("create_null_options_array", r, 0, v);
        if (r == 0) cuLinkDestroy(state);
    }
    printf("\n  }}\n");
    return 0;
}
