/* common/digest.h: SHA-256 (OpenSSL libcrypto). Not linked into rung-agent. */
#ifndef RUNG_COMMON_DIGEST_H
#define RUNG_COMMON_DIGEST_H

#include <stddef.h>

#define RUNG_SHA256_HEX_LEN 64

/* out must hold RUNG_SHA256_HEX_LEN + 1 bytes. */
void rung_sha256_hex(const void *buf, size_t len, char out[RUNG_SHA256_HEX_LEN + 1]);
/* SHA-256 of the concatenation of n NUL-terminated parts, each followed by a 0 byte. */
void rung_sha256_parts_hex(const char *const *parts, size_t n, char out[RUNG_SHA256_HEX_LEN + 1]);

#endif
