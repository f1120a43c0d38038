/*
 * jss_direct_batch.c - jss_direct_batch_decode: the header blocks of a batched direct get
 * (ADR-31) as columns.
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

enum { DB_OTHER, DB_SUBJECT, DB_SEQUENCE, DB_TIME, DB_JETSTREAM };

/* Which direct-get header a key is (DB_OTHER: one of the message's own). */
static int db_key(const uint8_t *k, size_t n)
{
    if (n < 11 || memcmp(k, "Nats-", 5) != 0) {
        return DB_OTHER;
    }
    k += 5;
    n -= 5;
    if (n == 7 && memcmp(k, "Subject", 7) == 0) {
        return DB_SUBJECT;
    }
    if (n == 8 && memcmp(k, "Sequence", 8) == 0) {
        return DB_SEQUENCE;
    }
    if (n == 10 && memcmp(k, "Time-Stamp", 10) == 0) {
        return DB_TIME;
    }
    if ((n == 6 && memcmp(k, "Stream", 6) == 0) || (n == 11 && memcmp(k, "Num-Pending", 11) == 0)
        || (n == 13 && memcmp(k, "Last-Sequence", 13) == 0)
        || (n == 13 && memcmp(k, "UpTo-Sequence", 13) == 0)) {
        return DB_JETSTREAM;
    }
    return DB_OTHER;
}

int64_t jss_direct_batch_decode(const char *blocks, size_t len, size_t max_blocks,
                                int64_t unit_ns, int32_t *kinds, int64_t *seqs,
                                int64_t *times, int32_t *subj_offsets, char *subjects,
                                size_t subjects_cap, int64_t *state)
{
    const uint8_t *b = (const uint8_t *)blocks;
    size_t pos = 0, used = 0, count = 0;
    int64_t messages = 0, own_headers = 0;

    state[0] = 0;
    state[1] = 0;
    state[2] = 0;
    state[3] = 0;
    if (unit_ns != 1 && unit_ns != 1000 && unit_ns != 1000000 && unit_ns != 1000000000) {
        return JSS_DIRECT_BATCH_ERR_UNIT;
    }
    if (subjects_cap > INT32_MAX) {
        subjects_cap = INT32_MAX;
    }
    subj_offsets[0] = 0;
    while (pos < len && count < max_blocks) {
        size_t body_end, line, line_end, next, end;
        int64_t meta[JSS_HDR_META_FIELDS];
        span subject = NO_SPAN, seq = NO_SPAN, time = NO_SPAN;
        int have_subject = 0, have_seq = 0, have_time = 0, own = 0, rc;

        state[1] = (int64_t)pos;
        if (len - pos < 8 || memcmp(b + pos, "NATS/1.0", 8) != 0) {
            return JSS_ERR_HDR_PREFIX;
        }
        for (end = pos + 8; end + 4 <= len && memcmp(b + end, "\r\n\r\n", 4) != 0; end++) {
        }
        if (end + 4 > len) {
            return JSS_ERR_HDR_END;
        }
        body_end = end;
        meta[0] = -1;
        for (line = pos; line <= body_end; line = next) {
            const uint8_t *colon;
            size_t key_len;

            state[1] = (int64_t)line;
            if (!find_line_end(b, line, body_end, &line_end, &next)) {
                return JSS_ERR_HDR_CRLF;
            }
            if (line == pos) {
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
            key_len = (size_t)(colon - b) - line;
            if (key_len == 0) {
                return JSS_ERR_HDR_KEY;
            }
            switch (db_key(b + line, key_len)) {
            case DB_SUBJECT:
                if (!have_subject) {
                    subject = trim(b, (size_t)(colon - b) + 1, line_end, 0);
                    have_subject = 1;
                }
                break;
            case DB_SEQUENCE:
                if (!have_seq) {
                    seq = trim(b, (size_t)(colon - b) + 1, line_end, 0);
                    have_seq = 1;
                }
                break;
            case DB_TIME:
                if (!have_time) {
                    time = trim(b, (size_t)(colon - b) + 1, line_end, 0);
                    have_time = 1;
                }
                break;
            case DB_OTHER:
                own = 1;
                break;
            default:
                break;
            }
        }
        state[1] = (int64_t)pos;
        seqs[count] = 0;
        times[count] = 0;
        if (meta[0] >= 0) {
            kinds[count] = (int32_t)meta[0];
        } else {
            if (!have_subject || !have_seq || !have_time) {
                return JSS_DIRECT_BATCH_ERR_MISSING;
            }
            if (!parse_uint(b, seq, &seqs[count])) {
                return JSS_DIRECT_BATCH_ERR_SEQUENCE;
            }
            if (!jss_time_units(b, time, unit_ns, &times[count])) {
                return JSS_DIRECT_BATCH_ERR_TIME;
            }
            if (subject.len > subjects_cap - used) {
                return JSS_DIRECT_BATCH_ERR_SPACE;
            }
            memcpy(subjects + used, b + subject.off, subject.len);
            used += subject.len;
            kinds[count] = own ? JSS_DIRECT_BATCH_MSG_HEADERS : JSS_DIRECT_BATCH_MSG;
            messages++;
            own_headers += own;
        }
        subj_offsets[count + 1] = (int32_t)used;
        count++;
        pos = end + 4;
        state[0] = (int64_t)pos;
    }
    state[1] = 0;
    state[2] = messages;
    state[3] = own_headers;
    return (int64_t)count;
}
