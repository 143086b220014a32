/*===- sha256.h - SHA-256 for cache keys and cache-entry integrity --------===*/
#ifndef PT2_RUNTIME_SHA256_H
#define PT2_RUNTIME_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct Sha256 {
    uint32_t state[8];
    uint64_t length;
    uint8_t block[64];
    size_t fill;
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
/* Writes 64 lowercase hex digits and a NUL to out_hex. */
void sha256_final_hex(Sha256 *s, char out_hex[65]);

#endif
