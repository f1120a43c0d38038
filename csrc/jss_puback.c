/*
 * jss_puback.c - jss_parse_puback: a JetStream PubAck body read by a strict JSON subset;
 * anything unusual returns 0 (the caller uses a full JSON parser). jss_puback_batch:
 * the async-publish acks of one read, each reply's token and PubAck at once.
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

typedef struct {
    const uint8_t *b;
    size_t i;
    size_t n;
} cursor;

enum { J_STRING, J_UINT, J_NUMBER, J_TRUE, J_FALSE, J_NULL };

typedef struct {
    int type;
    span str;
    int64_t uint;
} jvalue;

static void skip_ws(cursor *c)
{
    while (c->i < c->n) {
        uint8_t ch = c->b[c->i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
            return;
        }
        c->i++;
    }
}

static int eat(cursor *c, uint8_t ch)
{
    if (c->i < c->n && c->b[c->i] == ch) {
        c->i++;
        return 1;
    }
    return 0;
}

/* A string without escapes, control characters or non-ASCII bytes. */
static int read_string(cursor *c, span *out)
{
    size_t start;

    if (!eat(c, '"')) {
        return 0;
    }
    start = c->i;
    while (c->i < c->n) {
        uint8_t ch = c->b[c->i];
        if (ch == '"') {
            *out = make_span(start, c->i);
            c->i++;
            return 1;
        }
        if (ch < 0x20 || ch == '\\' || ch >= 0x80) {
            return 0;
        }
        c->i++;
    }
    return 0;
}

static size_t skip_digits(cursor *c)
{
    size_t start = c->i;
    while (c->i < c->n && is_digit(c->b[c->i])) {
        c->i++;
    }
    return c->i - start;
}

/* A JSON number; J_UINT when it is a plain non-negative integer that fits an int64. */
static int read_number(cursor *c, jvalue *v)
{
    int negative = eat(c, '-');
    size_t int_start = c->i;
    span digits;

    if (c->i >= c->n || !is_digit(c->b[c->i])) {
        return 0;
    }
    if (c->b[c->i] == '0') {
        c->i++;
    } else {
        skip_digits(c);
    }
    digits = make_span(int_start, c->i);
    v->type = (!negative && parse_uint(c->b, digits, &v->uint)) ? J_UINT : J_NUMBER;
    if (eat(c, '.')) {
        v->type = J_NUMBER;
        if (skip_digits(c) == 0) {
            return 0;
        }
    }
    if (eat(c, 'e') || eat(c, 'E')) {
        v->type = J_NUMBER;
        if (!eat(c, '+')) {
            eat(c, '-');
        }
        if (skip_digits(c) == 0) {
            return 0;
        }
    }
    return 1;
}

static int eat_word(cursor *c, const char *word)
{
    size_t n = strlen(word);
    if (c->n - c->i < n || memcmp(c->b + c->i, word, n) != 0) {
        return 0;
    }
    c->i += n;
    return 1;
}

/* A string, number, true, false or null (objects and arrays are refused). */
static int read_value(cursor *c, jvalue *v)
{
    if (c->i >= c->n) {
        return 0;
    }
    switch (c->b[c->i]) {
    case '"': v->type = J_STRING; return read_string(c, &v->str);
    case 't': v->type = J_TRUE; return eat_word(c, "true");
    case 'f': v->type = J_FALSE; return eat_word(c, "false");
    case 'n': v->type = J_NULL; return eat_word(c, "null");
    default: return read_number(c, v);
    }
}

static int key_is(const cursor *c, span key, const char *name)
{
    size_t n = strlen(name);
    return key.len == n && memcmp(c->b + key.off, name, n) == 0;
}

/* Bit of `seen` set by a member other than stream, seq, duplicate and domain. */
#define SEEN_OTHER_KEY 16

/* Record one member; 0 when it makes the body unsuitable for the fast path. */
static int take_member(const cursor *c, span key, const jvalue *v, int *seen, int64_t *out)
{
    if (key_is(c, key, "error")) {
        return 0;
    }
    if (key_is(c, key, "stream")) {
        if ((*seen & 1) || v->type != J_STRING) {
            return 0;
        }
        *seen |= 1;
        out[0] = (int64_t)v->str.off;
        out[1] = (int64_t)v->str.len;
    } else if (key_is(c, key, "seq")) {
        if ((*seen & 2) || v->type != J_UINT) {
            return 0;
        }
        *seen |= 2;
        out[2] = v->uint;
    } else if (key_is(c, key, "duplicate")) {
        if ((*seen & 4) || (v->type != J_TRUE && v->type != J_FALSE)) {
            return 0;
        }
        *seen |= 4;
        out[3] = v->type == J_TRUE;
    } else if (key_is(c, key, "domain")) {
        if ((*seen & 8) || v->type != J_STRING) {
            return 0;
        }
        *seen |= 8;
        out[4] = (int64_t)v->str.off;
        out[5] = (int64_t)v->str.len;
    } else {
        *seen |= SEEN_OTHER_KEY;
    }
    return 1;
}

/* jss_parse_puback, also telling in *seen which members the body had. */
static int parse_body(const char *data, size_t len, int64_t *out, int *seen_out)
{
    cursor c;
    int seen = 0;

    c.b = (const uint8_t *)data;
    c.i = 0;
    c.n = len;
    out[0] = out[1] = out[2] = out[3] = out[4] = 0;
    out[5] = -1;
    skip_ws(&c);
    if (!eat(&c, '{')) {
        return 0;
    }
    skip_ws(&c);
    if (!eat(&c, '}')) {
        for (;;) {
            span key;
            jvalue v;
            skip_ws(&c);
            if (!read_string(&c, &key)) {
                return 0;
            }
            skip_ws(&c);
            if (!eat(&c, ':')) {
                return 0;
            }
            skip_ws(&c);
            if (!read_value(&c, &v) || !take_member(&c, key, &v, &seen, out)) {
                return 0;
            }
            skip_ws(&c);
            if (eat(&c, '}')) {
                break;
            }
            if (!eat(&c, ',')) {
                return 0;
            }
        }
    }
    skip_ws(&c);
    *seen_out = seen;
    return c.i == c.n && (seen & 3) == 3;
}

int jss_parse_puback(const char *data, size_t len, int64_t *out)
{
    int seen;
    return parse_body(data, len, out, &seen);
}

/* ------------------------------------------------------------------------ */
/* jss_puback_batch                                                          */

/* Ops parsed per jss_parse call (on the stack: 2.5 KiB). */
#define BATCH_CHUNK_OPS 32

static int same_bytes(const uint8_t *b, span x, span y)
{
    return x.len == y.len && memcmp(b + x.off, b + y.off, x.len) == 0;
}

/* The token after the prefix: an unsigned decimal that fits an int64, else -1. */
static int64_t reply_token(const uint8_t *b, const int64_t *op, size_t prefix_len)
{
    int64_t token;
    size_t subject_len = (size_t)op[2];

    if (subject_len <= prefix_len) {
        return -1;
    }
    if (!parse_uint(b, make_span((size_t)op[1] + prefix_len, (size_t)op[1] + subject_len),
                    &token)) {
        return -1;
    }
    return token;
}

int64_t jss_puback_batch(const char *buf, size_t start, size_t end, int64_t sid,
                         size_t prefix_len, size_t max_acks, int64_t *tokens, int64_t *seqs,
                         uint8_t *kinds, int64_t *specials, int64_t *state)
{
    const uint8_t *b = (const uint8_t *)buf;
    int64_t ops[BATCH_CHUNK_OPS * JSS_OP_FIELDS];
    int64_t parsed[JSS_STATE_FIELDS];
    int64_t body[JSS_PUBACK_FIELDS];
    span prev_stream = NO_SPAN;
    span prev_domain = NO_SPAN;
    int have_prev = 0;
    int prev_has_domain = 0;
    size_t pos = start;
    size_t written = 0;
    size_t nspecial = 0;

    state[0] = (int64_t)start;
    state[1] = 0;
    state[2] = 0;
    while (written < max_acks && pos < end) {
        size_t room = max_acks - written;
        size_t want = room < BATCH_CHUNK_OPS ? room : BATCH_CHUNK_OPS;
        int64_t n = jss_parse(buf, pos, end, ops, want, parsed);
        int64_t k;

        if (n < 0) {
            state[1] = parsed[2];
            return n;
        }
        for (k = 0; k < n; k++) {
            const int64_t *op = ops + k * JSS_OP_FIELDS;
            size_t p_off = (size_t)op[8];
            size_t p_len = (size_t)op[9];
            int64_t *special = specials + nspecial * JSS_ACK_SPECIAL_FIELDS;
            int seen = 0;

            if ((op[0] != JSS_OP_MSG && op[0] != JSS_OP_HMSG) || op[3] != sid) {
                continue;
            }
            tokens[written] = reply_token(b, op, prefix_len);
            seqs[written] = 0;
            if (op[0] == JSS_OP_MSG && parse_body(buf + p_off, p_len, body, &seen) &&
                !(seen & SEEN_OTHER_KEY) && body[3] == 0) {
                span stream = make_span(p_off + (size_t)body[0], p_off + (size_t)(body[0] + body[1]));
                int has_domain = body[5] >= 0;
                span domain = has_domain ? make_span(p_off + (size_t)body[4],
                                                     p_off + (size_t)(body[4] + body[5]))
                                         : NO_SPAN;
                seqs[written] = body[2];
                if (have_prev && same_bytes(b, stream, prev_stream) &&
                    has_domain == prev_has_domain &&
                    (!has_domain || same_bytes(b, domain, prev_domain))) {
                    kinds[written] = JSS_ACK_SAME;
                    written++;
                    continue;
                }
                have_prev = 1;
                prev_stream = stream;
                prev_domain = domain;
                prev_has_domain = has_domain;
                kinds[written] = JSS_ACK_NEW;
                special[1] = (int64_t)stream.off;
                special[2] = (int64_t)stream.len;
                special[3] = has_domain ? (int64_t)domain.off : 0;
                special[4] = has_domain ? (int64_t)domain.len : -1;
            } else {
                kinds[written] = JSS_ACK_OTHER;
                special[1] = (int64_t)p_off;
                special[2] = (int64_t)p_len;
                special[3] = op[6];
                special[4] = op[7];
            }
            special[0] = (int64_t)written;
            nspecial++;
            written++;
        }
        pos = (size_t)parsed[0];
        state[0] = (int64_t)pos;
        state[2] = (int64_t)nspecial;
        if ((size_t)n < want) {
            break; /* the rest is an incomplete op, or nothing */
        }
    }
    return (int64_t)written;
}
