/*
 * jss_round_trip.c - a lone caller's wait for its reply, and a non-blocking send.
 *
 * The one file of the C core that does IO (see jss_proto.h). jss_round_trip
 * waits for a socket it borrows with a timeout (the caller's request went
 * out through its writer), receives into the caller's read buffer and parses
 * what arrived with jss_parse. It decides nothing about the connection: whatever is not
 * exactly the one reply it waits for is reported back, untouched, for the
 * caller's ordinary routing. jss_send_nowait is the writer's send: it
 * reports what went out in memory the caller owns, so a caller interrupted
 * right after it (a signal handler's exception) still knows. The fd is never
 * closed here, and no state is kept between calls.
 *
 * The pure-Python twins in jetstream_sync/_protocol/_py/round_trip.py do the
 * same system calls in the same order and report the same results.
 */
#define _GNU_SOURCE /* MSG_DONTWAIT, MSG_NOSIGNAL under -std=c99 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "jss_internal.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

/* Whether op (JSS_OP_FIELDS int64s) is a MSG or HMSG on exactly reply[0..rlen). */
static int is_reply(const char *buf, const int64_t *op, const char *reply, size_t rlen)
{
    if (op[0] != JSS_OP_MSG && op[0] != JSS_OP_HMSG) {
        return 0;
    }
    return (size_t)op[2] == rlen && memcmp(buf + op[1], reply, rlen) == 0;
}

/* Parse buf[0..end) and report whether it holds exactly the reply (see jss_proto.h). */
static int64_t parse_reply(const char *buf, size_t end, const char *reply, size_t rlen,
                           int decode, int64_t *out)
{
    int64_t ops[2 * JSS_OP_FIELDS];
    int64_t state[JSS_STATE_FIELDS];
    int64_t n = jss_parse(buf, 0, end, ops, 2, state);
    int64_t *op = out + JSS_RT_OP;

    if (n != 1 || !is_reply(buf, ops, reply, rlen)) {
        return JSS_RT_OTHER; /* several ops, none yet, another op or bad bytes */
    }
    out[JSS_RT_CONSUMED] = state[0];
    out[JSS_RT_NEED] = state[1];
    memcpy(op, ops, sizeof(int64_t) * JSS_OP_FIELDS);
    if (decode == JSS_DECODE_PUBACK && ops[0] == JSS_OP_MSG) {
        out[JSS_RT_PUBACK_OK] =
            jss_parse_puback(buf + ops[8], (size_t)ops[9], out + JSS_RT_PUBACK);
    }
    return JSS_RT_REPLY;
}

int64_t jss_round_trip(int fd, char *buf, size_t have, size_t cap, const char *reply,
                       size_t rlen, int timeout_ms, int decode, int64_t *out)
{
    struct pollfd pfd;
    ssize_t got;
    int ready;
    int i;

    for (i = 0; i < JSS_RT_FIELDS; i++) {
        out[i] = 0;
    }
    if (have >= cap) {
        return JSS_RT_IDLE; /* no room to receive into: the caller's loop grows the buffer */
    }
    pfd.fd = fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    ready = poll(&pfd, 1, timeout_ms);
    if (ready < 0) {
        out[JSS_RT_ERRNO] = errno;
        return errno == EINTR ? JSS_RT_INTERRUPTED : JSS_RT_RECV_ERROR;
    }
    if (ready == 0) {
        return JSS_RT_IDLE;
    }
    got = recv(fd, buf + have, cap - have, MSG_DONTWAIT);
    if (got < 0) {
        out[JSS_RT_ERRNO] = errno;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return JSS_RT_IDLE;
        }
        return errno == EINTR ? JSS_RT_INTERRUPTED : JSS_RT_RECV_ERROR;
    }
    if (got == 0) {
        return JSS_RT_EOF;
    }
    out[JSS_RT_RECEIVED] = (int64_t)got;
    return parse_reply(buf, have + (size_t)got, reply, rlen, decode, out);
}

int64_t jss_send_nowait(int fd, const char *data, size_t len, int64_t *out)
{
    size_t sent = 0;

    out[JSS_SEND_SENT] = 0;
    out[JSS_SEND_ERRNO] = 0;
    while (sent < len) {
        ssize_t n = send(fd, data + sent, len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                out[JSS_SEND_ERRNO] = errno;
            }
            break;
        }
        sent += (size_t)n;
        out[JSS_SEND_SENT] = (int64_t)sent;
    }
    return (int64_t)sent;
}
