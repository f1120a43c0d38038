/*
 * jss_blake2b.c - BLAKE2b (RFC 7693) with a 6-byte digest, for the message ids that
 * jss_encode_batch_hpub derives.
 *
 * Part of the C protocol core (see jss_internal.h and csrc/README.md). The
 * Python twin uses hashlib.blake2b, and the tests compare the two.
 */
#include "jss_internal.h"

static const uint64_t BLAKE2B_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

static const uint8_t BLAKE2B_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

#define ROTR64(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
#define B2B_G(a, b, c, d, x, y)        \
    do {                               \
        v[a] = v[a] + v[b] + (x);      \
        v[d] = ROTR64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];            \
        v[b] = ROTR64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);      \
        v[d] = ROTR64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];            \
        v[b] = ROTR64(v[b] ^ v[c], 63); \
    } while (0)

static uint64_t load64_le(const uint8_t *p)
{
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
           ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) |
           ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

/* Mix one 128-byte block into h; t is the byte count so far (< 2^64 here). */
static void blake2b_compress(uint64_t *h, const uint8_t *block, uint64_t t, int last)
{
    uint64_t v[16], m[16];
    int i;

    for (i = 0; i < 16; i++) {
        m[i] = load64_le(block + 8 * i);
    }
    for (i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = BLAKE2B_IV[i];
    }
    v[12] ^= t;
    if (last) {
        v[14] = ~v[14];
    }
    for (i = 0; i < 12; i++) {
        const uint8_t *s = BLAKE2B_SIGMA[i];
        B2B_G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        B2B_G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        B2B_G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        B2B_G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        B2B_G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        B2B_G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        B2B_G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        B2B_G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (i = 0; i < 8; i++) {
        h[i] ^= v[i] ^ v[i + 8];
    }
}

/* See jss_internal.h. */
char *jss_put_blake2b48_hex(char *p, const uint8_t *key, size_t klen, const uint8_t *data,
                            size_t len)
{
    static const char HEX[] = "0123456789abcdef";
    uint64_t h[8];
    uint8_t block[128];
    uint64_t t = 0;
    int i;

    for (i = 0; i < 8; i++) {
        h[i] = BLAKE2B_IV[i];
    }
    h[0] ^= 0x01010000ULL ^ ((uint64_t)klen << 8) ^ 6;
    if (klen > 0) {
        memset(block, 0, sizeof block);
        memcpy(block, key, klen);
        t = 128;
        blake2b_compress(h, block, t, len == 0);
    }
    while (len > 128) {
        t += 128;
        blake2b_compress(h, data, t, 0);
        data += 128;
        len -= 128;
    }
    if (len > 0 || klen == 0) {
        memset(block, 0, sizeof block);
        if (len) {
            memcpy(block, data, len);
        }
        t += len;
        blake2b_compress(h, block, t, 1);
    }
    for (i = 0; i < 6; i++) {
        uint8_t byte = (uint8_t)(h[i / 8] >> (8 * (i % 8)));
        *p++ = HEX[byte >> 4];
        *p++ = HEX[byte & 15];
    }
    return p;
}
