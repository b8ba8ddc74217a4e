/*
 * The low-level SHA-256 calls: these hash ids and labels on every acquire, open and dispose,
 * and the first EVP digest in a process costs ~1 ms (OpenSSL 3 initialises its core and
 * default provider) against ~10 us here: the same implementation, without the provider
 * machinery. They are deprecated in OpenSSL 3 but present; the EVP path stays for streams
 * (rootfs).
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <string.h>

#include "common/digest.h"

static void to_hex(const unsigned char *md, unsigned len, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (unsigned i = 0; i < len; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[2 * len] = '\0';
}

void rung_sha256_hex(const void *buf, size_t len, char out[RUNG_SHA256_HEX_LEN + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX c;
	SHA256_Init(&c);
	SHA256_Update(&c, buf, len);
	SHA256_Final(md, &c);
	to_hex(md, sizeof(md), out);
}

void rung_sha256_parts_hex(const char *const *parts, size_t n, char out[RUNG_SHA256_HEX_LEN + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX c;
	SHA256_Init(&c);
	for (size_t i = 0; i < n; i++)
		SHA256_Update(&c, parts[i], strlen(parts[i]) + 1);
	SHA256_Final(md, &c);
	to_hex(md, sizeof(md), out);
}
