/* Finding NVIDIA's own library behind one of our fronts: see front_find.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "front_find.h"

#ifndef ZLUDA_SITE_PACKAGES
#define ZLUDA_SITE_PACKAGES ""   /* site-packages directories of the Python that built the shim */
#endif

static int self_path(char *out) {
    Dl_info info;
    return dladdr((void *)self_path, &info) && info.dli_fname && realpath(info.dli_fname, out);
}

void *front_try_open(const char *path, const char *marker) {
    char want[PATH_MAX], self[PATH_MAX];
    struct stat st;
    if (!path || !*path || stat(path, &st) != 0 || !realpath(path, want))
        return NULL;
    if (self_path(self) && strcmp(want, self) == 0)
        return NULL;
    void *h = dlopen(want, RTLD_NOW | RTLD_LOCAL);
    void *m = h && marker ? dlsym(h, marker) : NULL;
    Dl_info info;
    char where[PATH_MAX];
    /* the marker defined by this very file (not by a dependency it shares with us) makes it one of ours */
    if (m && dladdr(m, &info) && info.dli_fname && realpath(info.dli_fname, where) && strcmp(where, want) == 0) {
        dlclose(h);
        return NULL;
    }
    return h;
}

static void *try_in(const char *dir, const char *rel, const char *marker) {
    char p[PATH_MAX];
    if (!dir || !*dir || snprintf(p, sizeof p, "%s/%s", dir, rel) >= (int)sizeof p)
        return NULL;
    return front_try_open(p, marker);
}

static void *try_list(const char *list, const char *rel, const char *marker) {
    char buf[8192];
    if (!list || snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return NULL;
    for (char *save, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        void *h = try_in(d, rel, marker);
        if (h)
            return h;
    }
    return NULL;
}

void *front_in_site_packages(const char *rel, const char *marker) {
    char self[PATH_MAX], up[PATH_MAX + 8];
    if (self_path(self)) {
        *strrchr(self, '/') = 0;
        snprintf(up, sizeof up, "%s/../..", self);
        void *h = try_in(up, rel, marker);
        if (h)
            return h;
    }
    return try_list(ZLUDA_SITE_PACKAGES, rel, marker);
}

void *front_find_nvidia(const char *soname, const char *env, const char *marker) {
    const char *e = getenv(env);
    if (e && *e) {
        /* the directory of NVIDIA's libraries, or one of them: its directory (what the user named, or nothing) */
        struct stat st;
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", e);
        if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode) && strrchr(dir, '/'))
            *strrchr(dir, '/') = 0;
        return try_in(dir, soname, marker);
    }
    char rel[256];
    snprintf(rel, sizeof rel, "nvidia/cu13/lib/%s", soname);
    void *h = front_in_site_packages(rel, marker);
    if (!h) {
        snprintf(rel, sizeof rel, "lib64/%s", soname);
        h = try_in(getenv("CUDA_HOME"), rel, marker);
        if (!h)
            h = try_in("/usr/local/cuda", rel, marker);
    }
    return h;
}

void *front_libcuda(void) {
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return cu ? cu : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
}
