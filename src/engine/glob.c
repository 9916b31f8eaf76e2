/*
 * glob.c - binary-safe shell globs for the walker's glob operations.
 *
 * '*' matches any run of bytes (including none), '?' one byte, '[...]' one
 * byte of a set ('!' or '^' first negates, 'a-z' ranges, ']' first is
 * literal), '\\' makes the next byte literal. Patterns and subjects are byte
 * strings with lengths: NUL is an ordinary byte. Matching is iterative with
 * one backtrack point per '*', so it is O(pattern * subject) at worst and
 * never recurses.
 */
#include "pc_int.h"

/* Parses a set starting just after '['. Returns the index just past ']'
 * and whether c is in the set, or 0 when the set is unterminated. */
static size_t pc_glob_set(const unsigned char *p, size_t plen, size_t i, unsigned char c, bool *in)
{
    bool neg = false, hit = false;
    if (i < plen && (p[i] == '!' || p[i] == '^')) {
        neg = true;
        i++;
    }
    bool first = true;
    while (i < plen && (p[i] != ']' || first)) {
        first = false;
        unsigned char lo = p[i];
        if (lo == '\\') {
            if (++i >= plen)
                return 0;
            lo = p[i];
        }
        unsigned char hi = lo;
        if (i + 2 < plen && p[i + 1] == '-' && p[i + 2] != ']') {
            i += 2;
            hi = p[i];
            if (hi == '\\') {
                if (++i >= plen)
                    return 0;
                hi = p[i];
            }
        }
        if (lo <= hi ? (c >= lo && c <= hi) : (c >= hi && c <= lo))
            hit = true;
        i++;
    }
    if (i >= plen)
        return 0; /* no closing ']' */
    *in = hit != neg;
    return i + 1;
}

int pc_glob_match(const void *pat, size_t plen, const void *str, size_t slen)
{
    const unsigned char *p = pat, *s = str;
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
    while (si < slen) {
        if (pi < plen) {
            unsigned char pc = p[pi];
            if (pc == '*') {
                star_p = ++pi;
                star_s = si;
                continue;
            }
            if (pc == '?') {
                pi++;
                si++;
                continue;
            }
            if (pc == '[') {
                bool in = false;
                size_t next = pc_glob_set(p, plen, pi + 1, s[si], &in);
                if (next == 0) { /* unterminated: a literal '[' */
                    if (s[si] == '[') {
                        pi++;
                        si++;
                        continue;
                    }
                } else if (in) {
                    pi = next;
                    si++;
                    continue;
                }
            } else {
                if (pc == '\\' && pi + 1 < plen)
                    pc = p[++pi];
                if (pc == s[si]) {
                    pi++;
                    si++;
                    continue;
                }
            }
        }
        if (star_p == SIZE_MAX)
            return 0; /* mismatch with nothing to backtrack to */
        pi = star_p;
        si = ++star_s;
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}

int pc_glob_check(const void *pat, size_t plen)
{
    if (pat == NULL && plen > 0)
        return PC_EINVAL;
    if (plen > PC_GLOB_MAX)
        return PC_ETOOBIG;
    const unsigned char *p = pat;
    for (size_t i = 0; i < plen; i++) {
        if (p[i] == '\\') {
            if (++i >= plen)
                return PC_EINVAL; /* trailing backslash */
        } else if (p[i] == '[') {
            bool in;
            size_t next = pc_glob_set(p, plen, i + 1, 0, &in);
            if (next == 0)
                return PC_EINVAL; /* unterminated set */
            i = next - 1;
        }
    }
    return 0;
}
