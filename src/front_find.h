/* Finding NVIDIA's own library behind one of our fronts (cuBLAS, nvJitLink), never a copy of a front. */
#ifndef ZLUDA_FRONT_FIND_H
#define ZLUDA_FRONT_FIND_H

/* dlopen(path) unless it is one of ours: a library whose own `marker` symbol (if marker) is defined in it. */
void *front_try_open(const char *path, const char *marker);

/* `rel` under a site-packages directory: the one an installed zluda-py lies in (<sp>/zluda_py/_lib/ holds the
 * fronts), then those of the Python that built the shim (ZLUDA_SITE_PACKAGES at build time). */
void *front_in_site_packages(const char *rel, const char *marker);

/* NVIDIA's `soname`: in the directory (or beside the file) the variable `env` names, and only there when it
 * is set; else the nvidia/cu13 wheel's, then $CUDA_HOME/lib64 and /usr/local/cuda/lib64. */
void *front_find_nvidia(const char *soname, const char *env, const char *marker);

/* The libcuda.so.1 this process has loaded (the shim, under zluda-py run), else the one the loader finds. */
void *front_libcuda(void);

#endif
