/* What src/darkapi.c offers the rest of the shim and Python (declared to cffi in src/darkapi.cdef). */
#ifndef ZLUDA_DARKAPI_H
#define ZLUDA_DARKAPI_H

#include <stddef.h>
#include <stdint.h>

/* The export table for a 16-byte id (cuGetExportTable), NULL when unknown. */
const void *zluda_dark_export_table(const uint8_t *id);
/* Runs and drops the context-local-storage entries of a context being destroyed, reset or released. */
void zluda_dark_context_destroyed(uint64_t ctx);
void zluda_md2(const uint8_t *data, size_t len, uint8_t *out);
void zluda_hmac_md2(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len, uint8_t *out);
/* The integrity check's message (returns its length, 0 on failure) and the check as cudart calls it. */
size_t zluda_dark_integrity_message(uint32_t version, uint64_t unix_seconds, uint8_t *msg, size_t capacity);
int32_t zluda_dark_integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t *out);

#endif
