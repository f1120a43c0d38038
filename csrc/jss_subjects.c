/*
 * jss_subjects.c - jss_valid_subject: what a subject may hold.
 *
 * Part of the C protocol core (declared in jss_proto.h; shared helpers in
 * jss_internal.h; csrc/README.md says which file does what). The pure-Python
 * twin in jetstream_sync/_protocol/ mirrors it check for check: keep the
 * order of checks identical when changing either.
 */
#include "jss_internal.h"

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
