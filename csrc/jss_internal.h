/*
 * jss_internal.h - what the .c files of csrc/ share and cffi never sees.
 *
 * jss_proto.h is the public interface (cffi's cdef reads it); this header is
 * included by every .c file only. Helpers that more than one file calls on a
 * hot path (per op, per header line, per row) are static inline here, so
 * each file still inlines them as the one-file core did; the larger pieces
 * used by one other file (BLAKE2b, the RFC 3339 readers) are ordinary
 * functions of their own file, hidden from the shared object's exports.
 */
#ifndef JSS_INTERNAL_H
#define JSS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jss_proto.h"

#if defined(__GNUC__)
#define JSS_INTERNAL __attribute__((visibility("hidden")))
#else
#define JSS_INTERNAL
#endif

/* Results of the parsing steps besides the JSS_ERR_* codes. */
#define NEED_MORE 1
#define COMPLETE 0

/* A part of a buffer: offset and length. */
typedef struct {
    size_t off;
    size_t len;
} span;

static const span NO_SPAN = {0, 0};

/* ------------------------------------------------------------------------ */
/* Reading bytes                                                            */

static inline int is_blank(uint8_t c)
{
    return c == ' ' || c == '\t';
}

static inline int is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static inline span make_span(size_t from, size_t to)
{
    span s;
    s.off = from;
    s.len = to - from;
    return s;
}

/* Trim blanks (and single quotes when quotes != 0) from both ends of [from, to). */
static inline span trim(const uint8_t *b, size_t from, size_t to, int quotes)
{
    while (from < to && (is_blank(b[from]) || (quotes && b[from] == '\''))) {
        from++;
    }
    while (to > from && (is_blank(b[to - 1]) || (quotes && b[to - 1] == '\''))) {
        to--;
    }
    return make_span(from, to);
}

/* Unsigned decimal that fits an int64; no sign, not empty. */
static inline int parse_uint(const uint8_t *b, span s, int64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (s.len == 0) {
        return 0;
    }
    for (i = s.off; i < s.off + s.len; i++) {
        uint64_t d;
        if (!is_digit(b[i])) {
            return 0;
        }
        d = (uint64_t)(b[i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) {
            return 0;
        }
        v = v * 10 + d;
    }
    *out = (int64_t)v;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Header blocks (jss_headers.c, jss_direct_meta.c, jss_direct_batch.c)     */

/* "NATS/1.0[ <3 digits>[ description]]" in [from, to). */
static inline int parse_status_line(const uint8_t *b, size_t from, size_t to, int64_t *meta)
{
    size_t i = from + 8;
    size_t code_start;
    span desc;

    if (i == to) {
        return COMPLETE;
    }
    if (!is_blank(b[i])) {
        return JSS_ERR_HDR_PREFIX;
    }
    while (i < to && is_blank(b[i])) {
        i++;
    }
    if (i == to) {
        return COMPLETE;
    }
    code_start = i;
    while (i < to && !is_blank(b[i])) {
        i++;
    }
    if (i - code_start != 3 || !is_digit(b[code_start]) || !is_digit(b[code_start + 1])
        || !is_digit(b[code_start + 2])) {
        return JSS_ERR_HDR_STATUS;
    }
    meta[0] = (b[code_start] - '0') * 100 + (b[code_start + 1] - '0') * 10
              + (b[code_start + 2] - '0');
    desc = trim(b, i, to, 0);
    meta[1] = (int64_t)desc.off;
    meta[2] = (int64_t)desc.len;
    return COMPLETE;
}

/*
 * End of the line starting at from within [from, body_end): sets *next to the
 * start of the following line, or to body_end + 1 when this is the last line.
 * Returns 0 on a CR or LF that is not a CRLF pair.
 */
static inline int find_line_end(const uint8_t *b, size_t from, size_t body_end,
                                size_t *line_end, size_t *next)
{
    size_t i;

    for (i = from; i < body_end; i++) {
        if (b[i] == '\r' && i + 1 < body_end && b[i + 1] == '\n') {
            *line_end = i;
            *next = i + 2;
            return 1;
        }
        if (b[i] == '\r' || b[i] == '\n') {
            return 0;
        }
    }
    *line_end = body_end;
    *next = body_end + 1;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Encoding (jss_encode.c, jss_batch.c)                                     */

#define ENC_MAX ((uint64_t)INT64_MAX)
#define HDR_PREFIX "NATS/1.0\r\n"
#define HDR_PREFIX_LEN 10

/* a + b, saturating at ENC_MAX (lengths from the caller cannot wrap the size;
   a saturated size is never written, see too_small). */
static inline uint64_t add_size(uint64_t a, uint64_t b)
{
    return (a > ENC_MAX || b > ENC_MAX - a) ? ENC_MAX : a + b;
}

static inline size_t count_digits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Copy n bytes to p (n may be 0 with src NULL); return p + n. */
static inline char *put(char *p, const char *src, size_t n)
{
    if (n) {
        memcpy(p, src, n);
    }
    return p + n;
}

/* Write v in decimal at p; return p past it. */
static inline char *put_uint(char *p, uint64_t v)
{
    size_t n = count_digits(v);
    size_t i;

    for (i = n; i > 0; i--) {
        p[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + n;
}

static inline int bad_key_byte(uint8_t c)
{
    return c < 0x21 || c == ':' || c >= 0x7f; /* ADR-4: printable ASCII but ':' */
}

/*
 * Validate kv (see jss_proto.h) and set *block_len to the size of its header
 * block. Returns 0 or a JSS_ENC_ERR_* code.
 */
static inline int scan_kv(const uint8_t *kv, size_t kvlen, uint64_t *block_len)
{
    uint64_t size = HDR_PREFIX_LEN + 2;
    size_t i = 0;

    while (i < kvlen) {
        const uint8_t *nul = memchr(kv + i, 0, kvlen - i);
        size_t key_start = i, key_end, value_end, j;

        if (nul == NULL) {
            return JSS_ENC_ERR_KV;
        }
        key_end = (size_t)(nul - kv);
        if (key_end == i) {
            return JSS_ENC_ERR_KEY;
        }
        for (j = i; j < key_end; j++) {
            if (bad_key_byte(kv[j])) {
                return JSS_ENC_ERR_KEY;
            }
        }
        i = key_end + 1;
        nul = i < kvlen ? memchr(kv + i, 0, kvlen - i) : NULL;
        if (nul == NULL) {
            return JSS_ENC_ERR_KV;
        }
        value_end = (size_t)(nul - kv);
        for (j = i; j < value_end; j++) {
            if (kv[j] == '\r' || kv[j] == '\n') {
                return JSS_ENC_ERR_VALUE;
            }
        }
        /* "key: value\r\n" */
        size = add_size(size, add_size(key_end - key_start, (uint64_t)(value_end - i) + 4));
        i = value_end + 1;
    }
    *block_len = size;
    return 0;
}

/* Write the header block of kv (already checked by scan_kv) at p; return p past it. */
static inline char *put_headers(char *p, const char *kv, size_t kvlen)
{
    size_t i = 0;

    p = put(p, HDR_PREFIX, HDR_PREFIX_LEN);
    while (i < kvlen) {
        /* scan_kv found both NULs inside kvlen */
        size_t key_len = (size_t)((const char *)memchr(kv + i, 0, kvlen - i) - (kv + i));
        size_t v = i + key_len + 1;
        size_t value_len = (size_t)((const char *)memchr(kv + v, 0, kvlen - v) - (kv + v));

        p = put(p, kv + i, key_len);
        p = put(p, ": ", 2);
        p = put(p, kv + i + key_len + 1, value_len);
        p = put(p, "\r\n", 2);
        i += key_len + value_len + 2;
    }
    return put(p, "\r\n", 2);
}

/* Write "<name><subject> [<reply> ]" (how every frame's control line starts) at p. */
static inline char *put_head(char *p, const char *name, size_t name_len, const char *subject,
                             size_t slen, const char *reply, size_t rlen)
{
    p = put(p, name, name_len);
    p = put(p, subject, slen);
    *p++ = ' ';
    if (rlen) {
        p = put(p, reply, rlen);
        *p++ = ' ';
    }
    return p;
}

/* ------------------------------------------------------------------------ */
/* Functions of one file called from another                                */

/* jss_blake2b.c: the 12 lowercase hex digits of BLAKE2b with a 6-byte digest
   of data keyed with key (klen <= 64), written at p; return p past them. */
JSS_INTERNAL char *jss_put_blake2b48_hex(char *p, const uint8_t *key, size_t klen,
                                         const uint8_t *data, size_t len);

/* jss_time.c: YYYY-MM-DDTHH:MM:SS[.fraction]Z (1..9 fraction digits, years
   1970..2261) at b[s] to ns since the epoch in *out; 0 when it is not one. */
JSS_INTERNAL int jss_time_utc_ns(const uint8_t *b, span s, int64_t *out);

/* jss_time.c: YYYY-MM-DD[Tt ]HH:MM:SS[.F{1,9}](Z|z|[+-]HH:MM) at b[s], as
   datetime accepts it, in units of unit_ns since the epoch (rounded down)
   in *out; 0 when malformed or out of range. */
JSS_INTERNAL int jss_time_units(const uint8_t *b, span s, int64_t unit_ns, int64_t *out);

#endif
