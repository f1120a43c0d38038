/*
 * jss_puback.c - jss_parse_puback: a JetStream PubAck body read by a strict JSON subset;
 * anything unusual returns 0 (the caller uses a full JSON parser).
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
    }
    return 1;
}

int jss_parse_puback(const char *data, size_t len, int64_t *out)
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
    return c.i == c.n && (seen & 3) == 3;
}
