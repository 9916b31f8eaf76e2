/*
 * test_glob.c - pc_glob_match and pc_glob_check against an independent
 * reference.
 *
 * The reference below is a deliberately naive recursive matcher written from
 * the syntax in pcache.h: '*' any run, '?' one byte, '[...]' a set ('!' or
 * '^' first negates, ']' first is literal, 'a-z' ranges - a reversed range
 * 'z-a' is read as 'a-z' - with '\' escaping a byte inside the set too),
 * '\' escapes the next byte, and a malformed pattern reads literally where
 * it cannot be read as syntax: an unterminated '[' is a literal '[' (the
 * bytes after it are still syntax) and a trailing '\' is a literal '\'.
 * NUL is an ordinary byte everywhere. The engine's matcher is iterative
 * with one backtrack point; the reference recurses on every '*', so the two
 * share no structure. They are compared on every pattern of up to three
 * bytes against every subject of up to three bytes over a small alphabet,
 * on a random corpus of longer patterns, and on handwritten cases whose
 * answers come from the header, not from either implementation.
 * pc_glob_check is compared with the reference's notion of well-formed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcache.h"

#define S(lit) (const unsigned char *)(lit), (sizeof(lit) - 1) /* literal as bytes + length */

/* ---- the reference ------------------------------------------------------- */

/* Reads one set member byte at p[*i], unescaping '\x'. 0 when the pattern
 * ends first (the set is then unterminated). */
static int ref_set_byte(const unsigned char *p, size_t n, size_t *i, unsigned char *out)
{
    if (*i >= n)
        return 0;
    if (p[*i] == '\\') {
        if (*i + 1 >= n)
            return 0;
        *out = p[*i + 1];
        *i += 2;
        return 1;
    }
    *out = p[(*i)++];
    return 1;
}

/* p[0] is '['. Returns the set's length through its ']' and whether c is
 * in it, or 0 when the set never closes. */
static size_t ref_set(const unsigned char *p, size_t n, unsigned char c, int *in)
{
    size_t i = 1;
    int neg = 0, hit = 0;
    if (i < n && (p[i] == '!' || p[i] == '^')) {
        neg = 1;
        i++;
    }
    size_t first = i;
    for (;;) {
        if (i >= n)
            return 0;
        if (p[i] == ']' && i != first)
            break;
        unsigned char lo, hi;
        if (!ref_set_byte(p, n, &i, &lo))
            return 0;
        hi = lo;
        if (i + 1 < n && p[i] == '-' && p[i + 1] != ']') {
            i++;
            if (!ref_set_byte(p, n, &i, &hi))
                return 0;
        }
        unsigned char a = lo < hi ? lo : hi, b = lo < hi ? hi : lo;
        if (c >= a && c <= b)
            hit = 1;
    }
    *in = hit != neg;
    return i + 1;
}

static int ref_match(const unsigned char *p, size_t pn, const unsigned char *s, size_t sn)
{
    if (pn == 0)
        return sn == 0;
    if (p[0] == '*') {
        while (pn > 1 && p[1] == '*') { /* a run of stars is one star */
            p++;
            pn--;
        }
        for (size_t k = 0; k <= sn; k++)
            if (ref_match(p + 1, pn - 1, s + k, sn - k))
                return 1;
        return 0;
    }
    if (sn == 0)
        return 0; /* every other token consumes exactly one byte */
    size_t adv = 1;
    int ok;
    if (p[0] == '?') {
        ok = 1;
    } else if (p[0] == '[') {
        int in = 0;
        size_t len = ref_set(p, pn, s[0], &in);
        if (len != 0) {
            ok = in;
            adv = len;
        } else {
            ok = s[0] == '['; /* unterminated: a literal '[' */
        }
    } else if (p[0] == '\\' && pn > 1) {
        ok = s[0] == p[1];
        adv = 2;
    } else {
        ok = s[0] == p[0]; /* a literal, or a trailing '\' read literally */
    }
    return ok && ref_match(p + adv, pn - adv, s + 1, sn - 1);
}

/* Well-formed: no trailing '\' and every '[' that starts a token closes. */
static int ref_wellformed(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (p[i] == '\\') {
            if (i + 1 >= n)
                return 0;
            i += 2;
        } else if (p[i] == '[') {
            int in;
            size_t len = ref_set(p + i, n - i, 0, &in);
            if (len == 0)
                return 0;
            i += len;
        } else {
            i++;
        }
    }
    return 1;
}

/* ---- helpers ---------------------------------------------------------------- */

static void show(char *out, size_t cap, const unsigned char *b, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (b[i] >= 0x21 && b[i] < 0x7f && b[i] != '\\')
            out[o++] = (char)b[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", b[i]);
    }
    out[o] = '\0';
}

/* Compares engine and reference on one pair; prints the first mismatches. */
static int compare(const unsigned char *p, size_t pn, const unsigned char *s, size_t sn,
                   unsigned *bad)
{
    int want = ref_match(p, pn, s, sn);
    int got = pc_glob_match(p, pn, s, sn);
    if (got != want) {
        if (++*bad <= 20) {
            char ps[256], ss[256];
            show(ps, sizeof ps, p, pn);
            show(ss, sizeof ss, s, sn);
            print_error("glob \"%s\" on \"%s\": engine %d, reference %d\n", ps, ss, got, want);
        }
    }
    return want;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}

/* ---- tests ------------------------------------------------------------------ */

struct hcase {
    const char *p;
    size_t pn;
    const char *s;
    size_t sn;
    int want;
};
#define HC(pat, subj, w)                                                                           \
    {                                                                                              \
        pat, sizeof(pat) - 1, subj, sizeof(subj) - 1, w                                            \
    }

/* Cases whose answer is read off the header's syntax. Both the engine and
 * the reference must give it. */
static void handwritten_cases(void **state)
{
    (void)state;
    static const struct hcase cases[] = {
        /* binary subjects and patterns: NUL is a byte like any other */
        HC("a\0*", "a\0zz", 1),
        HC("a\0?", "a\0", 0),
        HC("\0", "\0", 1),
        HC("\0", "", 0),
        HC("?", "\0", 1),
        HC("*\0", "xy\0", 1),
        HC("*\0", "xy", 0),
        HC("[\0-\x01]", "\x01", 1),
        HC("[!\0]", "\0", 0),
        HC("a*b", "a\0\0b", 1),
        HC("\\\0", "\0", 1),
        /* metacharacters matched literally through escapes */
        HC("\\*", "*", 1),
        HC("\\*", "a", 0),
        HC("\\?", "?", 1),
        HC("\\?", "x", 0),
        HC("\\[a]", "[a]", 1),
        HC("\\[a]", "a", 0),
        HC("\\\\", "\\", 1),
        HC("\\\\", "\\\\", 0),
        HC("a\\*b*", "a*bcd", 1),
        HC("a\\*b*", "axbcd", 0),
        HC("[\\]]", "]", 1),
        HC("[\\-a]", "-", 1),
        HC("[a\\-c]", "b", 0),
        HC("[a\\-c]", "-", 1),
        HC("[*?]", "*", 1),
        HC("[*?]", "a", 0),
        HC("\\a", "a", 1),
        HC("x\\[\\]", "x[]", 1),
        /* the empty glob matches only the empty key */
        HC("", "", 1),
        HC("", "a", 0),
        HC("", "\0", 0),
        /* '*' alone matches everything */
        HC("*", "", 1),
        HC("*", "abc", 1),
        HC("*", "\0\0", 1),
        HC("**", "", 1),
        /* a trailing backslash is a literal backslash */
        HC("ab\\", "ab\\", 1),
        HC("ab\\", "ab", 0),
        HC("\\", "\\", 1),
        HC("\\", "", 0),
        HC("*\\", "x\\", 1),
        /* an unterminated '[' is a literal '['; what follows is still syntax */
        HC("[ab", "[ab", 1),
        HC("[ab", "a", 0),
        HC("[", "[", 1),
        HC("[", "", 0),
        HC("a[", "a[", 1),
        HC("[!", "[!", 1),
        HC("[a-", "[a-", 1),
        HC("[*", "[xyz", 1),
        HC("[*", "[", 1),
        HC("[*", "x", 0),
        HC("[?", "[q", 1),
        HC("[\\]", "[]", 1),
        HC("[a\\", "[a\\", 1),
        /* sets, negation, ranges */
        HC("[abc]", "b", 1),
        HC("[abc]", "d", 0),
        HC("[!a]", "b", 1),
        HC("[!a]", "a", 0),
        HC("[^a]", "b", 1),
        HC("[^a]", "a", 0),
        HC("[]]", "]", 1),
        HC("[]a]", "a", 1),
        HC("[!]]", "a", 1),
        HC("[!]]", "]", 0),
        HC("[a-c]", "b", 1),
        HC("[a-c]", "d", 0),
        HC("[a-]", "-", 1),
        HC("[-a]", "-", 1),
        HC("[a-c-e]", "-", 1),
        HC("[0-9]x", "7x", 1),
        HC("[abc]", "", 0),
        HC("[ab]c", "ac", 1),
        HC("[ab]c", "abc", 0),
        /* one byte per '?', backtracking over '*' */
        HC("?", "", 0),
        HC("??", "a", 0),
        HC("??", "ab", 1),
        HC("*a*b", "xxaxxb", 1),
        HC("a*a", "a", 0),
        HC("*ab", "aab", 1),
        HC("*a?c*", "zzabczz", 1),
        HC("a*b*c", "abbbc", 1),
        HC("a*b*c", "acb", 0),
    };
    unsigned bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct hcase *h = &cases[i];
        const unsigned char *p = (const unsigned char *)h->p, *s = (const unsigned char *)h->s;
        int r = ref_match(p, h->pn, s, h->sn), e = pc_glob_match(p, h->pn, s, h->sn);
        if (r != h->want || e != h->want) {
            char ps[128], ss[128];
            show(ps, sizeof ps, p, h->pn);
            show(ss, sizeof ss, s, h->sn);
            print_error("case %zu: glob \"%s\" on \"%s\": want %d, engine %d, reference %d\n", i,
                        ps, ss, h->want, e, r);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Every pattern of length <= 3 over an alphabet holding each metacharacter,
 * against every subject of length <= 3 over the bytes those patterns name. */
static void exhaustive_short_patterns(void **state)
{
    (void)state;
    static const unsigned char pa[] = {'a', 'b', 0, '*', '?', '[', ']', '\\', '-', '!'};
    static const unsigned char sa[] = {'a', 'b', 0, '[', '\\', '-'};
    const size_t np = sizeof pa, ns = sizeof sa;
    unsigned bad = 0, pairs = 0, hits = 0;
    unsigned char p[3], s[3];
    for (size_t pl = 0; pl <= 3; pl++) {
        size_t ptot = pl == 0 ? 1 : pl == 1 ? np : pl == 2 ? np * np : np * np * np;
        for (size_t pi = 0; pi < ptot; pi++) {
            for (size_t j = 0, x = pi; j < pl; j++, x /= np)
                p[j] = pa[x % np];
            for (size_t sl = 0; sl <= 3; sl++) {
                size_t stot = sl == 0 ? 1 : sl == 1 ? ns : sl == 2 ? ns * ns : ns * ns * ns;
                for (size_t si = 0; si < stot; si++) {
                    for (size_t j = 0, x = si; j < sl; j++, x /= ns)
                        s[j] = sa[x % ns];
                    hits += (unsigned)compare(p, pl, s, sl, &bad);
                    pairs++;
                }
            }
        }
    }
    print_message("exhaustive: %u pairs, %u matches, %u disagreements\n", pairs, hits, bad);
    assert_true(hits > pairs / 50); /* the corpus exercises both answers */
    assert_int_equal(bad, 0);
}

/* Random patterns up to 12 bytes; subjects random, the pattern itself, and
 * the pattern with each token instantiated, so that matches are common. */
static void random_corpus(void **state)
{
    (void)state;
    static const unsigned char pa[] = {'a', 'b',  'c', 0,   '*', '?', '[',
                                       ']', '\\', '-', '!', '^', 'a', 'b'};
    static const unsigned char sa[] = {'a', 'b', 'c', 0, '*', '?', '[', ']', '\\', '-', '!'};
    unsigned bad = 0, pairs = 0, hits = 0, checks_bad = 0;
    unsigned char p[16], s[32];
    for (unsigned round = 0; round < 20000; round++) {
        size_t pl = rnd(13);
        for (size_t j = 0; j < pl; j++)
            p[j] = pa[rnd(sizeof pa)];
        int wf = ref_wellformed(p, pl), ck = pc_glob_check(p, pl);
        if (ck != (wf ? 0 : PC_EINVAL) && ++checks_bad <= 10) {
            char ps[128];
            show(ps, sizeof ps, p, pl);
            print_error("pc_glob_check(\"%s\") = %d, reference says %s\n", ps, ck,
                        wf ? "well-formed" : "malformed");
        }
        for (unsigned k = 0; k < 12; k++) {
            size_t sl;
            if (k == 0) { /* the pattern's own bytes */
                sl = pl;
                memcpy(s, p, pl);
            } else if (k < 6) { /* each byte kept or swapped, '*' expanded */
                sl = 0;
                for (size_t j = 0; j < pl && sl + 3 < sizeof s; j++) {
                    if (p[j] == '*')
                        for (uint32_t r = rnd(3); r > 0; r--)
                            s[sl++] = sa[rnd(sizeof sa)];
                    else
                        s[sl++] = rnd(3) == 0 ? sa[rnd(sizeof sa)] : p[j];
                }
            } else {
                sl = rnd(14);
                for (size_t j = 0; j < sl; j++)
                    s[j] = sa[rnd(sizeof sa)];
            }
            hits += (unsigned)compare(p, pl, s, sl, &bad);
            pairs++;
        }
    }
    print_message("random: %u pairs, %u matches, %u disagreements, %u check disagreements\n", pairs,
                  hits, bad, checks_bad);
    assert_true(hits > pairs / 50);
    assert_int_equal(bad, 0);
    assert_int_equal(checks_bad, 0);
}

/* A pattern that makes a naive backtracker exponential stays fast, and a
 * long subject with a binary tail still matches byte for byte. */
static void long_subjects(void **state)
{
    (void)state;
    static unsigned char s[5000];
    memset(s, 'a', sizeof s);
    assert_int_equal(pc_glob_match(S("*a*a*a*a*a*a*a*b"), s, sizeof s), 0);
    assert_int_equal(pc_glob_match(S("*a*a*a*a*a*a*a*"), s, sizeof s), 1);
    s[sizeof s - 2] = 0;
    s[sizeof s - 1] = '*';
    assert_int_equal(pc_glob_match(S("a*\0\\*"), s, sizeof s), 1);
    assert_int_equal(pc_glob_match(S("a*\0\\?"), s, sizeof s), 0);
    assert_int_equal(pc_glob_match(S("*?\0?"), s, sizeof s), 1);
}

static void glob_check_codes(void **state)
{
    (void)state;
    /* well-formed */
    assert_int_equal(pc_glob_check(S("")), 0);
    assert_int_equal(pc_glob_check(NULL, 0), 0);
    assert_int_equal(pc_glob_check(S("*")), 0);
    assert_int_equal(pc_glob_check(S("a[bc]d")), 0);
    assert_int_equal(pc_glob_check(S("\\[")), 0);
    assert_int_equal(pc_glob_check(S("[]]")), 0);
    assert_int_equal(pc_glob_check(S("[!]]")), 0);
    assert_int_equal(pc_glob_check(S("[a-z]*\\*?")), 0);
    assert_int_equal(pc_glob_check(S("[\\]]")), 0);
    assert_int_equal(pc_glob_check(S("a\0b\\\0")), 0);
    assert_int_equal(pc_glob_check(S("]")), 0);
    /* an unterminated set */
    assert_int_equal(pc_glob_check(S("[")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("[abc")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("x*[a-")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("[\\]")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("[!]")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("[]")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("[ok]x[")), PC_EINVAL);
    /* a trailing backslash */
    assert_int_equal(pc_glob_check(S("\\")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("a\\")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("[a\\")), PC_EINVAL);
    assert_int_equal(pc_glob_check(S("\\\\\\")), PC_EINVAL);
    assert_int_equal(pc_glob_check(NULL, 1), PC_EINVAL);
    /* the size limit: PC_GLOB_MAX bytes are fine, one more is too big */
    static unsigned char big[PC_GLOB_MAX + 2];
    memset(big, 'a', sizeof big);
    assert_int_equal(pc_glob_check(big, PC_GLOB_MAX), 0);
    assert_int_equal(pc_glob_check(big, PC_GLOB_MAX + 1), PC_ETOOBIG);
    assert_int_equal(pc_glob_check(big, PC_GLOB_MAX + 2), PC_ETOOBIG);
    big[0] = '*';
    big[PC_GLOB_MAX - 1] = '*';
    assert_int_equal(pc_glob_check(big, PC_GLOB_MAX), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handwritten_cases), cmocka_unit_test(exhaustive_short_patterns),
        cmocka_unit_test(random_corpus),     cmocka_unit_test(long_subjects),
        cmocka_unit_test(glob_check_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
