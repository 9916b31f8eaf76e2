/*
 * redis_glob.c - the glob of KEYS, SCAN MATCH and CONFIG GET as Redis
 * matches it (its stringmatchlen), so that a pattern finds the same keys
 * here as there, malformed patterns included.
 *
 * The syntax: '*' any run, '?' one byte, '[...]' a set ('^' first negates;
 * 'a-z' a range, either order; '\' escapes the next byte), '\' escapes the
 * next byte. Redis is lenient and so is this: there is no error. A '['
 * that never closes is a set running to the pattern's end ("[ab" matches
 * "a" or "b"; "[" matches nothing), "[^]" is the empty set negated (any one
 * byte), a trailing '\' is a literal backslash, '!' has no meaning. Range
 * ends compare as signed chars, as Redis's do where char is signed
 * (x86-64).
 *
 * Cost: each '*' tries every suffix once; once the rest of the pattern has
 * failed at every position after a '*', the earlier stars cannot succeed
 * either (the flag skip), so the cost is polynomial, not exponential.
 * Recursion depth is the number of '*' in the pattern (<= PC_GLOB_MAX).
 */
#include "resp.h"

/* tolower() of the C locale on a (signed) char, as Redis calls it: ASCII
 * letters only, every other value unchanged. */
static int fold(int ch, int nocase)
{
    return nocase && ch >= 'A' && ch <= 'Z' ? ch + 32 : ch;
}

static int match_impl(const char *p, size_t pl, const char *s, size_t sl, int nocase, int *skip)
{
    while (pl > 0 && sl > 0) {
        switch (p[0]) {
        case '*':
            while (pl > 1 && p[1] == '*') {
                p++;
                pl--;
            }
            if (pl == 1)
                return 1;
            while (sl > 0) {
                if (match_impl(p + 1, pl - 1, s, sl, nocase, skip))
                    return 1;
                if (*skip)
                    return 0;
                s++;
                sl--;
            }
            *skip = 1;
            return 0;
        case '?':
            s++;
            sl--;
            break;
        case '[': {
            p++;
            pl--;
            int neg = pl > 0 && p[0] == '^';
            if (neg) {
                p++;
                pl--;
            }
            int hit = 0;
            for (;;) {
                if (pl == 0) { /* never closed: stand on the last byte */
                    p--;
                    pl++;
                    break;
                }
                if (p[0] == '\\' && pl >= 2) {
                    p++;
                    pl--;
                    if (fold(p[0], nocase) == fold(s[0], nocase))
                        hit = 1;
                } else if (p[0] == ']') {
                    break;
                } else if (pl >= 3 && p[1] == '-') {
                    int lo = fold((signed char)p[0], nocase), hi = fold((signed char)p[2], nocase);
                    int ch = fold((signed char)s[0], nocase);
                    if (lo > hi) {
                        int t = lo;
                        lo = hi;
                        hi = t;
                    }
                    p += 2;
                    pl -= 2;
                    if (ch >= lo && ch <= hi)
                        hit = 1;
                } else if (fold(p[0], nocase) == fold(s[0], nocase)) {
                    hit = 1;
                }
                p++;
                pl--;
            }
            if (neg)
                hit = !hit;
            if (!hit)
                return 0;
            s++;
            sl--;
            break;
        }
        case '\\':
            if (pl >= 2) {
                p++;
                pl--;
            }
            /* fall through */
        default:
            if (fold(p[0], nocase) != fold(s[0], nocase))
                return 0;
            s++;
            sl--;
            break;
        }
        p++;
        pl--;
        if (sl == 0) {
            while (pl > 0 && p[0] == '*') {
                p++;
                pl--;
            }
            break;
        }
    }
    return pl == 0 && sl == 0;
}

int srv_glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase)
{
    int skip = 0;
    return match_impl(pat, plen, s, slen, nocase, &skip);
}
