/*
 * jss_proto.h - the NATS protocol core of jetstream_sync.
 *
 * Sans-IO: every function reads only the bytes it is given (never past the
 * stated length), writes only into caller-provided arrays, allocates nothing
 * and keeps no state between calls, so any number of threads may call it.
 * The exceptions are jss_round_trip and jss_send_nowait (at the end), which
 * send (and receive) on a socket they borrow.
 *
 * This file is also read by cffi's cdef (jetstream_sync/_build_ffi.py drops
 * every line starting with '#'), so outside the include guard it holds only
 * declarations that cdef understands: no macros, no includes. The .c files
 * include it through jss_internal.h, which includes <stddef.h> and <stdint.h>
 * first. Each function is implemented in the file of its job (csrc/README.md).
 */
#ifndef JSS_PROTO_H
#define JSS_PROTO_H

/* Op kinds and limits. */
enum {
    JSS_OP_MSG = 1,
    JSS_OP_HMSG = 2,
    JSS_OP_PING = 3,
    JSS_OP_PONG = 4,
    JSS_OP_OK = 5,
    JSS_OP_ERR = 6,
    JSS_OP_INFO = 7,
    /* int64 slots per op: kind, a_off, a_len, sid, r_off, r_len,
       h_off, h_len, p_off, p_len */
    JSS_OP_FIELDS = 10,
    /* int64 slots per header pair: key_off, key_len, value_off, value_len */
    JSS_HDR_FIELDS = 4,
    /* int64 slots of jss_parse_headers' meta: status, desc_off, desc_len, err_pos */
    JSS_HDR_META_FIELDS = 4,
    /* int64 slots of jss_parse's state: consumed, need, err_pos */
    JSS_STATE_FIELDS = 3,
    /* int64 slots of jss_parse_puback's out: stream_off, stream_len, seq,
       duplicate, domain_off, domain_len (-1 when absent) */
    JSS_PUBACK_FIELDS = 6,
    /* int64 slots of jss_direct_meta_parse's out: subject_off, subject_len,
       seq, time_ns, op_off, op_len, reason_off, reason_len (-1 when absent) */
    JSS_DIRECT_META_FIELDS = 8,
    JSS_MAX_PAYLOAD = 67108864,
    JSS_MAX_CONTROL_LINE = 1048576,
    /* "NATS/1.0\r\n\r\n" */
    JSS_MIN_HEADER_BLOCK = 12
};

/* Errors (always negative). */
enum {
    JSS_ERR_RANGE = -1,         /* start > end */
    JSS_ERR_OP = -2,            /* bytes that cannot start any op name */
    JSS_ERR_LINE_TOO_LONG = -3, /* control line longer than JSS_MAX_CONTROL_LINE */
    JSS_ERR_BARE_LF = -4,       /* LF not preceded by CR ending a control line */
    JSS_ERR_STRAY_CR = -5,      /* CR inside a control line */
    JSS_ERR_ARGS = -6,          /* wrong number or shape of arguments */
    JSS_ERR_NUMBER = -7,        /* sid or size not an unsigned int64 decimal */
    JSS_ERR_SIZE = -8,          /* payload larger than JSS_MAX_PAYLOAD */
    JSS_ERR_HDR_SIZE = -9,      /* header size > total size */
    JSS_ERR_PAYLOAD_END = -10,  /* payload not followed by CRLF */
    JSS_ERR_HDR_PREFIX = -12,   /* header block does not start with the NATS/1.0 line */
    JSS_ERR_HDR_END = -13,      /* header block does not end with a blank line */
    JSS_ERR_HDR_STATUS = -14,   /* status code is not three digits */
    JSS_ERR_HDR_LINE = -15,     /* header line without ':' */
    JSS_ERR_HDR_KEY = -16,      /* header line with an empty key */
    JSS_ERR_HDR_CRLF = -17      /* CR or LF inside a header line */
};

/*
 * Parse every whole op in buf[start:end], up to max_ops of them.
 * Writes JSS_OP_FIELDS int64s per op into ops (offsets absolute into buf) and
 * state[0] = consumed (index just past the last whole op), state[1] = need
 * (bytes counted from consumed that the next, incomplete op occupies when its
 * control line is complete, else 0), state[2] = offset of the op in error.
 * Returns the number of ops written, or a JSS_ERR_* code.
 */
int64_t jss_parse(const char *buf, size_t start, size_t end,
                  int64_t *ops, size_t max_ops, int64_t *state);

/*
 * Validate a header block and locate its parts. Writes up to max_pairs pairs
 * (JSS_HDR_FIELDS int64s each) and meta: status (-1 when none), description
 * offset and length, offset of the line in error. Returns the total number of
 * pairs (which may exceed max_pairs: call again with room for all of them),
 * or a JSS_ERR_HDR_* code.
 */
int64_t jss_parse_headers(const char *block, size_t len,
                          int64_t *pairs, size_t max_pairs, int64_t *meta);

/* 1 when subject is a valid subject, else 0: non-empty dot-separated tokens,
 * each non-empty and free of ASCII whitespace (space \t \n \v \f \r) and NUL;
 * a token that is exactly "*" (anywhere) or ">" (last only) needs wildcards != 0. */
int jss_valid_subject(const char *subject, size_t len, int wildcards);

/*
 * Fast path for a JetStream PubAck body. Returns 1 and fills out (see
 * JSS_PUBACK_FIELDS) when data is a flat JSON object of the accepted shape,
 * else 0 (the caller falls back to a full JSON parser).
 */
int jss_parse_puback(const char *data, size_t len, int64_t *out);

/*
 * The async-publish acks of one read, decoded at once (the ack multiplexer's
 * reply route). For every MSG and HMSG op in buf[start:end] whose sid is sid
 * (other ops are skipped), up to max_acks of them, in order:
 *
 *   tokens[i]  the reply subject after its first prefix_len bytes, when that is
 *              an unsigned decimal that fits an int64; else -1;
 *   kinds[i]   JSS_ACK_SAME: a plain PubAck (an MSG whose body jss_parse_puback
 *              reads, holding no members but stream, seq, domain and a false
 *              duplicate) of the same stream and domain as the plain PubAck
 *              before it in this call; JSS_ACK_NEW: a plain PubAck that is the
 *              first of the call or names another stream or domain;
 *              JSS_ACK_OTHER: anything else (headers, a status, an error, a
 *              duplicate, counters, batches, other members, other JSON);
 *   seqs[i]    the PubAck's seq (0 for JSS_ACK_OTHER);
 *
 * and, for every reply that is not JSS_ACK_SAME, JSS_ACK_SPECIAL_FIELDS int64s
 * in specials (offsets absolute into buf): i, then for JSS_ACK_NEW the stream's
 * offset and length and the domain's (length -1 when absent), for
 * JSS_ACK_OTHER the payload's and the header block's (length 0 when none).
 * state (JSS_ACK_STATE_FIELDS): bytes consumed (just past the last op read),
 * the offset of the op in error, the number of specials written. specials
 * needs room for max_acks entries. Returns the number of acks written (fewer
 * than max_acks when the whole ops in the range are done), or a JSS_ERR_* code.
 */
enum {
    JSS_ACK_SAME = 0,
    JSS_ACK_NEW = 1,
    JSS_ACK_OTHER = 2,
    JSS_ACK_SPECIAL_FIELDS = 5,
    JSS_ACK_STATE_FIELDS = 3
};

int64_t jss_puback_batch(const char *buf, size_t start, size_t end, int64_t sid,
                         size_t prefix_len, size_t max_acks, int64_t *tokens, int64_t *seqs,
                         uint8_t *kinds, int64_t *specials, int64_t *state);

/*
 * Fast path for the header block of a direct-get reply (a stored message):
 * one pass reading the first Nats-Subject, Nats-Sequence, Nats-Time-Stamp,
 * KV-Operation and Nats-Marker-Reason (keys matched exactly, values trimmed
 * of blanks as jss_parse_headers does). Returns 1 and fills out (see
 * JSS_DIRECT_META_FIELDS) when the block is a valid header block with no
 * status, the first three are present, the sequence is an unsigned decimal
 * that fits an int64 and the time stamp is YYYY-MM-DDTHH:MM:SS[.1-9
 * digits]Z in years 1970..2261 (nanoseconds since the epoch fit an int64);
 * else 0 (the caller falls back to the generic header parser).
 */
int jss_direct_meta_parse(const char *block, size_t len, int64_t *out);

/* Encoder results (jss_encode_*). */
enum {
    JSS_ENC_ERR_KEY = -1,   /* a header key is empty or holds a byte < 0x21, ':' or >= 0x7f */
    JSS_ENC_ERR_VALUE = -2, /* a header value holds CR or LF */
    JSS_ENC_ERR_KV = -3,    /* kv is not key NUL value NUL ...: odd count or no trailing NUL */
    /* Every encoding is longer than this (a header block alone is 12 bytes),
       so a result <= -JSS_ENC_MIN_SIZE is never an error code: it is
       -(bytes needed), and the caller calls again with cap >= that. */
    JSS_ENC_MIN_SIZE = 10
};

/*
 * The encoders write one whole encoding into out[0..cap) and return its
 * length. When cap is too small they write nothing and return -(length
 * needed) (out may then be NULL with cap 0, to ask for the size). A needed
 * size beyond INT64_MAX is reported as -INT64_MAX. Errors (-1..-3) are found
 * before the size is compared with cap, so bad input is reported whatever cap
 * is. Nothing validates subjects or payload sizes here: callers do.
 *
 * kv holds header pairs flattened as key NUL value NUL key NUL value NUL ...
 * (kvlen counts every byte, the last NUL included; kvlen 0 means no pairs).
 * Pairs are checked in order, each key before its value; the first bad one
 * decides the error. Header lines are written as "key: value\r\n".
 */

/* HPUB <subject> [<reply> ]<hdr_len> <total_len>\r\n<header block><payload>\r\n. */
int64_t jss_encode_hpub(char *out, size_t cap, const char *subject, size_t slen,
                        const char *reply, size_t rlen, const char *kv, size_t kvlen,
                        const char *payload, size_t plen);

/* Just the header block: NATS/1.0\r\n, one line per pair, \r\n. */
int64_t jss_encode_headers(char *out, size_t cap, const char *kv, size_t kvlen);

/*
 * Batch publishing: a whole batch of JetStream messages in one call.
 *
 * A column is Arrow's layout of a binary/string array with 64-bit offsets:
 * row r's bytes are data[offsets[first + r] .. offsets[first + r + 1]) and,
 * when valid is not NULL, bit (first + r) of valid (LSB first) is 0 for a
 * null row. first is Arrow's array offset.
 */
typedef struct {
    const char *data;
    const int64_t *offsets;
    const uint8_t *valid;
    int64_t first;
} jss_batch_column;

/* jss_encode_batch_hpub results (besides JSS_ENC_ERR_KEY/VALUE/KV for a
   row's header pairs). */
enum {
    JSS_BATCH_ERR_NULL_DATA = -21,  /* a row's payload is null */
    JSS_BATCH_ERR_NO_SUBJECT = -22, /* a row's subject is null or empty and there is no default */
    JSS_BATCH_ERR_SUBJECT = -23,    /* a row's subject is not one to publish to */
    JSS_BATCH_ERR_MSG_ID = -24,     /* a row's msg id holds CR or LF */
    JSS_BATCH_ERR_TOO_BIG = -25,    /* header block + payload larger than max_payload */
    JSS_BATCH_ERR_LINE = -26,       /* subject + reply subject longer than line_room */
    /* int64 slots of jss_encode_batch_hpub's state: bytes written, row in
       error, bytes the next row needs when it did not fit */
    JSS_BATCH_STATE_FIELDS = 3
};

/*
 * Encode rows start..end-1 of a batch as HPUB frames into out[0..cap):
 *
 *   HPUB <subject> <reply_prefix><first_token + r - start><reply_suffix> <hdr> <total>\r\n
 *   NATS/1.0\r\n<the row's header pairs>Nats-Msg-Id: <id>\r\n\r\n<payload>\r\n
 *
 * subjects (may be NULL): a null or empty subject takes default_subject;
 * each subject must be valid without wildcards. msg_ids (may be NULL): a
 * null id is derived as id_prefix + decimal(first_index + r - start) + ":"
 * + the 12 hex digits of BLAKE2b-48 of the payload keyed with the first 64
 * bytes of the subject (what Python's hashlib.blake2b(payload,
 * digest_size=6, key=subject[:64]).hexdigest() gives); with id_prefix NULL
 * such a row gets no id, and a row with neither id nor headers is written
 * as "PUB <subject> <reply> <len>" instead. headers (may be
 * NULL; null rows have none): each row holds kv pairs as for jss_encode_hpub.
 * A frame whose header block and payload exceed max_payload is an error, and
 * so is one whose subject and reply subject together take more than
 * line_room bytes (what the server's max_control_line leaves them).
 *
 * Returns the number of rows written (end - start unless out filled up:
 * then state[2] = the bytes the next row needs), with state[0] = bytes
 * written; or a negative error code (JSS_BATCH_ERR_* or JSS_ENC_ERR_*) with
 * state[1] = the row in error (every row before it was checked and written).
 */
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
                              int64_t line_room);

/*
 * Batched direct get (ADR-31), decoded a whole batch at a time.
 *
 * blocks holds the header blocks of direct-get replies laid end to end, each
 * from "NATS/1.0" up to and including its blank line (a block ends at its
 * first CRLFCRLF). For each block i, up to max_blocks of them, it writes:
 *
 *   kinds[i]    JSS_DIRECT_BATCH_MSG (a stored message), JSS_DIRECT_BATCH_MSG_HEADERS
 *               (a stored message that also carries headers of its own), or the
 *               reply's status code, 0-999 (204 end of batch, 404, 408, 413...);
 *   seqs[i]     Nats-Sequence (0 for a status);
 *   times[i]    Nats-Time-Stamp (RFC 3339, up to nine fractional digits, Z or an
 *               offset) in units of unit_ns nanoseconds since 1970-01-01T00:00:00Z,
 *               rounded down (unit_ns is 1, 1000, 1000000 or 1000000000; 0 for a status);
 *   subjects    the Nats-Subject value appended (nothing for a status), with
 *               subj_offsets[i + 1] its end (subj_offsets[0] = 0): Arrow's
 *               string offsets; subjects_cap >= len always suffices.
 *
 * A message block must hold Nats-Subject, Nats-Sequence and Nats-Time-Stamp
 * (the first of each counts); any key other than the direct-get ones
 * (Nats-Stream, Nats-Subject, Nats-Sequence, Nats-Time-Stamp, Nats-Num-Pending,
 * Nats-Last-Sequence, Nats-UpTo-Sequence) is a header of the message's own.
 * Blocks are validated like jss_parse_headers does. state (JSS_DIRECT_BATCH_STATE_FIELDS):
 * bytes consumed (just past the last block decoded), the offset of the block or
 * line in error, the number of message blocks, the number of those with headers
 * of their own. Returns the number of blocks decoded, or a JSS_ERR_HDR_* or
 * JSS_DIRECT_BATCH_ERR_* code.
 */
enum {
    JSS_DIRECT_BATCH_MSG = -1,
    JSS_DIRECT_BATCH_MSG_HEADERS = -2,
    JSS_DIRECT_BATCH_STATE_FIELDS = 4,
    JSS_DIRECT_BATCH_ERR_MISSING = -40,  /* a message block lacks subject, sequence or time */
    JSS_DIRECT_BATCH_ERR_SEQUENCE = -41, /* Nats-Sequence is not an unsigned int64 decimal */
    JSS_DIRECT_BATCH_ERR_TIME = -42,     /* Nats-Time-Stamp is not RFC 3339 or out of range */
    JSS_DIRECT_BATCH_ERR_UNIT = -43,     /* unit_ns is not 1, 1000, 1000000 or 1000000000 */
    JSS_DIRECT_BATCH_ERR_SPACE = -44     /* the subjects do not fit subjects_cap */
};

int64_t jss_direct_batch_decode(const char *blocks, size_t len, size_t max_blocks,
                                int64_t unit_ns, int32_t *kinds, int64_t *seqs,
                                int64_t *times, int32_t *subj_offsets, char *subjects,
                                size_t subjects_cap, int64_t *state);

/*
 * The waiting half of a lone caller's round trip: THE ONE FUNCTION OF THE CORE
 * THAT READS THE SOCKET (csrc/jss_round_trip.c). The caller has sent its
 * request through its writer and holds the connection's read role. fd is a
 * connected TCP socket, borrowed: it is never closed, and only used with
 * poll and a non-blocking recv. It
 *
 *  1. polls fd for up to timeout_ms;
 *  2. receives once into buf[have..cap) (buf[0..have) holds bytes received
 *     earlier and not yet parsed) and parses buf[0..have + received) with
 *     jss_parse;
 *  3. returns JSS_RT_REPLY when the parsed ops are exactly one MSG or HMSG
 *     whose subject is reply[0..rlen): its fields, the bytes consumed and the
 *     next op's need are in out; the decoder named by decode (JSS_DECODE_*)
 *     reads the reply's body into out: with JSS_DECODE_PUBACK, a MSG's payload
 *     is read by jss_parse_puback (offsets relative to the payload). Anything
 *     else received (other ops, a partial frame, bytes that are not protocol)
 *     returns JSS_RT_OTHER: the bytes are in buf, for the caller to parse and
 *     route as usual.
 *
 * out holds JSS_RT_FIELDS int64s, all written (0 unless said otherwise).
 * Returns a JSS_RT_* status.
 */
enum {
    JSS_RT_REPLY = 1,       /* the reply alone was received (and parsed) */
    JSS_RT_OTHER = 2,       /* bytes were received that the caller must route */
    JSS_RT_IDLE = 3,        /* the timeout passed (or nothing was there to read) */
    JSS_RT_INTERRUPTED = 4, /* poll or recv saw EINTR (a signal for the caller) */
    JSS_RT_EOF = 5,         /* the peer closed the connection */
    JSS_RT_RECV_ERROR = 6,  /* poll or recv failed: errno in out */
    /* int64 slots of out: the bytes received, the bytes consumed and the next
       op's need (JSS_RT_REPLY), errno, 1 when the PubAck fields are valid; then
       the reply's JSS_OP_FIELDS; then JSS_PUBACK_FIELDS */
    JSS_RT_RECEIVED = 0,
    JSS_RT_CONSUMED = 1,
    JSS_RT_NEED = 2,
    JSS_RT_ERRNO = 3,
    JSS_RT_PUBACK_OK = 4,
    JSS_RT_OP = 5,
    JSS_RT_PUBACK = 15,
    JSS_RT_FIELDS = 21
};

/* The readers jss_round_trip can run on a reply's body (its decode argument). */
enum {
    JSS_DECODE_NONE = 0,  /* none: the caller reads the body */
    JSS_DECODE_PUBACK = 1 /* a MSG's payload by jss_parse_puback */
};

int64_t jss_round_trip(int fd, char *buf, size_t have, size_t cap, const char *reply,
                       size_t rlen, int timeout_ms, int decode, int64_t *out);

/*
 * The writer's send (csrc/jss_round_trip.c): non-blocking sends of
 * data[0..len) on fd (borrowed, as above) until all is sent or the socket
 * takes no more (EAGAIN, EINTR: not failures). out holds JSS_SEND_FIELDS
 * int64s: the bytes sent so far, updated after each send, and the errno of a
 * send that failed (0 when none did). The report is in memory the caller
 * owns, so a caller interrupted right after the call (a signal handler's
 * exception) still knows how much went out.
 * Returns the bytes sent.
 */
enum {
    JSS_SEND_SENT = 0,
    JSS_SEND_ERRNO = 1,
    JSS_SEND_FIELDS = 2
};

int64_t jss_send_nowait(int fd, const char *data, size_t len, int64_t *out);

#endif
