/*
 * jss_batch.c - jss_encode_batch_hpub: a whole batch of JetStream messages from Arrow
 * columns as HPUB frames (PUB for a row with neither headers nor message id).
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

#define MSG_ID_KEY "Nats-Msg-Id: "
#define MSG_ID_KEY_LEN 13
#define HASH_HEX_LEN 12

/* Row r of col: 1 and its bytes, or 0 when col is NULL or the row is null. */
static int column_row(const jss_batch_column *col, int64_t r, const char **p, size_t *len)
{
    int64_t i;

    if (col == NULL) {
        return 0;
    }
    i = col->first + r;
    if (col->valid != NULL && !((col->valid[i >> 3] >> (i & 7)) & 1)) {
        return 0;
    }
    *p = col->data + col->offsets[i];
    *len = (size_t)(col->offsets[i + 1] - col->offsets[i]);
    return 1;
}

int64_t jss_encode_batch_hpub(char *out, size_t cap, int64_t *state,
                              const jss_batch_column *payloads,
                              const jss_batch_column *subjects,
                              const jss_batch_column *msg_ids,
                              const jss_batch_column *headers,
                              int64_t start, int64_t end,
                              const char *default_subject, size_t dslen,
                              const char *id_prefix, size_t iplen, int64_t first_index,
                              const char *reply_prefix, size_t rplen, int64_t first_token,
                              const char *reply_suffix, size_t rslen, int64_t max_payload,
                              int64_t line_room)
{
    size_t used = 0;
    int64_t r;

    state[0] = 0;
    state[1] = -1;
    state[2] = 0;
    for (r = start; r < end; r++) {
        const char *payload = NULL, *subject = NULL, *id = NULL, *kv = NULL;
        size_t plen = 0, slen = 0, idlen = 0, kvlen = 0, j;
        uint64_t block = 0, total, need, token = (uint64_t)(first_token + (r - start));
        uint64_t index = (uint64_t)(first_index + (r - start));
        int has_id, with_id, rc;
        char *p;

        state[1] = r;
        if (!column_row(payloads, r, &payload, &plen)) {
            return JSS_BATCH_ERR_NULL_DATA;
        }
        if (!column_row(subjects, r, &subject, &slen) || slen == 0) {
            subject = default_subject;
            slen = dslen;
        }
        if (slen == 0) {
            return JSS_BATCH_ERR_NO_SUBJECT;
        }
        if (!jss_valid_subject(subject, slen, 0)) {
            return JSS_BATCH_ERR_SUBJECT;
        }
        if ((int64_t)(slen + rplen + count_digits(token) + rslen) > line_room) {
            return JSS_BATCH_ERR_LINE;
        }
        if (column_row(headers, r, &kv, &kvlen)) {
            rc = scan_kv((const uint8_t *)kv, kvlen, &block);
            if (rc != 0) {
                return rc;
            }
        } else {
            block = HDR_PREFIX_LEN + 2;
        }
        has_id = column_row(msg_ids, r, &id, &idlen);
        if (has_id) {
            for (j = 0; j < idlen; j++) {
                if (id[j] == '\r' || id[j] == '\n') {
                    return JSS_BATCH_ERR_MSG_ID;
                }
            }
        } else if (id_prefix != NULL) {
            idlen = iplen + count_digits(index) + 1 + HASH_HEX_LEN;
        }
        with_id = has_id || id_prefix != NULL;
        if (with_id) {
            block += MSG_ID_KEY_LEN + idlen + 2;
        } else if (kv == NULL) {
            block = 0; /* neither headers nor an id: a PUB frame */
        }
        total = block + plen;
        if (total > (uint64_t)max_payload) {
            return JSS_BATCH_ERR_TOO_BIG;
        }
        need = 5 + slen + 1 + rplen + count_digits(token) + rslen + 1 + count_digits(block) + 1 +
               count_digits(total) + 2 + total + 2;
        if (need > cap - used) {
            state[1] = -1;
            state[2] = (int64_t)need;
            return r - start;
        }
        if (block == 0) {
            p = put_head(out + used, "PUB ", 4, subject, slen, NULL, 0);
        } else {
            p = put_head(out + used, "HPUB ", 5, subject, slen, NULL, 0);
        }
        p = put(p, reply_prefix, rplen);
        p = put_uint(p, token);
        p = put(p, reply_suffix, rslen);
        *p++ = ' ';
        if (block != 0) {
            p = put_uint(p, block);
            *p++ = ' ';
        }
        p = put_uint(p, total);
        p = put(p, "\r\n", 2);
        if (kv != NULL) {
            p = put_headers(p, kv, kvlen);
            if (with_id) {
                p -= 2; /* the id line goes before the blank line */
            }
        } else if (with_id) {
            p = put(p, HDR_PREFIX, HDR_PREFIX_LEN);
        }
        if (with_id) {
            p = put(p, MSG_ID_KEY, MSG_ID_KEY_LEN);
            if (has_id) {
                p = put(p, id, idlen);
            } else {
                p = put(p, id_prefix, iplen);
                p = put_uint(p, index);
                *p++ = ':';
                p = jss_put_blake2b48_hex(p, (const uint8_t *)subject, slen < 64 ? slen : 64,
                                          (const uint8_t *)payload, plen);
            }
            p = put(p, "\r\n\r\n", 4);
        }
        p = put(p, payload, plen);
        p = put(p, "\r\n", 2);
        used = (size_t)(p - out);
        state[0] = (int64_t)used;
    }
    state[1] = -1;
    return end - start;
}
