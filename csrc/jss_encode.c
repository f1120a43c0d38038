/*
 * jss_encode.c - jss_encode_hpub and jss_encode_headers: the frames and header
 * blocks the client sends.
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

/* Whether a frame of need bytes does not fit cap (or its size saturated). */
static int too_small(uint64_t need, size_t cap)
{
    return need >= ENC_MAX || need > cap;
}

/* Size of "<name><subject> [<reply> ]" (the part every frame's control line starts with). */
static uint64_t head_size(size_t name_len, size_t slen, size_t rlen)
{
    uint64_t size = add_size(name_len, slen);
    size = add_size(size, 1);
    return rlen ? add_size(size, add_size(rlen, 1)) : size;
}

int64_t jss_encode_hpub(char *out, size_t cap, const char *subject, size_t slen,
                        const char *reply, size_t rlen, const char *kv, size_t kvlen,
                        const char *payload, size_t plen)
{
    uint64_t block = 0, total, need;
    int rc = scan_kv((const uint8_t *)kv, kvlen, &block);
    char *p;

    if (rc != 0) {
        return rc;
    }
    total = add_size(block, plen);
    need = head_size(5, slen, rlen);
    need = add_size(need, count_digits(block) + 1 + count_digits(total) + 2);
    need = add_size(need, add_size(total, 2));
    if (too_small(need, cap)) {
        return -(int64_t)need;
    }
    p = put_head(out, "HPUB ", 5, subject, slen, reply, rlen);
    p = put_uint(p, block);
    *p++ = ' ';
    p = put_uint(p, total);
    p = put(p, "\r\n", 2);
    p = put_headers(p, kv, kvlen);
    p = put(p, payload, plen);
    p = put(p, "\r\n", 2);
    return (int64_t)(p - out);
}

int64_t jss_encode_headers(char *out, size_t cap, const char *kv, size_t kvlen)
{
    uint64_t block = 0;
    int rc = scan_kv((const uint8_t *)kv, kvlen, &block);

    if (rc != 0) {
        return rc;
    }
    if (too_small(block, cap)) {
        return -(int64_t)block;
    }
    return (int64_t)(put_headers(out, kv, kvlen) - out);
}
