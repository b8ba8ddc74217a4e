#include <openssl/evp.h>
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
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL);
	to_hex(md, mdlen, out);
}

void rung_sha256_parts_hex(const char *const *parts, size_t n, char out[RUNG_SHA256_HEX_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	for (size_t i = 0; i < n; i++)
		EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1);
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	to_hex(md, mdlen, out);
}
