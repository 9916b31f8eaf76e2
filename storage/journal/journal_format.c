/*
 * journal_format.c - the journal's bytes: segment headers, records, the
 * segment scanner and segment file names (docs/journal-format.md §2-§4).
 *
 * Everything here is a pure function over memory, shared by the writer
 * (journal.c), the replay (journal_replay.c), tools and fuzzers. Decoders
 * treat their input as hostile: every length is checked against the bytes
 * available before it is used, and nothing is trusted before its checksum
 * verifies. Integers are little-endian on disk whatever the host.
 */
#include "journal_int.h"

#include <endian.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

/* docs/journal-format.md §2: "\x89PCJNL\r\n" */
static const uint8_t pc_jseg_magic[8] = {0x89, 'P', 'C', 'J', 'N', 'L', '\r', '\n'};
/* docs/journal-format.md §3: record marker bytes 93 4A 52 4E */
static const uint8_t pc_jrec_marker[4] = {0x93, 'J', 'R', 'N'};

int pc_journal_mode_parse(const char *s, unsigned *mode)
{
    static const char *const names[] = {"off", "everysec", "always"};
    if (s == NULL || mode == NULL)
        return PC_EINVAL;
    for (unsigned i = 0; i < 3; i++) {
        if (strcmp(s, names[i]) == 0) {
            *mode = i;
            return 0;
        }
    }
    return PC_EINVAL;
}

const char *pc_journal_mode_name(unsigned mode)
{
    switch (mode) {
    case PC_JOURNAL_OFF:
        return "off";
    case PC_JOURNAL_EVERYSEC:
        return "everysec";
    case PC_JOURNAL_ALWAYS:
        return "always";
    default:
        return "?";
    }
}

/* The mode lives in the engine's hook word: the engine calls the hook for
 * exactly the collections whose mode is not off. */
int pc_journal_set_mode(pc_coll *coll, unsigned mode)
{
    return pc_coll_set_hook_word(coll, mode);
}

unsigned pc_journal_mode(const pc_coll *coll)
{
    return pc_coll_hook_word(coll);
}

/* ---- segment header (§2) ------------------------------------------------ */

void pc_jseg_hdr_encode(void *buf, const pc_jseg_hdr *h)
{
    uint8_t *p = buf;
    memset(p, 0, PC_JSEG_HDR_SIZE);
    memcpy(p, pc_jseg_magic, 8);
    /* a version it can write (a tool rewriting a header keeps its version) */
    pc_put_le16(p + 8, h->version >= PC_JOURNAL_VERSION_MIN && h->version <= PC_JOURNAL_VERSION
                           ? h->version
                           : PC_JOURNAL_VERSION);
    pc_put_le16(p + 10, PC_JSEG_HDR_SIZE);
    pc_put_le32(p + 12, h->pid);
    pc_put_le64(p + 16, h->epoch);
    pc_put_le64(p + 24, h->boot_gen);
    pc_put_le64(p + 32, (uint64_t)h->created_wall_ms);
    size_t n = h->coll_len <= PC_COLL_NAME_MAX ? h->coll_len : PC_COLL_NAME_MAX;
    p[40] = (uint8_t)n;
    memcpy(p + 41, h->coll, n);
    pc_put_le64(p + 120, XXH3_64bits(p, 120));
}

int pc_jseg_hdr_decode(const void *buf, size_t len, pc_jseg_hdr *out, const char **why)
{
    const uint8_t *p = buf;
    const char *w = NULL;
    int rc = PC_ECORRUPT;
    if (buf == NULL || len < PC_JSEG_HDR_SIZE) {
        w = "shorter than a segment header";
    } else if (memcmp(p, pc_jseg_magic, 8) != 0) {
        w = "not a journal segment (bad magic)";
    } else if (pc_get_le64(p + 120) != XXH3_64bits(p, 120)) {
        w = "segment header checksum mismatch";
    } else if (pc_get_le16(p + 8) < PC_JOURNAL_VERSION_MIN ||
               pc_get_le16(p + 8) > PC_JOURNAL_VERSION) {
        w = "unknown journal format version";
        rc = PC_EFORMAT;
    } else if (pc_get_le16(p + 10) != PC_JSEG_HDR_SIZE) {
        w = "bad segment header size";
    } else if (p[40] == 0 || p[40] > PC_COLL_NAME_MAX) {
        w = "bad collection name length";
    } else {
        pc_jseg_hdr h;
        memset(&h, 0, sizeof h);
        h.version = pc_get_le16(p + 8);
        h.pid = pc_get_le32(p + 12);
        h.epoch = pc_get_le64(p + 16);
        h.boot_gen = pc_get_le64(p + 24);
        h.created_wall_ms = (int64_t)pc_get_le64(p + 32);
        h.coll_len = p[40];
        memcpy(h.coll, p + 41, h.coll_len);
        h.coll[h.coll_len] = '\0';
        if (memchr(h.coll, '\0', h.coll_len) != NULL) {
            w = "bad collection name";
        } else {
            if (out != NULL)
                *out = h;
            return 0;
        }
    }
    if (why != NULL)
        *why = w;
    return rc;
}

/* ---- records (§3) -------------------------------------------------------- */

size_t pc_jrec_size(size_t klen, size_t vlen)
{
    return PC_JREC_MIN_SIZE + klen + vlen;
}

size_t pc_jrec_encode_body(void *buf, const pc_jrec *r)
{
    uint8_t *p = buf;
    size_t vlen = r->op == PC_MUT_COUNTER ? 8 : r->op == PC_MUT_SET ? r->vlen : 0;
    size_t body = PC_JREC_HDR_SIZE + r->klen + vlen;
    memcpy(p, pc_jrec_marker, 4);
    pc_put_le32(p + 4, (uint32_t)(body + PC_JREC_SUM_SIZE));
    p[8] = (uint8_t)r->op;
    p[9] = (uint8_t)r->flags;
    pc_put_le16(p + 10, (uint16_t)r->klen);
    pc_put_le32(p + 12, (uint32_t)vlen);
    pc_put_le32(p + 16, r->stamp);
    pc_put_le32(p + 20, (r->flags & PC_JREC_F_GROUP) ? r->group_left : 0);
    pc_put_le64(p + 24, (uint64_t)r->expires_wall_ms);
    if (r->klen > 0)
        memcpy(p + PC_JREC_HDR_SIZE, r->key, r->klen);
    if (r->op == PC_MUT_COUNTER)
        pc_put_le64(p + PC_JREC_HDR_SIZE + r->klen, (uint64_t)r->counter);
    else if (vlen > 0)
        memcpy(p + PC_JREC_HDR_SIZE + r->klen, r->val, vlen);
    return body + PC_JREC_SUM_SIZE;
}

uint64_t pc_jrec_sum(const void *buf, size_t size)
{
    return htole64(XXH3_64bits(buf, size - PC_JREC_SUM_SIZE));
}

uint32_t pc_jrec_size_at(const void *buf)
{
    return pc_get_le32((const uint8_t *)buf + 4);
}

size_t pc_jrec_encode(void *buf, const pc_jrec *r)
{
    size_t size = pc_jrec_encode_body(buf, r);
    uint64_t sum = pc_jrec_sum(buf, size);
    memcpy((uint8_t *)buf + size - PC_JREC_SUM_SIZE, &sum, PC_JREC_SUM_SIZE);
    return size;
}

static int pc_jrec_parse(const void *buf, size_t avail, bool sum, pc_jrec *out, const char **why)
{
    const uint8_t *p = buf;
    const char *w = NULL;
    pc_jrec r;
    memset(&r, 0, sizeof r);
    if (avail < PC_JREC_MIN_SIZE) {
        w = "incomplete record header";
        goto bad;
    }
    if (memcmp(p, pc_jrec_marker, 4) != 0) {
        w = "no record marker";
        goto bad;
    }
    uint32_t size = pc_get_le32(p + 4);
    r.op = p[8];
    r.flags = p[9];
    r.klen = pc_get_le16(p + 10);
    r.vlen = pc_get_le32(p + 12);
    r.stamp = pc_get_le32(p + 16);
    if (r.flags & PC_JREC_F_GROUP)
        r.group_left = pc_get_le32(p + 20); /* else reserved: ignored */
    r.expires_wall_ms = (int64_t)pc_get_le64(p + 24);
    if (PC_JREC_HDR_SIZE + r.klen <= avail)
        r.key = p + PC_JREC_HDR_SIZE; /* nameable from here on */
    if (r.op < PC_MUT_SET || r.op > PC_MUT_EXPIRE) {
        w = "unknown operation";
    } else if ((p[9] & ~(PC_JREC_F_STATE | PC_JREC_F_GROUP)) != 0 ||
               (p[9] != 0 && r.op == PC_MUT_EXPIRE)) {
        w = "unknown record flags";
    } else if (r.vlen > PC_VALUE_MAX) {
        w = "value length past the limit";
    } else if ((r.op == PC_MUT_COUNTER && r.vlen != 8) ||
               ((r.op == PC_MUT_DEL || r.op == PC_MUT_EXPIRE) && r.vlen != 0)) {
        w = "value length does not fit the operation";
    } else if (r.expires_wall_ms < 0 || (r.op == PC_MUT_DEL && r.expires_wall_ms != 0)) {
        w = "bad expiry";
    } else if (size != pc_jrec_size(r.klen, r.vlen)) {
        w = "record length disagrees with its key and value lengths";
    } else if (size > avail) {
        w = "record runs past the end of the segment";
    } else if (sum && pc_get_le64(p + size - PC_JREC_SUM_SIZE) !=
                          XXH3_64bits(p, size - PC_JREC_SUM_SIZE)) {
        w = "checksum mismatch";
    } else {
        r.size = size;
        r.val = r.vlen > 0 ? p + PC_JREC_HDR_SIZE + r.klen : NULL;
        if (r.op == PC_MUT_COUNTER)
            r.counter = (int64_t)pc_get_le64(p + PC_JREC_HDR_SIZE + r.klen);
        if (out != NULL)
            *out = r;
        return 0;
    }
bad:
    if (out != NULL) {
        memset(out, 0, sizeof *out);
        out->key = r.key;
        out->klen = r.key != NULL ? r.klen : 0;
    }
    if (why != NULL)
        *why = w;
    return PC_ECORRUPT;
}

int pc_jrec_decode(const void *buf, size_t avail, pc_jrec *out, const char **why)
{
    return pc_jrec_parse(buf, avail, true, out, why);
}

int pc_jrec_decode_body(const void *buf, size_t avail, pc_jrec *out, const char **why)
{
    return pc_jrec_parse(buf, avail, false, out, why);
}

/* The offset of the first record at or after from that validates, or len
 * when there is none. Candidates are found by their marker. */
static uint64_t pc_jseg_resync(const uint8_t *p, size_t len, uint64_t from)
{
    while (from + PC_JREC_MIN_SIZE <= len) {
        const uint8_t *m = memmem(p + from, len - from, pc_jrec_marker, sizeof pc_jrec_marker);
        if (m == NULL)
            break;
        uint64_t off = (uint64_t)(m - p);
        if (pc_jrec_decode(p + off, len - off, NULL, NULL) == 0)
            return off;
        from = off + 1;
    }
    return len;
}

int pc_jseg_scan(const void *buf, size_t len, const pc_jscan_ops *ops, void *ctx, pc_jseg_hdr *hdr,
                 uint64_t *valid_end)
{
    const uint8_t *p = buf;
    pc_jseg_hdr h;
    int rc = pc_jseg_hdr_decode(buf, len, &h, NULL);
    if (rc != 0)
        return rc;
    if (hdr != NULL)
        *hdr = h;
    uint64_t off = PC_JSEG_HDR_SIZE, end = off;
    while (off < len) {
        pc_jrec r;
        const char *why = NULL;
        if (pc_jrec_decode(p + off, len - off, &r, &why) == 0) {
            if (ops != NULL && ops->record != NULL && (rc = ops->record(ctx, &r, off)) != 0)
                break;
            off += r.size;
            end = off;
            continue;
        }
        uint64_t next = pc_jseg_resync(p, len, off + 1);
        if (ops != NULL && ops->bad != NULL)
            ops->bad(ctx, off, next - off, next == len, &r, why);
        off = next;
    }
    if (valid_end != NULL)
        *valid_end = end;
    return rc;
}

/* ---- segment names (§1) --------------------------------------------------- */

int pc_journal_segment_name_parse(const char *name, char *coll, size_t cap, uint64_t *epoch)
{
    size_t n = name != NULL ? strlen(name) : 0, sl = sizeof PC_JSEG_SUFFIX - 1;
    if (n <= sl || strcmp(name + n - sl, PC_JSEG_SUFFIX) != 0)
        return PC_EINVAL;
    n -= sl;
    /* "<pid>[-<n>]": digits and at most one '-' between digits */
    size_t i = n;
    while (i > 0 && name[i - 1] != '.')
        i--;
    if (i == 0 || i == n)
        return PC_EINVAL;
    bool dash = false;
    for (size_t k = i; k < n; k++) {
        if (name[k] == '-' && !dash && k > i && k + 1 < n)
            dash = true;
        else if (name[k] < '0' || name[k] > '9')
            return PC_EINVAL;
    }
    /* ".<16 lowercase hex>." before it */
    if (i < 18 || name[i - 18] != '.')
        return PC_EINVAL;
    uint64_t e = 0;
    for (size_t k = i - 17; k < i - 1; k++) {
        char ch = name[k];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else
            return PC_EINVAL;
        e = e << 4 | d;
    }
    size_t clen = i - 18;
    if (clen == 0 || clen > PC_COLL_NAME_MAX || cap <= clen)
        return PC_EINVAL;
    if (coll != NULL) {
        memcpy(coll, name, clen);
        coll[clen] = '\0';
    }
    if (epoch != NULL)
        *epoch = e;
    return 0;
}
