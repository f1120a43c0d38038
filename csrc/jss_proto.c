/*
 * jss_proto.c - the NATS protocol core of jetstream_sync (see jss_proto.h).
 *
 * C99, no allocation, no mutable globals. Every read is bounds-checked
 * against the length the caller gave; the pure-Python twin in
 * jetstream_sync/_protocol/_py.py mirrors this file check for check, so keep
 * the order of checks identical when changing either.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jss_proto.h"

#define NEED_MORE 1
#define COMPLETE 0

typedef struct {
    size_t off;
    size_t len;
} span;

typedef struct {
    int64_t kind;
    span a;
    int64_t sid;
    span r;
    span h;
    span p;
    size_t next; /* index just past the op */
    size_t need; /* when incomplete: bytes from the op's start to its end */
} op_t;

static const span NO_SPAN = {0, 0};

static int is_blank(uint8_t c)
{
    return c == ' ' || c == '\t';
}

static int is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static uint8_t ascii_lower(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + ('a' - 'A')) : c;
}

static span make_span(size_t from, size_t to)
{
    span s;
    s.off = from;
    s.len = to - from;
    return s;
}

/* Trim blanks (and single quotes when quotes != 0) from both ends of [from, to). */
static span trim(const uint8_t *b, size_t from, size_t to, int quotes)
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
static int parse_uint(const uint8_t *b, span s, int64_t *out)
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
/* jss_parse                                                                */

/*
 * Match the op name at b[0..avail). Returns JSS_ERR_OP when the bytes can
 * never start an op, NEED_MORE when too few bytes are there to tell, else
 * COMPLETE with the kind and the name's length set. A whole name must be
 * followed by a blank or CR.
 */
static int match_op(const uint8_t *b, size_t avail, int64_t *kind, size_t *name_len)
{
    const char *name;
    size_t n, k, i;

    switch (ascii_lower(b[0])) {
    case 'm': *kind = JSS_OP_MSG; name = "msg"; break;
    case 'h': *kind = JSS_OP_HMSG; name = "hmsg"; break;
    case '+': *kind = JSS_OP_OK; name = "+ok"; break;
    case '-': *kind = JSS_OP_ERR; name = "-err"; break;
    case 'i': *kind = JSS_OP_INFO; name = "info"; break;
    case 'p':
        if (avail < 2) {
            return NEED_MORE;
        }
        switch (ascii_lower(b[1])) {
        case 'i': *kind = JSS_OP_PING; name = "ping"; break;
        case 'o': *kind = JSS_OP_PONG; name = "pong"; break;
        default: return JSS_ERR_OP;
        }
        break;
    default:
        return JSS_ERR_OP;
    }
    n = strlen(name);
    k = avail < n ? avail : n;
    for (i = 0; i < k; i++) {
        if (ascii_lower(b[i]) != (uint8_t)name[i]) {
            return JSS_ERR_OP;
        }
    }
    if (avail <= n) {
        return NEED_MORE;
    }
    if (!is_blank(b[n]) && b[n] != '\r') {
        return JSS_ERR_OP;
    }
    *name_len = n;
    return COMPLETE;
}

/* End of the token starting at i: the next blank, or to. */
static size_t token_end(const uint8_t *b, size_t i, size_t to, int has_tab)
{
    const uint8_t *space;

    if (has_tab) {
        while (i < to && !is_blank(b[i])) {
            i++;
        }
        return i;
    }
    /* the common case: memchr is much faster than a byte loop */
    space = memchr(b + i, ' ', to - i);
    return space ? (size_t)(space - b) : to;
}

/* Split [from, to) on runs of blanks; stores up to max_tok spans, returns the count
   (stops counting once it exceeds max_tok). */
static size_t split_args(const uint8_t *b, size_t from, size_t to, span *tok, size_t max_tok)
{
    int has_tab = memchr(b + from, '\t', to - from) != NULL;
    size_t count = 0;
    size_t i = from;

    for (;;) {
        size_t s;
        while (i < to && is_blank(b[i])) {
            i++;
        }
        if (i >= to || count == max_tok + 1) {
            return count;
        }
        s = i;
        i = token_end(b, i, to, has_tab);
        if (count < max_tok) {
            tok[count] = make_span(s, i);
        }
        count++;
    }
}

/* MSG <subject> <sid> [reply] <size> / HMSG <subject> <sid> [reply] <hdr> <total>. */
static int parse_msg_args(const uint8_t *b, size_t from, size_t to, op_t *op)
{
    span tok[5];
    int64_t hdr = 0, total = 0;
    int headers = op->kind == JSS_OP_HMSG;
    size_t min_tok = headers ? 4 : 3;
    size_t ntok = split_args(b, from, to, tok, 5);

    if (ntok != min_tok && ntok != min_tok + 1) {
        return JSS_ERR_ARGS;
    }
    op->a = tok[0];
    op->r = ntok == min_tok + 1 ? tok[2] : NO_SPAN;
    if (!parse_uint(b, tok[1], &op->sid)) {
        return JSS_ERR_NUMBER;
    }
    if (headers && !parse_uint(b, tok[ntok - 2], &hdr)) {
        return JSS_ERR_NUMBER;
    }
    if (!parse_uint(b, tok[ntok - 1], &total)) {
        return JSS_ERR_NUMBER;
    }
    if (total > JSS_MAX_PAYLOAD) {
        return JSS_ERR_SIZE;
    }
    if (headers && (hdr > total || hdr < JSS_MIN_HEADER_BLOCK)) {
        return JSS_ERR_HDR_SIZE;
    }
    /* only the sizes are known here; parse_body sets the offsets */
    op->h = make_span(0, (size_t)hdr);
    op->p = make_span(0, (size_t)total);
    return COMPLETE;
}

/* Check the payload that follows the control line ending at body; fills h and p. */
static int parse_body(const uint8_t *b, size_t pos, size_t body, size_t end, op_t *op)
{
    size_t hdr = op->h.len;
    size_t total = op->p.len;
    size_t stop = body + total;

    if (end - body < total + 2) {
        op->need = stop + 2 - pos;
        return NEED_MORE;
    }
    if (b[stop] != '\r' || b[stop + 1] != '\n') {
        return JSS_ERR_PAYLOAD_END;
    }
    if (op->kind == JSS_OP_HMSG) {
        if (memcmp(b + body, "NATS/1.0", 8) != 0 || memcmp(b + body + hdr - 4, "\r\n\r\n", 4) != 0) {
            return JSS_ERR_HDR_BLOCK;
        }
        op->h = make_span(body, body + hdr);
    } else {
        op->h = NO_SPAN;
    }
    op->p = make_span(body + hdr, stop);
    op->next = stop + 2;
    return COMPLETE;
}

/* Arguments of the ops without a payload. */
static int parse_simple_args(const uint8_t *b, size_t from, size_t to, op_t *op)
{
    span text;

    switch (op->kind) {
    case JSS_OP_ERR:
        text = trim(b, from, to, 1);
        op->a = text.len ? text : NO_SPAN;
        return COMPLETE;
    case JSS_OP_INFO:
        text = trim(b, from, to, 0);
        if (text.len == 0) {
            return JSS_ERR_ARGS;
        }
        op->a = text;
        return COMPLETE;
    default: /* PING, PONG, +OK take no arguments */
        return trim(b, from, to, 0).len ? JSS_ERR_ARGS : COMPLETE;
    }
}

/* Parse the op starting at pos. Returns COMPLETE, NEED_MORE or a JSS_ERR_* code. */
static int parse_one(const uint8_t *b, size_t pos, size_t end, op_t *op)
{
    size_t avail = end - pos;
    size_t name_len = 0, limit, lf, from, to;
    const uint8_t *nl;
    int rc;

    memset(op, 0, sizeof(*op));
    rc = match_op(b + pos, avail, &op->kind, &name_len);
    if (rc != COMPLETE) {
        return rc;
    }
    limit = avail > JSS_MAX_CONTROL_LINE ? pos + JSS_MAX_CONTROL_LINE + 1 : end;
    from = pos + name_len;
    nl = memchr(b + from, '\n', limit - from);
    if (nl == NULL) {
        return avail > JSS_MAX_CONTROL_LINE ? JSS_ERR_LINE_TOO_LONG : NEED_MORE;
    }
    lf = (size_t)(nl - b);
    if (b[lf - 1] != '\r') {
        return JSS_ERR_BARE_LF;
    }
    to = lf - 1;
    if (memchr(b + from, '\r', to - from) != NULL) {
        return JSS_ERR_STRAY_CR;
    }
    if (op->kind != JSS_OP_MSG && op->kind != JSS_OP_HMSG) {
        op->next = lf + 1;
        return parse_simple_args(b, from, to, op);
    }
    rc = parse_msg_args(b, from, to, op);
    if (rc != COMPLETE) {
        return rc;
    }
    return parse_body(b, pos, lf + 1, end, op);
}

static void store_op(int64_t *out, const op_t *op)
{
    out[0] = op->kind;
    out[1] = (int64_t)op->a.off;
    out[2] = (int64_t)op->a.len;
    out[3] = op->sid;
    out[4] = (int64_t)op->r.off;
    out[5] = (int64_t)op->r.len;
    out[6] = (int64_t)op->h.off;
    out[7] = (int64_t)op->h.len;
    out[8] = (int64_t)op->p.off;
    out[9] = (int64_t)op->p.len;
}

int64_t jss_parse(const char *buf, size_t start, size_t end,
                  int64_t *ops, size_t max_ops, int64_t *state)
{
    const uint8_t *b = (const uint8_t *)buf;
    size_t pos = start;
    size_t n = 0;

    state[0] = (int64_t)start;
    state[1] = 0;
    state[2] = (int64_t)start;
    if (start > end) {
        return JSS_ERR_RANGE;
    }
    while (n < max_ops && pos < end) {
        op_t op;
        int rc = parse_one(b, pos, end, &op);
        if (rc == NEED_MORE) {
            state[1] = (int64_t)op.need;
            break;
        }
        if (rc != COMPLETE) {
            state[0] = (int64_t)pos;
            state[2] = (int64_t)pos;
            return rc;
        }
        store_op(ops + n * JSS_OP_FIELDS, &op);
        n++;
        pos = op.next;
    }
    state[0] = (int64_t)pos;
    return (int64_t)n;
}

/* ------------------------------------------------------------------------ */
/* jss_parse_headers                                                        */

/* "NATS/1.0[ <3 digits>[ description]]" in [from, to). */
static int parse_status_line(const uint8_t *b, size_t from, size_t to, int64_t *meta)
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
static int find_line_end(const uint8_t *b, size_t from, size_t body_end, size_t *line_end,
                         size_t *next)
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

/* ------------------------------------------------------------------------ */
/* jss_valid_subject                                                        */

int jss_valid_subject(const char *subject, size_t len, int wildcards)
{
    const uint8_t *s = (const uint8_t *)subject;
    size_t i, token = 0;

    if (len == 0) {
        return 0;
    }
    for (i = 0; i <= len; i++) {
        if (i == len || s[i] == '.') {
            if (i == token) {
                return 0;
            }
            if (i - token == 1) {
                if (s[token] == '>' && (!wildcards || i != len)) {
                    return 0;
                }
                if (s[token] == '*' && !wildcards) {
                    return 0;
                }
            }
            token = i + 1;
        } else if (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r') || s[i] == 0) {
            return 0; /* space, \t \n \v \f \r, NUL */
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* jss_parse_puback: a strict JSON subset; anything unusual returns 0.      */

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

/* ------------------------------------------------------------------------ */
/* jss_encode_pub, jss_encode_hpub, jss_encode_headers                      */

#define ENC_MAX ((uint64_t)INT64_MAX)
#define HDR_PREFIX "NATS/1.0\r\n"
#define HDR_PREFIX_LEN 10

/* a + b, saturating at ENC_MAX (lengths from the caller cannot wrap the size;
   a saturated size is never written, see too_small). */
static uint64_t add_size(uint64_t a, uint64_t b)
{
    return (a > ENC_MAX || b > ENC_MAX - a) ? ENC_MAX : a + b;
}

/* Whether a frame of need bytes does not fit cap (or its size saturated). */
static int too_small(uint64_t need, size_t cap)
{
    return need >= ENC_MAX || need > cap;
}

static size_t count_digits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Copy n bytes to p (n may be 0 with src NULL); return p + n. */
static char *put(char *p, const char *src, size_t n)
{
    if (n) {
        memcpy(p, src, n);
    }
    return p + n;
}

/* Write v in decimal at p; return p past it. */
static char *put_uint(char *p, uint64_t v)
{
    size_t n = count_digits(v);
    size_t i;

    for (i = n; i > 0; i--) {
        p[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + n;
}

static int bad_key_byte(uint8_t c)
{
    return c < 0x21 || c == ':' || c == 0x7f;
}

/*
 * Validate kv (see jss_proto.h) and set *block_len to the size of its header
 * block. Returns 0 or a JSS_ENC_ERR_* code.
 */
static int scan_kv(const uint8_t *kv, size_t kvlen, uint64_t *block_len)
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
static char *put_headers(char *p, const char *kv, size_t kvlen)
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

/* Size of "<name><subject> [<reply> ]" (the part every frame's control line starts with). */
static uint64_t head_size(size_t name_len, size_t slen, size_t rlen)
{
    uint64_t size = add_size(name_len, slen);
    size = add_size(size, 1);
    return rlen ? add_size(size, add_size(rlen, 1)) : size;
}

static char *put_head(char *p, const char *name, size_t name_len, const char *subject,
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

int64_t jss_encode_pub(char *out, size_t cap, const char *subject, size_t slen,
                       const char *reply, size_t rlen, const char *payload, size_t plen)
{
    uint64_t need = head_size(4, slen, rlen);
    char *p;

    need = add_size(need, count_digits(plen) + 2);
    need = add_size(need, add_size(plen, 2));
    if (too_small(need, cap)) {
        return -(int64_t)need;
    }
    p = put_head(out, "PUB ", 4, subject, slen, reply, rlen);
    p = put_uint(p, plen);
    p = put(p, "\r\n", 2);
    p = put(p, payload, plen);
    p = put(p, "\r\n", 2);
    return (int64_t)(p - out);
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

/* ------------------------------------------------------------------------ */
/* jss_encode_batch_hpub and its BLAKE2b (RFC 7693)                         */

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

/* The 12 lowercase hex digits of BLAKE2b with a 6-byte digest of data keyed
   with key (klen <= 64), written at p; return p past them. */
static char *put_blake2b48_hex(char *p, const uint8_t *key, size_t klen, const uint8_t *data,
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
                              int64_t max_payload)
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
        int has_id, rc;
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
        } else {
            idlen = iplen + count_digits(index) + 1 + HASH_HEX_LEN;
        }
        block += MSG_ID_KEY_LEN + idlen + 2;
        total = block + plen;
        if (total > (uint64_t)max_payload) {
            return JSS_BATCH_ERR_TOO_BIG;
        }
        need = 5 + slen + 1 + rplen + count_digits(token) + 1 + count_digits(block) + 1 +
               count_digits(total) + 2 + total + 2;
        if (need > cap - used) {
            state[1] = -1;
            state[2] = (int64_t)need;
            return r - start;
        }
        p = put_head(out + used, "HPUB ", 5, subject, slen, NULL, 0);
        p = put(p, reply_prefix, rplen);
        p = put_uint(p, token);
        *p++ = ' ';
        p = put_uint(p, block);
        *p++ = ' ';
        p = put_uint(p, total);
        p = put(p, "\r\n", 2);
        if (kv != NULL) {
            p = put_headers(p, kv, kvlen) - 2; /* the id line goes before the blank line */
        } else {
            p = put(p, HDR_PREFIX, HDR_PREFIX_LEN);
        }
        p = put(p, MSG_ID_KEY, MSG_ID_KEY_LEN);
        if (has_id) {
            p = put(p, id, idlen);
        } else {
            p = put(p, id_prefix, iplen);
            p = put_uint(p, index);
            *p++ = ':';
            p = put_blake2b48_hex(p, (const uint8_t *)subject, slen < 64 ? slen : 64,
                                  (const uint8_t *)payload, plen);
        }
        p = put(p, "\r\n\r\n", 4);
        p = put(p, payload, plen);
        p = put(p, "\r\n", 2);
        used = (size_t)(p - out);
        state[0] = (int64_t)used;
    }
    state[1] = -1;
    return end - start;
}

/* ------------------------------------------------------------------------ */
/* jss_direct_meta_parse                                                    */

/* The value of n two-digit..four-digit decimal at b[i..i+n), or -1. */
static int64_t fixed_digits(const uint8_t *b, size_t i, size_t n)
{
    int64_t v = 0;
    size_t k;

    for (k = i; k < i + n; k++) {
        if (!is_digit(b[k])) {
            return -1;
        }
        v = v * 10 + (b[k] - '0');
    }
    return v;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = y / 400; /* callers pass years >= 1, so y >= 0: no negative division */
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int64_t days_in_month(int64_t y, int64_t m)
{
    static const int8_t days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) {
        return 29;
    }
    return days[m - 1];
}

/* YYYY-MM-DDTHH:MM:SS[.fraction]Z (1..9 fraction digits) to ns since the epoch. */
static int parse_stamp(const uint8_t *b, span s, int64_t *out)
{
    const uint8_t *t = b + s.off;
    int64_t year, month, day, hour, minute, second, frac = 0;
    size_t i, digits;

    if (s.len < 20 || s.len > 30 || t[4] != '-' || t[7] != '-' || t[10] != 'T'
        || t[13] != ':' || t[16] != ':' || t[s.len - 1] != 'Z') {
        return 0;
    }
    year = fixed_digits(t, 0, 4);
    month = fixed_digits(t, 5, 2);
    day = fixed_digits(t, 8, 2);
    hour = fixed_digits(t, 11, 2);
    minute = fixed_digits(t, 14, 2);
    second = fixed_digits(t, 17, 2);
    if (year < 1970 || year > 2261 || month < 1 || month > 12 || day < 1
        || day > days_in_month(year, month) || hour < 0 || hour > 23 || minute < 0
        || minute > 59 || second < 0 || second > 59) {
        return 0;
    }
    if (s.len > 20) {
        if (t[19] != '.' || s.len < 22) {
            return 0;
        }
        digits = s.len - 21;
        frac = fixed_digits(t, 20, digits);
        if (frac < 0) {
            return 0;
        }
        for (i = digits; i < 9; i++) {
            frac *= 10;
        }
    }
    *out = ((days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second)
            * 1000000000) + frac;
    return 1;
}

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
        || !parse_stamp(b, found[2], &stamp)) {
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

/* ------------------------------------------------------------------------ */
/* jss_direct_batch_decode: the header blocks of a batched direct get       */

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

/* n decimal digits at b[i..i+n) into *out; 0 when one is not a digit. */
static int db_digits(const uint8_t *b, size_t i, int n, int64_t *out)
{
    int64_t v = 0;
    int k;

    for (k = 0; k < n; k++) {
        if (!is_digit(b[i + (size_t)k])) {
            return 0;
        }
        v = v * 10 + (b[i + (size_t)k] - '0');
    }
    *out = v;
    return 1;
}

/*
 * YYYY-MM-DD[Tt ]HH:MM:SS[.F{1,9}](Z|z|[+-]HH:MM), as datetime accepts it
 * (year >= 1, a real date, second < 60, |offset| < 24 h), in units of unit_ns
 * since the epoch, rounded down. Returns 0 when malformed or out of range.
 */
static int db_time(const uint8_t *b, span s, int64_t unit_ns, int64_t *out)
{
    size_t i = s.off, end = s.off + s.len;
    int64_t y, mo, d, h, mi, sec, frac = 0, oh = 0, om = 0, secs, per;
    int digits = 0, sign = 0;

    if (s.len < 20 || !db_digits(b, i, 4, &y) || b[i + 4] != '-' || !db_digits(b, i + 5, 2, &mo)
        || b[i + 7] != '-' || !db_digits(b, i + 8, 2, &d)
        || (b[i + 10] != 'T' && b[i + 10] != 't' && b[i + 10] != ' ')
        || !db_digits(b, i + 11, 2, &h) || b[i + 13] != ':' || !db_digits(b, i + 14, 2, &mi)
        || b[i + 16] != ':' || !db_digits(b, i + 17, 2, &sec)) {
        return 0;
    }
    i += 19;
    if (i < end && b[i] == '.') {
        for (i++; i < end && is_digit(b[i]) && digits < 9; i++, digits++) {
            frac = frac * 10 + (b[i] - '0');
        }
        if (digits == 0) {
            return 0;
        }
        for (; digits < 9; digits++) {
            frac *= 10;
        }
    }
    if (i + 1 == end && (b[i] == 'Z' || b[i] == 'z')) {
        sign = 0;
    } else if (i + 6 == end && (b[i] == '+' || b[i] == '-') && db_digits(b, i + 1, 2, &oh)
               && b[i + 3] == ':' && db_digits(b, i + 4, 2, &om)) {
        sign = b[i] == '+' ? 1 : -1;
    } else {
        return 0;
    }
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59
        || sec > 59 || oh * 60 + om >= 1440) {
        return 0;
    }
    secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - sign * (oh * 3600 + om * 60);
    per = 1000000000 / unit_ns;
    if (secs > (INT64_MAX - 1000000000) / per || secs < INT64_MIN / per) {
        return 0;
    }
    *out = secs * per + frac / unit_ns;
    return 1;
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
            if (!db_time(b, time, unit_ns, &times[count])) {
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
