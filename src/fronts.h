/* The fronts and whether the devices' memory is host memory (src/fronts.c), declared for cffi's generated code:
 * set once cuInit has chosen the backend (which also loads the fronts). */
#ifndef ZLUDA_FRONTS_H
#define ZLUDA_FRONTS_H

void zluda_set_host_memory_devices(int on);
int zluda_host_memory_devices(void);

#endif
