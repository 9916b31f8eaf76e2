/*
 * fuzz_redis_glob.c - the glob of KEYS, SCAN MATCH and CONFIG GET as
 * Redis matches it (src/server/redis_glob.c). The input is a pattern and a
 * subject: byte 0 is the pattern's length (modulo what is left), then the
 * pattern, then the subject; NUL and every other byte are ordinary.
 *
 * Invariants: the match answers 0 or 1 and reads nothing past either
 * string (both are copied to blocks of exactly their size); it agrees with
 * a plain reference that has no early exit (the skip flag of redis_glob.c
 * must never change an answer), for patterns with at most 6 '*'; the
 * pattern made of the subject with every byte escaped matches it; a
 * case-folded match of a pattern with no letters is the exact match.
 */
#include "fuzz_target.h"
#include "resp.h"

#include <ctype.h>
#include <string.h>

/* Redis's stringmatchlen without the skip flag (exponential in the number
 * of stars: only run on few). */
static int ref(const unsigned char *p, size_t pl, const unsigned char *s, size_t sl)
{
    while (pl > 0 && sl > 0) {
        if (p[0] == '*') {
            while (pl > 1 && p[1] == '*') {
                p++;
                pl--;
            }
            if (pl == 1)
                return 1;
            for (; sl > 0; s++, sl--)
                if (ref(p + 1, pl - 1, s, sl))
                    return 1;
            return 0;
        }
        if (p[0] == '?') {
            s++;
            sl--;
        } else if (p[0] == '[') {
            p++;
            pl--;
            int neg = pl > 0 && p[0] == '^', hit = 0;
            if (neg) {
                p++;
                pl--;
            }
            for (;;) {
                if (pl == 0) {
                    p--;
                    pl++;
                    break;
                }
                if (p[0] == '\\' && pl >= 2) {
                    p++;
                    pl--;
                    hit |= p[0] == s[0];
                } else if (p[0] == ']') {
                    break;
                } else if (pl >= 3 && p[1] == '-') {
                    int lo = (signed char)p[0], hi = (signed char)p[2], ch = (signed char)s[0];
                    if (lo > hi) {
                        int t = lo;
                        lo = hi;
                        hi = t;
                    }
                    hit |= ch >= lo && ch <= hi;
                    p += 2;
                    pl -= 2;
                } else {
                    hit |= p[0] == s[0];
                }
                p++;
                pl--;
            }
            if (neg ? hit : !hit)
                return 0;
            s++;
            sl--;
        } else {
            if (p[0] == '\\' && pl >= 2) {
                p++;
                pl--;
            }
            if (p[0] != s[0])
                return 0;
            s++;
            sl--;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t pl = data[0] % size, sl = size - 1 - pl;
    char *p = malloc(pl ? pl : 1), *s = malloc(sl ? sl : 1), *esc = malloc(2 * sl + 1);
    FUZZ_CHECK(p != NULL && s != NULL && esc != NULL);
    memcpy(p, data + 1, pl);
    memcpy(s, data + 1 + pl, sl);
    int got = srv_glob_match(p, pl, s, sl, 0);
    FUZZ_CHECK(got == 0 || got == 1);
    unsigned stars = 0, letters = 0;
    for (size_t i = 0; i < pl; i++) {
        stars += p[i] == '*';
        letters += isalpha((unsigned char)p[i]) != 0;
    }
    if (stars <= 6)
        FUZZ_CHECK(got == ref((const unsigned char *)p, pl, (const unsigned char *)s, sl));
    if (letters == 0) {
        int lower = 1;
        for (size_t i = 0; i < sl; i++)
            lower &= !isupper((unsigned char)s[i]);
        if (lower)
            FUZZ_CHECK(srv_glob_match(p, pl, s, sl, 1) == got);
    }
    for (size_t i = 0; i < sl; i++) {
        esc[2 * i] = '\\';
        esc[2 * i + 1] = s[i];
    }
    FUZZ_CHECK(srv_glob_match(esc, 2 * sl, s, sl, 0) == 1);
    free(p);
    free(s);
    free(esc);
    return 0;
}
