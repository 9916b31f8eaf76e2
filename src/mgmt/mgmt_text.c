/*
 * mgmt_text.c - the one JSON convention for byte strings (docs/management.md,
 * "Strings in JSON"): a byte string that is text (well-formed UTF-8 without
 * a NUL byte) travels as a standard JSON string; any other travels as
 * standard base64 (RFC 4648 §4, with padding) under the field name with
 * "_b64" appended, or as {"b64":"..."} where it has no field name (an array
 * element). Every host (pcached's JSON-RPC, the OpenSIPS module's MI output,
 * pcache-snapshot) decides with pc_text_ok and encodes with pc_b64_encode,
 * so the same bytes get the same field everywhere.
 */
#include "mgmt_int.h"

#include <string.h>

int pc_text_ok(const void *s, size_t n)
{
    const unsigned char *b = s;
    size_t i = 0;
    if (n > 0 && b == NULL)
        return 0;
    while (i < n) {
        unsigned char c = b[i];
        if (c < 0x80) {
            if (c == 0)
                return 0;
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range (RFC 3629 §4) */
        if (c >= 0xc2 && c <= 0xdf) {
            need = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 3;
            if (c == 0xe0)
                lo = 0xa0; /* no overlong forms */
            else if (c == 0xed)
                hi = 0x9f; /* no surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 4;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f; /* nothing past U+10FFFF */
        } else {
            return 0;
        }
        if (n - i < need || b[i + 1] < lo || b[i + 1] > hi)
            return 0;
        for (size_t k = 2; k < need; k++)
            if (b[i + k] < 0x80 || b[i + k] > 0xbf)
                return 0;
        i += need;
    }
    return 1;
}

size_t pc_b64_len(size_t n)
{
    return n / 3 * 4 + (n % 3 ? 4 : 0);
}

int pc_b64_encode(const void *src, size_t n, char *out, size_t cap, size_t *len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = src;
    if ((n > 0 && src == NULL) || out == NULL || len == NULL || n > (SIZE_MAX - 4) / 4 * 3)
        return PC_EINVAL;
    size_t need = pc_b64_len(n);
    if (cap < need)
        return PC_ETOOBIG;
    size_t o = 0, i = 0;
    for (; n - i >= 3; i += 3) {
        unsigned long v = (unsigned long)b[i] << 16 | (unsigned long)b[i + 1] << 8 | b[i + 2];
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = tab[v & 63];
    }
    if (n - i > 0) {
        unsigned long v = (unsigned long)b[i] << 16;
        if (n - i == 2)
            v |= (unsigned long)b[i + 1] << 8;
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = n - i == 2 ? tab[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    *len = o;
    return 0;
}

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int pc_b64_decode(const char *src, size_t n, void *out, size_t cap, size_t *len)
{
    unsigned char *o = out;
    if ((n > 0 && src == NULL) || len == NULL || (cap > 0 && out == NULL))
        return PC_EINVAL;
    if (n % 4 != 0)
        return PC_EINVAL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        unsigned pad = 0;
        for (int q = 0; q < 4; q++) {
            unsigned char c = (unsigned char)src[i + (size_t)q];
            if (c == '=' && i + 4 == n && q >= 2) {
                v[q] = 0;
                pad++;
                continue;
            }
            if (pad > 0 || (v[q] = b64_val(c)) < 0)
                return PC_EINVAL; /* a character after '=', or not of the alphabet */
        }
        unsigned long w = (unsigned long)v[0] << 18 | (unsigned long)v[1] << 12 |
                          (unsigned long)v[2] << 6 | (unsigned long)v[3];
        size_t nb = 3 - pad;
        /* canonical form only: the bits that padding drops must be zero */
        if ((pad == 1 && (w & 0xff) != 0) || (pad == 2 && (w & 0xffff) != 0))
            return PC_EINVAL;
        if (cap - k < nb)
            return PC_ETOOBIG;
        o[k++] = (unsigned char)(w >> 16);
        if (nb > 1)
            o[k++] = (unsigned char)(w >> 8);
        if (nb > 2)
            o[k++] = (unsigned char)w;
    }
    *len = k;
    return 0;
}
