/*
 * jss_direct_meta.c - jss_direct_meta_parse: what a direct-get reply's header block says of
 * the stored message, in one pass.
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

static int key_equals(const uint8_t *b, size_t off, size_t len, const char *name)
{
    size_t n = strlen(name);
    return len == n && memcmp(b + off, name, n) == 0;
}

int jss_direct_meta_parse(const char *block, size_t len, int64_t *out)
{
    /* the first value of each header: subject, sequence, time stamp, op, reason */
    static const char *const names[5] = {"Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp",
                                         "KV-Operation", "Nats-Marker-Reason"};
    const uint8_t *b = (const uint8_t *)block;
    span found[5] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
    int seen[5] = {0, 0, 0, 0, 0};
    size_t body_end, line, line_end, next, k;
    int64_t seq, stamp;

    if (len < 14 || memcmp(b, "NATS/1.0\r\n", 10) != 0 || memcmp(b + len - 4, "\r\n\r\n", 4) != 0) {
        return 0;
    }
    body_end = len - 4;
    for (line = 10; line <= body_end; line = next) {
        const uint8_t *colon;
        size_t key_len;

        if (!find_line_end(b, line, body_end, &line_end, &next)) {
            return 0;
        }
        colon = memchr(b + line, ':', line_end - line);
        if (colon == NULL || (size_t)(colon - b) == line) {
            return 0;
        }
        key_len = (size_t)(colon - b) - line;
        for (k = 0; k < 5; k++) {
            if (!seen[k] && key_equals(b, line, key_len, names[k])) {
                seen[k] = 1;
                found[k] = trim(b, (size_t)(colon - b) + 1, line_end, 0);
                break;
            }
        }
    }
    if (!seen[0] || !seen[1] || !seen[2] || !parse_uint(b, found[1], &seq)
        || !jss_time_utc_ns(b, found[2], &stamp)) {
        return 0;
    }
    out[0] = (int64_t)found[0].off;
    out[1] = (int64_t)found[0].len;
    out[2] = seq;
    out[3] = stamp;
    out[4] = seen[3] ? (int64_t)found[3].off : 0;
    out[5] = seen[3] ? (int64_t)found[3].len : -1;
    out[6] = seen[4] ? (int64_t)found[4].off : 0;
    out[7] = seen[4] ? (int64_t)found[4].len : -1;
    return 1;
}
