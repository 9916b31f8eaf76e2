/*
 * snap_out.c - how pcache-snapshot writes bytes: the reversible escaping of
 * binary keys and values for terminals and CSV, JSON string literals, base64
 * for JSON values that are not UTF-8, and times and sizes for humans.
 *
 * Invariant of every encoder here: the decoder documented in
 * docs/pcache-snapshot.md ("Escaping") gives back the exact input bytes;
 * nothing is cut or replaced.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snap.h"

void snap_esc(FILE *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '\\')
            fputs("\\\\", f);
        else if (b[i] >= 0x20 && b[i] <= 0x7e)
            fputc(b[i], f);
        else
            fprintf(f, "\\x%02x", b[i]);
    }
}

int snap_unesc(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
    uint8_t *o = malloc(n + 1); /* never longer than the escaped form */
    size_t k = 0;
    if (o == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            o[k++] = (uint8_t)s[i];
            continue;
        }
        if (i + 1 < n && s[i + 1] == '\\') {
            o[k++] = '\\';
            i++;
            continue;
        }
        int h, l;
        if (i + 3 < n && s[i + 1] == 'x' && (h = pc_hex_val((unsigned char)s[i + 2])) >= 0 &&
            (l = pc_hex_val((unsigned char)s[i + 3])) >= 0) {
            o[k++] = (uint8_t)(h << 4 | l);
            i += 3;
            continue;
        }
        free(o);
        return -1;
    }
    *out = o;
    *outlen = k;
    return 0;
}

int snap_utf8_ok(const void *p, size_t n)
{
    const uint8_t *b = p;
    size_t i = 0;
    while (i < n) {
        uint8_t c = b[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t j = 1; j < len; j++) {
            if ((b[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (b[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

void snap_b64(FILE *f, const void *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *b = p;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        fputc(tab[v >> 18], f);
        fputc(tab[(v >> 12) & 63], f);
        fputc(tab[(v >> 6) & 63], f);
        fputc(tab[v & 63], f);
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)b[i] << 16;
        fputc(tab[v >> 18], f);
        fputc(tab[(v >> 12) & 63], f);
        fputs("==", f);
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8;
        fputc(tab[v >> 18], f);
        fputc(tab[(v >> 12) & 63], f);
        fputc(tab[(v >> 6) & 63], f);
        fputc('=', f);
    }
}

/* RFC 8259 §7: '"', '\' and the control characters must be escaped; the
 * caller guarantees UTF-8 (or ASCII), which passes through. */
void snap_jstr(FILE *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = b[i];
        if (c == '"')
            fputs("\\\"", f);
        else if (c == '\\')
            fputs("\\\\", f);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void snap_jbytes(FILE *f, const char *name, const void *p, size_t n)
{
    /* text = UTF-8 without NUL: the one convention of every pcache JSON
     * surface (pcache_mgmt.h, docs/management.md "Strings in JSON") */
    if (snap_utf8_ok(p, n) && (n == 0 || memchr(p, '\0', n) == NULL)) {
        fprintf(f, "\"%s\":", name);
        snap_jstr(f, p, n);
    } else {
        fprintf(f, "\"%s_b64\":\"", name);
        snap_b64(f, p, n);
        fputc('"', f);
    }
}

const char *snap_time(int64_t ms, char *buf, size_t cap)
{
    if (ms == 0) {
        snprintf(buf, cap, "never");
        return buf;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL) {
        snprintf(buf, cap, "%lld ms", (long long)ms);
        return buf;
    }
    char s[40];
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", s, (int)(ms % 1000 < 0 ? -(ms % 1000) : ms % 1000));
    return buf;
}

const char *snap_size(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    unsigned u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof *units) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}
