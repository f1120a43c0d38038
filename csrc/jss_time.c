/*
 * jss_time.c - RFC 3339 time stamps to integers since the epoch.
 *
 * Part of the C protocol core (see jss_internal.h and csrc/README.md). The
 * Python twins (_stamp_ns in _py/direct_meta.py, _time in _direct_batch.py)
 * read the same stamps, and the tests compare them.
 */
#include "jss_internal.h"

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

/* The strict form: see jss_internal.h. */
int jss_time_utc_ns(const uint8_t *b, span s, int64_t *out)
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

/* n decimal digits at b[i..i+n) into *out; 0 when one is not a digit. */
static int read_digits(const uint8_t *b, size_t i, int n, int64_t *out)
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
int jss_time_units(const uint8_t *b, span s, int64_t unit_ns, int64_t *out)
{
    size_t i = s.off, end = s.off + s.len;
    int64_t y, mo, d, h, mi, sec, frac = 0, oh = 0, om = 0, secs, per;
    int digits = 0, sign = 0;

    if (s.len < 20 || !read_digits(b, i, 4, &y) || b[i + 4] != '-' || !read_digits(b, i + 5, 2, &mo)
        || b[i + 7] != '-' || !read_digits(b, i + 8, 2, &d)
        || (b[i + 10] != 'T' && b[i + 10] != 't' && b[i + 10] != ' ')
        || !read_digits(b, i + 11, 2, &h) || b[i + 13] != ':' || !read_digits(b, i + 14, 2, &mi)
        || b[i + 16] != ':' || !read_digits(b, i + 17, 2, &sec)) {
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
    } else if (i + 6 == end && (b[i] == '+' || b[i] == '-') && read_digits(b, i + 1, 2, &oh)
               && b[i + 3] == ':' && read_digits(b, i + 4, 2, &om)) {
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
