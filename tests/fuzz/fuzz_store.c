/*
 * fuzz_store.c - the snapshot format decoders of the store
 * (storage/store/store_format.c and store_block.c, docs/snapshot-format.md
 * §3-§6): the store header, a collection meta, a block value as a reader
 * takes it (pc_sb_unpack: header, payload checksum, zstd, raw checksum),
 * and the records of a block's raw bytes. The input is one LMDB value.
 *
 * Every input runs twice: as it is, and as a "repaired" copy (magics, the
 * header checksums, each record's checksum, the payload and raw checksums
 * recomputed where the fields locate them), so the paths behind the XXH3
 * checks - which a fuzzer cannot forge - are reached as well.
 *
 * Invariants: verdicts are 0, PC_ESTORE, PC_ECORRUPT, PC_EFORMAT (PC_EHEAP
 * only when memory runs out) and always come with a reason; a decoded
 * header or meta re-encodes to a value that decodes to the same fields; a
 * decoded block borrows its payload from the value and its lengths add up;
 * a record lies inside the bytes it was given, pc_sf_rec_peek agrees with
 * pc_sf_rec_decode on its key and size, and it re-encodes to a record that
 * decodes to the same fields (to the same bytes when its varints were
 * minimal).
 */
#include "fuzz_target.h"
#include "store_format.h"

#include <string.h>
#include <zstd.h>

static void check_rc(int rc, const char *why)
{
    FUZZ_CHECK(rc == 0 || rc == PC_ESTORE || rc == PC_ECORRUPT || rc == PC_EFORMAT ||
               rc == PC_EHEAP);
    if (rc != 0)
        FUZZ_CHECK(why != NULL && why[0] != '\0');
}

/* The records of raw[0, n): at most count of them, each checked. */
static void walk_records(const uint8_t *raw, size_t n, uint32_t count)
{
    size_t off = 0;
    for (uint32_t i = 0; i < count && off < n; i++) {
        pc_sf_rec r;
        size_t used = 0;
        int key_ok = 0;
        const char *why = NULL;
        int rc = pc_sf_rec_decode(raw + off, n - off, &used, &r, &key_ok, &why);
        check_rc(rc, why);
        const uint8_t *pk;
        size_t pkl, pused;
        int prc = pc_sf_rec_peek(raw + off, n - off, &pk, &pkl, &pused);
        if (key_ok) {
            FUZZ_CHECK(used >= PC_SF_REC_FIXED + 2 && used <= n - off);
            FUZZ_CHECK(r.klen <= PC_KEY_MAX && r.vlen <= PC_VALUE_MAX);
            FUZZ_CHECK(r.key >= raw + off && r.key + r.klen <= raw + off + used);
            FUZZ_CHECK(r.val == r.key + r.klen && r.val + r.vlen == raw + off + used);
            FUZZ_CHECK(prc == 0 && pk == r.key && pkl == r.klen && pused == used);
        } else {
            FUZZ_CHECK(rc != 0);
        }
        if (rc == 0) {
            FUZZ_CHECK((r.flags & ~PC_SF_REC_FLAGS_KNOWN) == 0);
            FUZZ_CHECK((r.flags & PC_SF_REC_COUNTER) == 0 || r.vlen == 8);
            size_t sz = pc_sf_rec_size(r.klen, r.vlen);
            FUZZ_CHECK(sz <= used); /* a writer's varints are minimal */
            uint8_t *e = malloc(sz);
            if (e != NULL) {
                FUZZ_CHECK(pc_sf_rec_encode(e, &r) == sz);
                pc_sf_rec r2;
                size_t u2;
                int k2;
                const char *w2 = NULL;
                FUZZ_CHECK(pc_sf_rec_decode(e, sz, &u2, &r2, &k2, &w2) == 0 && u2 == sz);
                FUZZ_CHECK(r2.klen == r.klen && r2.vlen == r.vlen && r2.flags == r.flags &&
                           r2.stamp == r.stamp && r2.expires_ms == r.expires_ms);
                FUZZ_CHECK(memcmp(r2.key, r.key, r.klen) == 0 &&
                           memcmp(r2.val, r.val, r.vlen) == 0);
                if (sz == used)
                    FUZZ_CHECK(memcmp(e, raw + off, sz) == 0);
                free(e);
            }
        }
        if (!key_ok)
            break; /* the lengths do not parse: the rest is unreadable */
        off += used;
    }
}

static void run(const uint8_t *p, size_t n)
{
    const char *why = NULL;
    pc_sf_hdr h;
    int rc = pc_sf_hdr_decode(p, n, &h, &why);
    check_rc(rc, why);
    if (rc == 0) {
        FUZZ_CHECK(n == PC_SF_HDR_SIZE && h.version >= 1 && h.version <= PC_SF_VERSION);
        uint8_t b[PC_SF_HDR_SIZE];
        pc_sf_hdr_encode(&h, b);
        pc_sf_hdr h2;
        FUZZ_CHECK(pc_sf_hdr_decode(b, sizeof b, &h2, &why) == 0);
        FUZZ_CHECK(h2.version == h.version && h2.flags == h.flags &&
                   h2.created_ms == h.created_ms && h2.boot_gen == h.boot_gen);
        FUZZ_CHECK(memcmp(b, p, 32) == 0); /* 32..39 reserved, then the sum */
    }

    pc_store_coll_meta m;
    memset(&m, 0, sizeof m);
    why = NULL;
    rc = pc_sf_meta_decode(p, n, &m, &why);
    check_rc(rc, why);
    if (rc == 0) {
        FUZZ_CHECK(n == PC_SF_META_SIZE && m.dict_id == 0);
        uint8_t b[PC_SF_META_SIZE];
        pc_sf_meta_encode(&m, b);
        pc_store_coll_meta m2;
        memset(&m2, 0, sizeof m2);
        FUZZ_CHECK(pc_sf_meta_decode(b, sizeof b, &m2, &why) == 0);
        /* the encoder writes this version: a version 1 meta comes back as 2 */
        FUZZ_CHECK(m2.format_version == PC_SF_VERSION);
        m2.format_version = m.format_version;
        FUZZ_CHECK(memcmp(&m, &m2, sizeof m) == 0);
        /* 4..7 the version; 108..119 reserved, then the sum */
        FUZZ_CHECK(memcmp(b, p, 4) == 0 && memcmp(b + 8, p + 8, 100) == 0);
    }

    static ZSTD_DCtx *dctx;
    static uint8_t *buf;
    static size_t cap;
    if (dctx == NULL && (dctx = ZSTD_createDCtx()) == NULL)
        return;
    pc_sf_block hdr;
    const uint8_t *raw = NULL;
    unsigned state = 0;
    why = NULL;
    rc = pc_sb_unpack(dctx, p, n, &hdr, &buf, &cap, &raw, &state, &why);
    check_rc(rc, why);
    FUZZ_CHECK((state & ~(PC_SB_RAW | PC_SB_HDR)) == 0);
    if (rc == 0)
        FUZZ_CHECK(state == (PC_SB_RAW | PC_SB_HDR));
    if (state & PC_SB_HDR) {
        FUZZ_CHECK(hdr.hdr_len == (hdr.version == 1 ? PC_SF_BLOCK_HDR_V1 : PC_SF_BLOCK_HDR));
        FUZZ_CHECK(n >= hdr.hdr_len && hdr.payload == p + hdr.hdr_len);
        FUZZ_CHECK(hdr.payload_len == n - hdr.hdr_len && hdr.count >= 1);
        FUZZ_CHECK(hdr.raw_len <= PC_SF_BLOCK_RAW_MAX && hdr.first <= hdr.last);
        FUZZ_CHECK(hdr.codec == PC_SF_CODEC_NONE || hdr.codec == PC_SF_CODEC_ZSTD);
        FUZZ_CHECK(hdr.version == 1 ||
                   (hdr.generation >= 1 && hdr.nlen >= 1 && strlen(hdr.name) == hdr.nlen));
        uint8_t b[PC_SF_BLOCK_HDR];
        FUZZ_CHECK(pc_sf_block_hdr_encode(&hdr, b) == hdr.hdr_len);
        FUZZ_CHECK(memcmp(b, p, hdr.hdr_len) == 0);
    }
    if (state & PC_SB_RAW) {
        FUZZ_CHECK(state & PC_SB_HDR);
        FUZZ_CHECK(raw != NULL);
        FUZZ_CHECK(hdr.codec == PC_SF_CODEC_ZSTD ? raw == buf : raw == hdr.payload);
        walk_records(raw, hdr.raw_len, hdr.count);
    }
    /* the input as the raw records of a block */
    walk_records(p, n, UINT32_MAX);
}

/* Recomputes every checksum the fields locate (see the file comment). */
static void repair(uint8_t *p, size_t n)
{
    if (n == PC_SF_HDR_SIZE) {
        memcpy(p, PC_SF_HDR_MAGIC, 8);
        pc_put_le64(p + 40, pc_sf_hash(p, 40));
        return;
    }
    if (n == PC_SF_META_SIZE && memcmp(p, "PCCM", 4) == 0) {
        pc_put_le64(p + 120, pc_sf_hash(p, 120));
        return;
    }
    size_t hl = n >= 6 && pc_get_le16(p + 4) == 2 ? PC_SF_BLOCK_HDR : PC_SF_BLOCK_HDR_V1;
    if (n < hl) { /* raw records: fix each record's checksum */
        size_t off = 0, used, kl;
        const uint8_t *k;
        while (off < n && pc_sf_rec_peek(p + off, n - off, &k, &kl, &used) == 0) {
            pc_put_le32(p + off, (uint32_t)pc_sf_hash(p + off + 4, used - 4));
            off += used;
        }
        return;
    }
    memcpy(p, PC_SF_BLOCK_MAGIC, 4);
    uint8_t *pay = p + hl;
    size_t plen = n - hl;
    pc_put_le32(p + 16, (uint32_t)plen);
    uint64_t raw_sum;
    if (p[6] == PC_SF_CODEC_ZSTD) {
        unsigned long long rl = ZSTD_getFrameContentSize(pay, plen);
        raw_sum = pc_sf_hash(NULL, 0);
        if (rl != ZSTD_CONTENTSIZE_ERROR && rl != ZSTD_CONTENTSIZE_UNKNOWN &&
            rl <= PC_SF_BLOCK_RAW_MAX) {
            uint8_t *r = malloc(rl > 0 ? rl : 1);
            if (r != NULL) {
                size_t got = ZSTD_decompress(r, rl, pay, plen);
                if (!ZSTD_isError(got)) {
                    raw_sum = pc_sf_hash(r, got);
                    pc_put_le32(p + 12, (uint32_t)got);
                }
                free(r);
            }
        }
    } else {
        size_t off = 0, used, kl;
        const uint8_t *k;
        while (off < plen && pc_sf_rec_peek(pay + off, plen - off, &k, &kl, &used) == 0) {
            pc_put_le32(pay + off, (uint32_t)pc_sf_hash(pay + off + 4, used - 4));
            off += used;
        }
        pc_put_le32(p + 12, (uint32_t)plen);
        raw_sum = pc_sf_hash(pay, plen);
    }
    pc_put_le64(p + 40, pc_sf_hash(pay, plen));
    pc_put_le64(p + 48, raw_sum);
    pc_put_le64(p + 56, pc_sf_hash(p, 56));
    if (hl == PC_SF_BLOCK_HDR) /* version 2: the extension's checksum */
        pc_put_le64(p + 136, pc_sf_hash(p, 136));
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
    return 0;
}
