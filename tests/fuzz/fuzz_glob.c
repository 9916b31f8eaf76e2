/*
 * fuzz_glob.c - the engine's binary-safe globs (src/engine/glob.c):
 * pc_glob_check and pc_glob_match. The input is a pattern and a subject:
 * byte 0 is the pattern's length (modulo what is left), then the pattern,
 * then the subject; NUL and every other byte are ordinary.
 *
 * Invariants: pc_glob_check answers 0, PC_EINVAL or PC_ETOOBIG; match
 * answers 0 or 1, and exactly what an independent reference says (a
 * tokenizer plus a dynamic programme over pattern and subject positions,
 * for inputs up to 128 bytes each), so the one-backtrack-point matcher of
 * glob.c is checked against the definition, malformed patterns (an
 * unterminated '[' or a trailing '\') included; a pattern made of the
 * subject with every byte escaped matches it; "*" matches everything.
 */
#include "fuzz_target.h"
#include "pcache.h"

#include <stdbool.h>
#include <string.h>

#define REF_MAX 128

enum { T_LIT, T_ANY, T_STAR, T_SET };
struct tok {
    int kind;
    unsigned char lit;
    unsigned char set[32]; /* T_SET: bit c = byte c matches */
};

/* Parses a set at p[i] (just after '['), the rules of glob.c's header:
 * '!' or '^' first negates, ']' first is literal, 'a-z' ranges (either
 * order), '\' escapes. Returns the index past ']' or 0 if unterminated. */
static size_t ref_set(const unsigned char *p, size_t n, size_t i, unsigned char *set)
{
    bool neg = false;
    memset(set, 0, 32);
    if (i < n && (p[i] == '!' || p[i] == '^')) {
        neg = true;
        i++;
    }
    bool first = true;
    while (i < n && (p[i] != ']' || first)) {
        first = false;
        unsigned lo = p[i];
        if (lo == '\\') {
            if (++i >= n)
                return 0;
            lo = p[i];
        }
        unsigned hi = lo;
        if (i + 2 < n && p[i + 1] == '-' && p[i + 2] != ']') {
            i += 2;
            hi = p[i];
            if (hi == '\\') {
                if (++i >= n)
                    return 0;
                hi = p[i];
            }
        }
        unsigned a = lo < hi ? lo : hi, b = lo < hi ? hi : lo;
        for (unsigned c = a; c <= b; c++)
            set[c / 8] |= (unsigned char)(1u << (c % 8));
        i++;
    }
    if (i >= n)
        return 0;
    if (neg)
        for (unsigned k = 0; k < 32; k++)
            set[k] = (unsigned char)~set[k];
    return i + 1;
}

static size_t tokenize(const unsigned char *p, size_t n, struct tok *t)
{
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        t[k].kind = T_LIT;
        if (p[i] == '*') {
            t[k].kind = T_STAR;
            i++;
        } else if (p[i] == '?') {
            t[k].kind = T_ANY;
            i++;
        } else if (p[i] == '[') {
            size_t next = ref_set(p, n, i + 1, t[k].set);
            if (next != 0) {
                t[k].kind = T_SET;
                i = next;
            } else { /* unterminated: a literal '[' */
                t[k].lit = '[';
                i++;
            }
        } else if (p[i] == '\\' && i + 1 < n) {
            t[k].lit = p[i + 1];
            i += 2;
        } else {
            t[k].lit = p[i++];
        }
    }
    return k;
}

static int ref_match(const unsigned char *p, size_t pn, const unsigned char *s, size_t sn)
{
    static struct tok t[REF_MAX];
    static bool m[REF_MAX + 1][REF_MAX + 1]; /* m[i][j]: tokens i.. match s[j..] */
    size_t nt = tokenize(p, pn, t);
    for (size_t i = nt + 1; i-- > 0;) {
        for (size_t j = sn + 1; j-- > 0;) {
            bool r;
            if (i == nt)
                r = j == sn;
            else if (t[i].kind == T_STAR)
                r = m[i + 1][j] || (j < sn && m[i][j + 1]);
            else if (j == sn)
                r = false;
            else if (t[i].kind == T_ANY)
                r = m[i + 1][j + 1];
            else if (t[i].kind == T_SET)
                r = (t[i].set[s[j] / 8] >> (s[j] % 8) & 1) && m[i + 1][j + 1];
            else
                r = t[i].lit == s[j] && m[i + 1][j + 1];
            m[i][j] = r;
        }
    }
    return m[0][0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t plen = data[0] % size; /* 0 .. size - 1 */
    const uint8_t *pat = data + 1, *sub = data + 1 + plen;
    size_t slen = size - 1 - plen;

    int c = pc_glob_check(pat, plen);
    FUZZ_CHECK(c == 0 || c == PC_EINVAL || c == PC_ETOOBIG);
    int m = pc_glob_match(pat, plen, sub, slen);
    FUZZ_CHECK(m == 0 || m == 1);
    if (plen <= REF_MAX && slen <= REF_MAX)
        FUZZ_CHECK(m == ref_match(pat, plen, sub, slen));
    FUZZ_CHECK(pc_glob_match("*", 1, sub, slen) == 1);
    FUZZ_CHECK(pc_glob_match(pat, plen, pat, 0) == pc_glob_match(pat, plen, "", 0));
    if (slen <= 2048) {
        static uint8_t esc[4096];
        for (size_t i = 0; i < slen; i++) {
            esc[2 * i] = '\\';
            esc[2 * i + 1] = sub[i];
        }
        FUZZ_CHECK(pc_glob_check(esc, 2 * slen) == (2 * slen > PC_GLOB_MAX ? PC_ETOOBIG : 0));
        FUZZ_CHECK(pc_glob_match(esc, 2 * slen, sub, slen) == 1);
        if (slen > 0)
            FUZZ_CHECK(pc_glob_match(esc, 2 * slen, sub, slen - 1) == 0);
    }
    return 0;
}
