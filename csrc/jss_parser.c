/*
 * jss_parser.c - jss_parse: the ops the server sends, located in a buffer.
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

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

static uint8_t ascii_lower(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + ('a' - 'A')) : c;
}

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
    if (headers && hdr > total) {
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
        /* The block is handed on as it came: another client wrote it, and the
           server forwards it unchecked. Reading it (jss_parse_headers) checks it,
           so a bad one fails that message's headers, never the connection. */
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
