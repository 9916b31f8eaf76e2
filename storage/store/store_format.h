/*
 * store_format.h - the snapshot format codec of the store
 * (docs/snapshot-format.md): constants, byte layouts, varints, checksums,
 * the record and block codecs (store_format.c). Pure functions: no LMDB,
 * no I/O. Internal to the store (store_int.h includes it) and its
 * declared white-box interface for the tests, the fuzz targets and the
 * benchmarks (docs/architecture.md); no host includes it. It is the
 * format's contract in code: a change here is a change of the format.
 *
 * Every decoder treats its input as hostile: it bounds-checks every length
 * against the bytes it was given and returns PC_ECORRUPT with a static
 * reason instead of trusting a field.
 */
#ifndef PC_STORE_FORMAT_H
#define PC_STORE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_util.h"

/* ---- format constants (docs/snapshot-format.md) ------------------------- */
#define PC_SF_VERSION 2u /* the format version this code writes (it reads 1 and 2) */

/* §3 store header: meta key "\0store" */
#define PC_SF_HDR_KEY "\0store"
#define PC_SF_HDR_KEYLEN 6u
#define PC_SF_HDR_MAGIC "PCSTORE" /* 7 bytes + a 0 byte */
#define PC_SF_HDR_SIZE 48u

/* §4 collection meta: meta key "c:" + name */
#define PC_SF_META_MAGIC "PCCM"
#define PC_SF_META_SIZE 128u

/* §5 block: version 1's header is 64 bytes; version 2 appends the
 * generation and the collection name (§5.1) */
#define PC_SF_BLOCK_MAGIC "PCBK"
#define PC_SF_BLOCK_HDR_V1 64u
#define PC_SF_BLOCK_HDR 144u                      /* the header this version writes */
#define PC_SF_BLOCK_RAW_MAX (64u * 1024u * 1024u) /* a decoder refuses more */
#define PC_SF_CODEC_NONE 0u
#define PC_SF_CODEC_ZSTD 1u

/* §6 record */
#define PC_SF_REC_FIXED 17u /* crc32 + flags + stamp + expires */
#define PC_SF_REC_COUNTER 0x01u
#define PC_SF_REC_FLAGS_KNOWN PC_SF_REC_COUNTER
#define PC_SF_VARINT_MAX 5u /* bytes of a u32 LEB128 */

/* the block key: name, 0x00, big-endian order key */
#define PC_SF_BKEY_MAX (PC_COLL_NAME_MAX + 1u + 8u)

/* Byte order: pc_put_le16/32/64, pc_get_le*, pc_put_be64 and pc_get_be64
 * come from pcache_util.h. */

/* ---- store_format.c ------------------------------------------------------ */
uint64_t pc_sf_hash(const void *p, size_t n); /* XXH3-64, seed 0 */
/* The order key of a key: pc_order_key(pc_hash(key)). */
uint64_t pc_sf_order(const void *key, size_t klen);
/* Record order: order key, then key length, then key bytes (memcmp), exactly
 * the order of pc_walk_ordered. <0, 0, >0. */
int pc_sf_rec_cmp(uint64_t oa, const void *ka, size_t la, uint64_t ob, const void *kb, size_t lb);

size_t pc_sf_varint_put(uint8_t *p, uint32_t v); /* writes 1..5 bytes */
/* Reads a u32 LEB128 of at most 5 bytes from [p, p + n): bytes used, or 0
 * when it is truncated, longer than 5 bytes or exceeds 32 bits. */
size_t pc_sf_varint_get(const uint8_t *p, size_t n, uint32_t *v);

/* §3 */
typedef struct pc_sf_hdr {
    uint32_t version;
    uint32_t flags;
    int64_t created_ms;
    uint64_t boot_gen;
} pc_sf_hdr;
void pc_sf_hdr_encode(const pc_sf_hdr *h, uint8_t out[PC_SF_HDR_SIZE]);
/* PC_ESTORE (not our magic), PC_ECORRUPT (bad size or checksum: checked
 * before the version, which every version keeps under the checksum),
 * PC_EFORMAT (newer version: h->version is set). */
int pc_sf_hdr_decode(const void *p, size_t n, pc_sf_hdr *h, const char **why);

/* §4: the decoded form is the public pc_store_coll_meta */
void pc_sf_meta_encode(const pc_store_coll_meta *m, uint8_t out[PC_SF_META_SIZE]);
/* PC_ECORRUPT / PC_EFORMAT (m->format_version set). m->name untouched. */
int pc_sf_meta_decode(const void *p, size_t n, pc_store_coll_meta *m, const char **why);

/* §5 */
typedef struct pc_sf_block {
    uint32_t version;
    uint32_t hdr_len; /* 64 (version 1) or 144 (version 2) */
    uint8_t codec;
    uint32_t count;
    uint32_t raw_len;
    uint32_t payload_len;
    uint32_t dict_id;
    uint64_t first, last; /* order keys of the first and last record */
    uint64_t payload_sum, raw_sum;
    const uint8_t *payload; /* borrowed from the decoded value */
    /* version 2 (0 / empty in a version 1 block): */
    uint64_t generation;             /* the collection's generation it was written for */
    char name[PC_COLL_NAME_MAX + 1]; /* its collection, NUL-terminated */
    size_t nlen;
} pc_sf_block;
/* Writes the header of b->version (1 or 2: b->generation, b->name and
 * b->nlen for 2) and returns its length (b->hdr_len is not read). */
size_t pc_sf_block_hdr_encode(const pc_sf_block *b, uint8_t out[PC_SF_BLOCK_HDR]);
/* Rewrites the generation of a version 2 block value in place (its header
 * extension checksum follows); a version 1 value is left as it is. The
 * save knows the generation only in its write transaction, after the
 * blocks were built. val holds at least PC_SF_BLOCK_HDR_V1 bytes. */
void pc_sf_block_set_gen(uint8_t *val, size_t n, uint64_t generation);
/* Checks the header (magic, header checksum, version, for version 2 the
 * extension's checksum and name, lengths against n), not the payload. */
int pc_sf_block_decode(const void *p, size_t n, pc_sf_block *b, const char **why);

/* store_block.c: a whole block value as a reader takes it (LMDB and the
 * store's handle aside), header, payload checksum, zstd and raw checksum.
 * Bits of *state: */
#define PC_SB_RAW 0x1u /* *raw holds raw_len bytes (maybe not trustworthy) */
#define PC_SB_HDR 0x2u /* *hdr decoded (its checksum passed) */
/* Decodes a block value and yields its raw records: 0 when the header, the
 * payload checksum, the decompression and the raw checksum all pass; else
 * PC_ECORRUPT / PC_EFORMAT with *why, and PC_SB_RAW set in *state when raw
 * bytes of the right length were still produced (to name keys in a report;
 * never to load). *buf / *cap is a reusable decompression buffer (caller-
 * owned, freed with free()); *raw borrows val or *buf. zstd_dctx is a
 * ZSTD_DCtx. */
int pc_sb_unpack(void *zstd_dctx, const void *val, size_t len, pc_sf_block *hdr, uint8_t **buf,
                 size_t *cap, const uint8_t **raw, unsigned *state, const char **why);

/* The block key of collection name (nlen bytes) and an order key; returns
 * its length. */
size_t pc_sf_bkey(uint8_t out[PC_SF_BKEY_MAX], const char *name, size_t nlen, uint64_t order);

/* §6 one record */
typedef struct pc_sf_rec {
    const uint8_t *key, *val; /* borrowed from the raw block */
    uint32_t klen, vlen;
    uint64_t expires_ms; /* absolute unix ms, 0 = never */
    uint32_t stamp;
    unsigned flags;
} pc_sf_rec;
/* Bytes the record will take. */
size_t pc_sf_rec_size(size_t klen, size_t vlen);
/* Writes the record at out (pc_sf_rec_size bytes available); returns the
 * bytes written. */
size_t pc_sf_rec_encode(uint8_t *out, const pc_sf_rec *r);
/* Decodes the record at [p, p + n). On success *used = its size. Errors:
 * PC_ECORRUPT with *why; when the lengths parsed but the checksum (or a
 * flag, or a counter's length) is wrong, *used and r->key / r->klen are
 * still set (*key_ok = 1) so the caller can name the key and step over it.
 */
int pc_sf_rec_decode(const uint8_t *p, size_t n, size_t *used, pc_sf_rec *r, int *key_ok,
                     const char **why);
/* Frames the record at [p, p + n) without checking it: its key and size.
 * Returns 0, or -1 when the lengths do not parse or do not fit. For look-
 * ahead hints only; pc_sf_rec_decode judges the record. */
int pc_sf_rec_peek(const uint8_t *p, size_t n, const uint8_t **key, size_t *klen, size_t *used);

/* The meta key "c:" + name (kind 'c'). Returns the length. */
size_t pc_sf_meta_key(uint8_t out[2 + PC_COLL_NAME_MAX], char kind, const char *name, size_t nlen);

/* The content checksum of a collection: XXH3-64 over the blocks' raw
 * checksums as 8-byte little-endian words, in block-key order. */
typedef struct pc_sf_sum {
    void *state; /* XXH3_state_t */
} pc_sf_sum;
int pc_sf_sum_init(pc_sf_sum *s);
void pc_sf_sum_add(pc_sf_sum *s, uint64_t block_raw_sum);
uint64_t pc_sf_sum_final(pc_sf_sum *s); /* frees the state */
void pc_sf_sum_free(pc_sf_sum *s);      /* accepts a finalised or zeroed one */

/* Writes key as printable text for a log line: bytes outside 0x20..0x7e
 * and '\\' as \xNN, cut with "..." past 80 bytes. Returns out. */
char *pc_sf_keystr(const void *key, size_t klen, char *out, size_t cap);

/* Validates a collection name: 1..63 bytes of [A-Za-z0-9_.-]. */
int pc_sf_name_ok(const char *name, size_t *nlen);

#endif /* PC_STORE_FORMAT_H */
