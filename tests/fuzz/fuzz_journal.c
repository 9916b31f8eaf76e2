/*
 * fuzz_journal.c - the journal's decoders of segment files
 * (storage/journal/journal_format.c, docs/journal-format.md §2-§4): the
 * segment header, one record, a whole-segment scan, and segment file
 * names. The input is a segment image (header, then records).
 *
 * Every input runs twice: as it is, and as a "repaired" copy whose magic,
 * header checksum and every record sum that a size field makes locatable
 * are recomputed - a fuzzer cannot forge XXH3 sums, so without the copy
 * nothing past the checksums would ever be reached.
 *
 * Invariants: decoders answer 0, PC_ECORRUPT or PC_EFORMAT; a record that
 * decodes lies inside the bytes it was given, its size is 40 + klen + vlen
 * and it re-encodes to the same bytes (reserved bytes read as zero); a
 * decoded header re-encodes to the same fields; the scan visits records in
 * increasing, non-overlapping order after the header, reports every byte
 * that is not a record as one bad run, and covers the image exactly.
 */
#include "fuzz_target.h"
#include "pc_journal_testing.h"

#include <string.h>
#include <xxhash.h>

static uint8_t enc[PC_JREC_MAX_SIZE];

/* A record decoded from buf (avail bytes): the invariants above. */
static void check_rec(const uint8_t *buf, size_t avail, const pc_jrec *r)
{
    FUZZ_CHECK(r->size == pc_jrec_size(r->klen, r->vlen));
    FUZZ_CHECK(r->size <= avail && r->size <= PC_JREC_MAX_SIZE);
    FUZZ_CHECK(r->klen <= PC_KEY_MAX && r->vlen <= PC_VALUE_MAX);
    FUZZ_CHECK(r->op >= PC_MUT_SET && r->op <= PC_MUT_EXPIRE);
    FUZZ_CHECK(r->key == buf + PC_JREC_HDR_SIZE);
    FUZZ_CHECK(r->vlen == 0 ? r->val == NULL : r->val == buf + PC_JREC_HDR_SIZE + r->klen);
    FUZZ_CHECK(pc_jrec_size_at(buf) == r->size);
    size_t n = pc_jrec_encode(enc, r);
    FUZZ_CHECK(n == r->size);
    /* bytes 20..23 are reserved: written as zero, ignored by a reader */
    FUZZ_CHECK(memcmp(enc, buf, 20) == 0);
    FUZZ_CHECK(memcmp(enc + 24, buf + 24, n - 24 - PC_JREC_SUM_SIZE) == 0);
    if (buf[20] == 0 && buf[21] == 0 && buf[22] == 0 && buf[23] == 0)
        FUZZ_CHECK(memcmp(enc, buf, n) == 0);
    pc_jrec again;
    FUZZ_CHECK(pc_jrec_decode(enc, n, &again, NULL) == 0);
    FUZZ_CHECK(again.size == r->size && again.op == r->op && again.flags == r->flags &&
               again.stamp == r->stamp && again.expires_wall_ms == r->expires_wall_ms &&
               again.counter == r->counter);
}

struct scan {
    const uint8_t *base;
    size_t len;
    uint64_t next; /* where the next record or bad run must start */
    unsigned long records, bad;
};

static int on_record(void *ctx, const pc_jrec *r, uint64_t off)
{
    struct scan *s = ctx;
    FUZZ_CHECK(off == s->next && off >= PC_JSEG_HDR_SIZE && off < s->len);
    check_rec(s->base + off, s->len - off, r);
    s->next = off + r->size;
    s->records++;
    return 0;
}

static void on_bad(void *ctx, uint64_t off, uint64_t len, int torn, const pc_jrec *partial,
                   const char *why)
{
    struct scan *s = ctx;
    FUZZ_CHECK(off == s->next && off >= PC_JSEG_HDR_SIZE && len > 0 && len <= s->len - off);
    FUZZ_CHECK(why != NULL);
    FUZZ_CHECK(torn == (off + len == s->len));
    if (partial->key != NULL)
        FUZZ_CHECK(partial->key == s->base + off + PC_JREC_HDR_SIZE &&
                   PC_JREC_HDR_SIZE + partial->klen <= s->len - off);
    s->next = off + len;
    s->bad++;
}

static void run(const uint8_t *p, size_t len)
{
    pc_jseg_hdr h;
    const char *why = NULL;
    int rc = pc_jseg_hdr_decode(p, len, &h, &why);
    FUZZ_CHECK(rc == 0 || rc == PC_ECORRUPT || rc == PC_EFORMAT);
    if (rc == 0) {
        FUZZ_CHECK(h.coll_len >= 1 && h.coll_len <= PC_COLL_NAME_MAX);
        FUZZ_CHECK(strlen(h.coll) == h.coll_len && h.version >= PC_JOURNAL_VERSION_MIN &&
                   h.version <= PC_JOURNAL_VERSION);
        uint8_t b[PC_JSEG_HDR_SIZE];
        pc_jseg_hdr_encode(b, &h);
        FUZZ_CHECK(memcmp(b, p, 41 + h.coll_len) == 0); /* the rest is padding and reserved */
        pc_jseg_hdr h2;
        FUZZ_CHECK(pc_jseg_hdr_decode(b, sizeof b, &h2, NULL) == 0);
        FUZZ_CHECK(h2.pid == h.pid && h2.epoch == h.epoch && h2.boot_gen == h.boot_gen &&
                   h2.created_wall_ms == h.created_wall_ms && strcmp(h2.coll, h.coll) == 0);
    } else {
        FUZZ_CHECK(why != NULL);
    }

    /* one record at the start, and at the header's end */
    for (size_t at = 0; at <= PC_JSEG_HDR_SIZE && at <= len; at += PC_JSEG_HDR_SIZE) {
        pc_jrec r;
        why = NULL;
        rc = pc_jrec_decode(p + at, len - at, &r, &why);
        FUZZ_CHECK(rc == 0 || rc == PC_ECORRUPT);
        if (rc == 0) {
            check_rec(p + at, len - at, &r);
            FUZZ_CHECK(pc_jrec_decode_body(p + at, len - at, &r, NULL) == 0);
        } else {
            FUZZ_CHECK(why != NULL);
            if (r.key != NULL)
                FUZZ_CHECK(r.key == p + at + PC_JREC_HDR_SIZE &&
                           PC_JREC_HDR_SIZE + r.klen <= len - at);
        }
    }

    struct scan s = {p, len, PC_JSEG_HDR_SIZE, 0, 0};
    pc_jscan_ops ops = {on_record, on_bad};
    uint64_t valid_end = 0;
    rc = pc_jseg_scan(p, len, &ops, &s, &h, &valid_end);
    FUZZ_CHECK(rc == 0 || rc == PC_ECORRUPT || rc == PC_EFORMAT);
    if (rc == 0) {
        FUZZ_CHECK(s.next == (len > PC_JSEG_HDR_SIZE ? len : PC_JSEG_HDR_SIZE));
        FUZZ_CHECK(valid_end >= PC_JSEG_HDR_SIZE && valid_end <= len);
    } else {
        FUZZ_CHECK(s.records == 0 && s.bad == 0);
    }
}

/* The repaired copy: magic and header sum, then the sum of every record
 * whose marker and size field fit. */
static void repair(uint8_t *p, size_t len)
{
    static const uint8_t magic[8] = {0x89, 'P', 'C', 'J', 'N', 'L', '\r', '\n'};
    static const uint8_t marker[4] = {0x93, 'J', 'R', 'N'};
    if (len < PC_JSEG_HDR_SIZE)
        return;
    memcpy(p, magic, 8);
    pc_put_le64(p + 120, XXH3_64bits(p, 120));
    for (size_t off = PC_JSEG_HDR_SIZE; off + PC_JREC_MIN_SIZE <= len;) {
        const uint8_t *m = memmem(p + off, len - off, marker, 4);
        if (m == NULL)
            break;
        off = (size_t)(m - p);
        if (len - off < 8)
            break; /* a marker with no room for its size field */
        uint32_t sz = pc_get_le32(p + off + 4);
        if (sz >= PC_JREC_MIN_SIZE && sz <= len - off) {
            pc_put_le64(p + off + sz - PC_JREC_SUM_SIZE,
                        XXH3_64bits(p + off, sz - PC_JREC_SUM_SIZE));
            off += sz;
        } else {
            off++;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size);

    uint8_t *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    repair(copy, size);
    run(copy, size);
    free(copy);

    /* the input as a segment file name */
    char name[256], coll[PC_COLL_NAME_MAX + 1];
    size_t n = size < sizeof name - 1 ? size : sizeof name - 1;
    memcpy(name, data, n);
    name[n] = '\0';
    uint64_t epoch;
    int rc = pc_journal_segment_name_parse(name, coll, sizeof coll, &epoch);
    FUZZ_CHECK(rc == 0 || rc == PC_EINVAL);
    if (rc == 0) {
        FUZZ_CHECK(strlen(coll) >= 1 && strlen(coll) <= PC_COLL_NAME_MAX);
        FUZZ_CHECK(strncmp(name, coll, strlen(coll)) == 0);
    }
    return 0;
}
