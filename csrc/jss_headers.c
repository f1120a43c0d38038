/*
 * jss_headers.c - jss_parse_headers: a NATS/1.0 header block, validated and located.
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

int64_t jss_parse_headers(const char *block, size_t len,
                          int64_t *pairs, size_t max_pairs, int64_t *meta)
{
    const uint8_t *b = (const uint8_t *)block;
    size_t body_end, line, line_end, next;
    int64_t count = 0;
    int rc;

    meta[0] = -1;
    meta[1] = 0;
    meta[2] = 0;
    meta[3] = 0;
    if (len < 8 || memcmp(b, "NATS/1.0", 8) != 0) {
        return JSS_ERR_HDR_PREFIX;
    }
    if (len < JSS_MIN_HEADER_BLOCK || memcmp(b + len - 4, "\r\n\r\n", 4) != 0) {
        return JSS_ERR_HDR_END;
    }
    body_end = len - 4;
    for (line = 0; line <= body_end; line = next) {
        const uint8_t *colon;
        span value;

        meta[3] = (int64_t)line;
        if (!find_line_end(b, line, body_end, &line_end, &next)) {
            return JSS_ERR_HDR_CRLF;
        }
        if (line == 0) {
            rc = parse_status_line(b, line, line_end, meta);
            if (rc != COMPLETE) {
                return rc;
            }
            continue;
        }
        colon = memchr(b + line, ':', line_end - line);
        if (colon == NULL) {
            return JSS_ERR_HDR_LINE;
        }
        if ((size_t)(colon - b) == line) {
            return JSS_ERR_HDR_KEY;
        }
        value = trim(b, (size_t)(colon - b) + 1, line_end, 0);
        if ((size_t)count < max_pairs) {
            int64_t *out = pairs + (size_t)count * JSS_HDR_FIELDS;
            out[0] = (int64_t)line;
            out[1] = (int64_t)((size_t)(colon - b) - line);
            out[2] = (int64_t)value.off;
            out[3] = (int64_t)value.len;
        }
        count++;
    }
    meta[3] = 0;
    return count;
}
