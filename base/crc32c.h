/*
 * crc32c.h - CRC32C (Castagnoli): the frame headers' checksum (net/wire.h)
 * and every checkpoint array's (storage/ckpt.h). The SSE4.2 instruction
 * where the CPU has it, a table otherwise: the same values either way.
 */
#ifndef ZS_CRC32C_H
#define ZS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of len bytes, seeded with crc (0 to start; a previous result to
 * continue over more bytes). Thread-safe; never fails. */
uint32_t zs_crc32c(uint32_t crc, const void *p, size_t len);

#endif
