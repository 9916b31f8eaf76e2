/*
 * store_format.c - the byte layouts of docs/snapshot-format.md: the store
 * header (§3), collection meta (§4), blocks (§5), records (§6), varints (§2) and the content
 * checksum (§4.1).
 *
 * Pure functions, no I/O. Encoders trust their input (the store built it);
 * decoders trust nothing: every length is checked against the bytes given
 * before it is used, every checksum is checked before a field is believed,
 * and a failure returns PC_ECORRUPT with a static reason for the log line.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "store_int.h"

uint64_t pc_sf_hash(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}

uint64_t pc_sf_order(const void *key, size_t klen)
{
    return pc_order_key(pc_hash(key, klen));
}

int pc_sf_rec_cmp(uint64_t oa, const void *ka, size_t la, uint64_t ob, const void *kb, size_t lb)
{
    if (oa != ob)
        return oa < ob ? -1 : 1;
    if (la != lb)
        return la < lb ? -1 : 1;
    return la == 0 ? 0 : memcmp(ka, kb, la);
}

/* ---- §2 varints: unsigned LEB128, at most 5 bytes for a u32 -------------- */
size_t pc_sf_varint_put(uint8_t *p, uint32_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

size_t pc_sf_varint_get(const uint8_t *p, size_t n, uint32_t *v)
{
    uint64_t acc = 0;
    for (size_t i = 0; i < n && i < PC_SF_VARINT_MAX; i++) {
        acc |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if ((p[i] & 0x80) == 0) {
            if (acc > UINT32_MAX)
                return 0;
            *v = (uint32_t)acc;
            return i + 1;
        }
    }
    return 0; /* truncated or too long */
}

/* ---- §3 store header --------------------------------------------------------
 *  0  8  magic "PCSTORE\0"
 *  8  4  format version
 * 12  4  flags (0)
 * 16  8  created_at, unix ms (signed)
 * 24  8  boot generation
 * 32  8  reserved (0)
 * 40  8  XXH3-64 of bytes 0..39
 */
void pc_sf_hdr_encode(const pc_sf_hdr *h, uint8_t out[PC_SF_HDR_SIZE])
{
    memset(out, 0, PC_SF_HDR_SIZE);
    memcpy(out, PC_SF_HDR_MAGIC, 8); /* includes the terminating 0 */
    pc_put_le32(out + 8, h->version);
    pc_put_le32(out + 12, h->flags);
    pc_put_le64(out + 16, (uint64_t)h->created_ms);
    pc_put_le64(out + 24, h->boot_gen);
    pc_put_le64(out + 40, pc_sf_hash(out, 40));
}

int pc_sf_hdr_decode(const void *p, size_t n, pc_sf_hdr *h, const char **why)
{
    const uint8_t *b = p;
    if (n < 8 || memcmp(b, PC_SF_HDR_MAGIC, 8) != 0) {
        *why = "the store header has no pcache magic";
        return PC_ESTORE;
    }
    /* every version keeps bytes 0..47 and the checksum at 40 over 0..39, so
     * the checksum is checked before the version is believed: a flipped
     * version byte is damage, not a newer format */
    if (n < PC_SF_HDR_SIZE) {
        *why = "the store header is truncated";
        return PC_ECORRUPT;
    }
    if (pc_get_le64(b + 40) != pc_sf_hash(b, 40)) {
        *why = "the store header fails its checksum";
        return PC_ECORRUPT;
    }
    uint32_t ver = pc_get_le32(b + 8);
    if (ver > PC_SF_VERSION) {
        h->version = ver;
        *why = "the store was written by a newer format version";
        return PC_EFORMAT;
    }
    if (n != PC_SF_HDR_SIZE) {
        *why = "the store header has the wrong size";
        return PC_ECORRUPT;
    }
    if (ver == 0) {
        *why = "the store header has format version 0";
        return PC_ECORRUPT;
    }
    h->version = ver;
    h->flags = pc_get_le32(b + 12);
    h->created_ms = (int64_t)pc_get_le64(b + 16);
    h->boot_gen = pc_get_le64(b + 24);
    return 0;
}

/* ---- §4 collection meta -------------------------------------------------------
 *   0  4  magic "PCCM"
 *   4  4  format version
 *   8  8  generation
 *  16  8  record count
 *  24  8  block count
 *  32  8  raw bytes
 *  40  8  stored bytes
 *  48  8  key bytes
 *  56  8  value bytes
 *  64  8  content checksum
 *  72  8  saved_at, unix ms (signed)
 *  80  8  saver's boot generation
 *  88  8  journal save epoch
 *  96  8  save duration, microseconds
 * 104  4  dictionary id (0: version 1 writes no dictionary)
 * 108 12  reserved (0)
 * 120  8  XXH3-64 of bytes 0..119
 */
void pc_sf_meta_encode(const pc_store_coll_meta *m, uint8_t out[PC_SF_META_SIZE])
{
    memset(out, 0, PC_SF_META_SIZE);
    memcpy(out, PC_SF_META_MAGIC, 4);
    pc_put_le32(out + 4, PC_SF_VERSION);
    pc_put_le64(out + 8, m->generation);
    pc_put_le64(out + 16, m->count);
    pc_put_le64(out + 24, m->blocks);
    pc_put_le64(out + 32, m->raw_bytes);
    pc_put_le64(out + 40, m->stored_bytes);
    pc_put_le64(out + 48, m->key_bytes);
    pc_put_le64(out + 56, m->value_bytes);
    pc_put_le64(out + 64, m->content_checksum);
    pc_put_le64(out + 72, (uint64_t)m->saved_at_ms);
    pc_put_le64(out + 80, m->boot_gen);
    pc_put_le64(out + 88, m->journal_epoch);
    pc_put_le64(out + 96, m->save_usec);
    pc_put_le32(out + 104, m->dict_id);
    pc_put_le64(out + 120, pc_sf_hash(out, 120));
}

int pc_sf_meta_decode(const void *p, size_t n, pc_store_coll_meta *m, const char **why)
{
    const uint8_t *b = p;
    if (n < 8 || memcmp(b, PC_SF_META_MAGIC, 4) != 0) {
        *why = "the meta record has no magic";
        return PC_ECORRUPT;
    }
    /* the checksum first, as in the store header: every version keeps bytes
     * 0..127 and the checksum at 120 */
    if (n < PC_SF_META_SIZE) {
        *why = "the meta record is truncated";
        return PC_ECORRUPT;
    }
    if (pc_get_le64(b + 120) != pc_sf_hash(b, 120)) {
        *why = "the meta record fails its checksum";
        return PC_ECORRUPT;
    }
    uint32_t ver = pc_get_le32(b + 4);
    if (ver > PC_SF_VERSION) {
        m->format_version = ver;
        *why = "the snapshot was written by a newer format version";
        return PC_EFORMAT;
    }
    if (n != PC_SF_META_SIZE) {
        *why = "the meta record has the wrong size";
        return PC_ECORRUPT;
    }
    if (ver == 0) {
        *why = "the meta record has format version 0";
        return PC_ECORRUPT;
    }
    m->format_version = ver;
    m->generation = pc_get_le64(b + 8);
    m->count = pc_get_le64(b + 16);
    m->blocks = pc_get_le64(b + 24);
    m->raw_bytes = pc_get_le64(b + 32);
    m->stored_bytes = pc_get_le64(b + 40);
    m->key_bytes = pc_get_le64(b + 48);
    m->value_bytes = pc_get_le64(b + 56);
    m->content_checksum = pc_get_le64(b + 64);
    m->saved_at_ms = (int64_t)pc_get_le64(b + 72);
    m->boot_gen = pc_get_le64(b + 80);
    m->journal_epoch = pc_get_le64(b + 88);
    m->save_usec = pc_get_le64(b + 96);
    m->dict_id = pc_get_le32(b + 104);
    if (m->dict_id != 0) {
        *why = "the snapshot needs a zstd dictionary, which format versions 1 and 2 do not "
               "define";
        return PC_EFORMAT;
    }
    return 0;
}

/* ---- §5 block ---------------------------------------------------------------------
 *   0  4  magic "PCBK"
 *   4  2  format version
 *   6  1  codec: 0 = stored, 1 = zstd
 *   7  1  flags (0)
 *   8  4  record count (>= 1)
 *  12  4  raw length
 *  16  4  payload length (= value length - header length)
 *  20  4  dictionary id (0: no version defines dictionaries yet)
 *  24  8  order key of the first record
 *  32  8  order key of the last record
 *  40  8  XXH3-64 of the payload
 *  48  8  XXH3-64 of the raw records
 *  56  8  XXH3-64 of bytes 0..55
 * version 2 only:
 *  64  8  generation of the collection snapshot the block belongs to (>= 1)
 *  72 64  collection name, NUL-padded (1..63 bytes, then at least one 00)
 * 136  8  XXH3-64 of bytes 0..135
 * header length (64 or 144): the payload, the raw records (codec 0) or one
 * zstd frame (codec 1)
 */
#define PC_SF_BK_GEN 64u
#define PC_SF_BK_NAME 72u
#define PC_SF_BK_NAME_LEN 64u
#define PC_SF_BK_XSUM 136u
_Static_assert(PC_SF_BK_XSUM + 8 == PC_SF_BLOCK_HDR, "the version 2 block header is 144 bytes");
_Static_assert(PC_SF_BK_NAME_LEN > PC_COLL_NAME_MAX, "a name and its NUL fit");

size_t pc_sf_block_hdr_encode(const pc_sf_block *b, uint8_t out[PC_SF_BLOCK_HDR])
{
    size_t len = b->version == 1 ? PC_SF_BLOCK_HDR_V1 : PC_SF_BLOCK_HDR;
    memset(out, 0, len);
    memcpy(out, PC_SF_BLOCK_MAGIC, 4);
    pc_put_le16(out + 4, (uint16_t)(b->version == 1 ? 1 : 2));
    out[6] = b->codec;
    pc_put_le32(out + 8, b->count);
    pc_put_le32(out + 12, b->raw_len);
    pc_put_le32(out + 16, b->payload_len);
    pc_put_le32(out + 20, b->dict_id);
    pc_put_le64(out + 24, b->first);
    pc_put_le64(out + 32, b->last);
    pc_put_le64(out + 40, b->payload_sum);
    pc_put_le64(out + 48, b->raw_sum);
    pc_put_le64(out + 56, pc_sf_hash(out, 56));
    if (len == PC_SF_BLOCK_HDR) {
        size_t nl = b->nlen < PC_SF_BK_NAME_LEN ? b->nlen : PC_SF_BK_NAME_LEN - 1;
        memcpy(out + PC_SF_BK_NAME, b->name, nl);
        pc_sf_block_set_gen(out, len, b->generation);
    }
    return len;
}

void pc_sf_block_set_gen(uint8_t *val, size_t n, uint64_t generation)
{
    if (n < PC_SF_BLOCK_HDR || pc_get_le16(val + 4) != 2)
        return;
    pc_put_le64(val + PC_SF_BK_GEN, generation);
    pc_put_le64(val + PC_SF_BK_XSUM, pc_sf_hash(val, PC_SF_BK_XSUM));
}

/* Version 2's extension (bytes 64..143): its checksum, a generation and a
 * collection name followed only by 00 bytes. */
static int pc_sf_block_ext(const uint8_t *v, pc_sf_block *b, const char **why)
{
    if (pc_get_le64(v + PC_SF_BK_XSUM) != pc_sf_hash(v, PC_SF_BK_XSUM)) {
        *why = "block header extension fails its checksum";
        return PC_ECORRUPT;
    }
    const uint8_t *nm = v + PC_SF_BK_NAME;
    size_t nl = 0;
    while (nl < PC_SF_BK_NAME_LEN && nm[nl] != 0)
        nl++;
    memset(b->name, 0, sizeof b->name);
    if (nl > PC_COLL_NAME_MAX) {
        *why = "block header names no collection";
        return PC_ECORRUPT;
    }
    memcpy(b->name, nm, nl);
    size_t chk = 0;
    int ok = pc_sf_name_ok(b->name, &chk) == 0 && chk == nl;
    for (size_t i = nl; ok && i < PC_SF_BK_NAME_LEN; i++)
        ok = nm[i] == 0;
    b->generation = pc_get_le64(v + PC_SF_BK_GEN);
    if (!ok || b->generation == 0) {
        *why = "block header names no collection or generation";
        return PC_ECORRUPT;
    }
    b->nlen = nl;
    return 0;
}

int pc_sf_block_decode(const void *p, size_t n, pc_sf_block *b, const char **why)
{
    const uint8_t *v = p;
    if (n < PC_SF_BLOCK_HDR_V1 || memcmp(v, PC_SF_BLOCK_MAGIC, 4) != 0) {
        *why = "block header missing or without magic";
        return PC_ECORRUPT;
    }
    if (pc_get_le64(v + 56) != pc_sf_hash(v, 56)) {
        *why = "block header fails its checksum";
        return PC_ECORRUPT;
    }
    b->version = pc_get_le16(v + 4);
    if (b->version > PC_SF_VERSION) {
        *why = "block written by a newer format version";
        return PC_EFORMAT;
    }
    b->hdr_len = b->version >= 2 ? PC_SF_BLOCK_HDR : PC_SF_BLOCK_HDR_V1;
    b->codec = v[6];
    b->count = pc_get_le32(v + 8);
    b->raw_len = pc_get_le32(v + 12);
    b->payload_len = pc_get_le32(v + 16);
    b->dict_id = pc_get_le32(v + 20);
    b->first = pc_get_le64(v + 24);
    b->last = pc_get_le64(v + 32);
    b->payload_sum = pc_get_le64(v + 40);
    b->raw_sum = pc_get_le64(v + 48);
    b->generation = 0;
    b->name[0] = 0;
    b->nlen = 0;
    if (b->version == 0 || v[7] != 0 || b->codec > PC_SF_CODEC_ZSTD) {
        *why = "block header has an unknown version, flag or codec";
        return PC_ECORRUPT;
    }
    if (n < b->hdr_len) {
        *why = "block header truncated";
        return PC_ECORRUPT;
    }
    b->payload = v + b->hdr_len;
    if (b->version >= 2 && pc_sf_block_ext(v, b, why) != 0)
        return PC_ECORRUPT;
    if (b->dict_id != 0) { /* reserved for a trained dictionary (a later version) */
        *why = "block needs a zstd dictionary, which format versions 1 and 2 do not define";
        return PC_EFORMAT;
    }
    if (b->payload_len != n - b->hdr_len) {
        *why = "block payload length disagrees with the stored value";
        return PC_ECORRUPT;
    }
    if (b->count == 0 || b->raw_len > PC_SF_BLOCK_RAW_MAX ||
        (uint64_t)b->count * PC_SF_REC_FIXED + 2 * (uint64_t)b->count > b->raw_len ||
        b->first > b->last ||
        (b->codec == PC_SF_CODEC_NONE && (b->payload_len != b->raw_len || b->dict_id != 0))) {
        *why = "block header fields are inconsistent";
        return PC_ECORRUPT;
    }
    return 0;
}

size_t pc_sf_bkey(uint8_t out[PC_SF_BKEY_MAX], const char *name, size_t nlen, uint64_t order)
{
    memcpy(out, name, nlen);
    out[nlen] = 0;
    pc_put_be64(out + nlen + 1, order);
    return nlen + 9;
}

size_t pc_sf_meta_key(uint8_t out[2 + PC_COLL_NAME_MAX], char kind, const char *name, size_t nlen)
{
    out[0] = (uint8_t)kind;
    out[1] = ':';
    memcpy(out + 2, name, nlen);
    return nlen + 2;
}

/* ---- §6 record ---------------------------------------------------------------------
 *  0  4  checksum: low 32 bits of XXH3-64 of bytes 4 .. end of record
 *  4  1  flags: bit 0 = counter; the others 0
 *  5  4  stamp
 *  9  8  expires, unix ms (0 = never)
 * 17  v  key length (varint)
 *  .  v  value length (varint)
 *  .  K  key
 *  .  V  value (a counter: 8 bytes, little-endian int64)
 */
size_t pc_sf_rec_size(size_t klen, size_t vlen)
{
    uint8_t tmp[PC_SF_VARINT_MAX];
    return PC_SF_REC_FIXED + pc_sf_varint_put(tmp, (uint32_t)klen) +
           pc_sf_varint_put(tmp, (uint32_t)vlen) + klen + vlen;
}

size_t pc_sf_rec_encode(uint8_t *out, const pc_sf_rec *r)
{
    uint8_t *p = out + 4;
    *p++ = (uint8_t)r->flags;
    pc_put_le32(p, r->stamp);
    pc_put_le64(p + 4, r->expires_ms);
    p += 12;
    p += pc_sf_varint_put(p, r->klen);
    p += pc_sf_varint_put(p, r->vlen);
    if (r->klen > 0)
        memcpy(p, r->key, r->klen);
    p += r->klen;
    if (r->vlen > 0)
        memcpy(p, r->val, r->vlen);
    p += r->vlen;
    size_t len = (size_t)(p - out);
    pc_put_le32(out, (uint32_t)pc_sf_hash(out + 4, len - 4));
    return len;
}

int pc_sf_rec_peek(const uint8_t *p, size_t n, const uint8_t **key, size_t *klen, size_t *used)
{
    uint32_t kl, vl;
    if (n < PC_SF_REC_FIXED + 2)
        return -1;
    size_t off = PC_SF_REC_FIXED, a = pc_sf_varint_get(p + off, n - off, &kl);
    if (a == 0)
        return -1;
    off += a;
    size_t b = pc_sf_varint_get(p + off, n - off, &vl);
    if (b == 0)
        return -1;
    off += b;
    if (kl > n - off || vl > n - off - kl)
        return -1;
    *key = p + off;
    *klen = kl;
    *used = off + kl + vl;
    return 0;
}

int pc_sf_rec_decode(const uint8_t *p, size_t n, size_t *used, pc_sf_rec *r, int *key_ok,
                     const char **why)
{
    *key_ok = 0;
    if (n < PC_SF_REC_FIXED + 2) {
        *why = "record header truncated";
        return PC_ECORRUPT;
    }
    size_t off = PC_SF_REC_FIXED;
    uint32_t klen, vlen;
    size_t a = pc_sf_varint_get(p + off, n - off, &klen);
    if (a == 0) {
        *why = "record key length does not parse";
        return PC_ECORRUPT;
    }
    off += a;
    size_t b = pc_sf_varint_get(p + off, n - off, &vlen);
    if (b == 0) {
        *why = "record value length does not parse";
        return PC_ECORRUPT;
    }
    off += b;
    if (klen > PC_KEY_MAX || vlen > PC_VALUE_MAX || klen > n - off || vlen > n - off - klen) {
        *why = "record lengths exceed the block or the engine limits";
        return PC_ECORRUPT;
    }
    r->flags = p[4];
    r->stamp = pc_get_le32(p + 5);
    r->expires_ms = pc_get_le64(p + 9);
    r->klen = klen;
    r->vlen = vlen;
    r->key = p + off;
    r->val = p + off + klen;
    *used = off + klen + vlen;
    *key_ok = 1;
    if (pc_get_le32(p) != (uint32_t)pc_sf_hash(p + 4, *used - 4)) {
        *why = "record fails its checksum";
        return PC_ECORRUPT;
    }
    if ((r->flags & ~PC_SF_REC_FLAGS_KNOWN) != 0) {
        *why = "record has unknown flags";
        return PC_ECORRUPT;
    }
    if ((r->flags & PC_SF_REC_COUNTER) != 0 && vlen != 8) {
        *why = "counter record without an 8-byte value";
        return PC_ECORRUPT;
    }
    return 0;
}

/* ---- §4.1 content checksum ------------------------------------------------ */
int pc_sf_sum_init(pc_sf_sum *s)
{
    XXH3_state_t *st = XXH3_createState();
    if (st == NULL)
        return PC_EHEAP;
    XXH3_64bits_reset(st);
    s->state = st;
    return 0;
}

void pc_sf_sum_add(pc_sf_sum *s, uint64_t block_raw_sum)
{
    uint8_t w[8];
    pc_put_le64(w, block_raw_sum);
    XXH3_64bits_update(s->state, w, 8);
}

uint64_t pc_sf_sum_final(pc_sf_sum *s)
{
    uint64_t h = XXH3_64bits_digest(s->state);
    pc_sf_sum_free(s);
    return h;
}

void pc_sf_sum_free(pc_sf_sum *s)
{
    if (s->state != NULL)
        XXH3_freeState(s->state);
    s->state = NULL;
}

int pc_sf_name_ok(const char *name, size_t *nlen)
{
    if (name == NULL)
        return PC_EINVAL;
    size_t n = strnlen(name, PC_COLL_NAME_MAX + 1);
    if (n == 0 || n > PC_COLL_NAME_MAX)
        return PC_EINVAL;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return PC_EINVAL;
    }
    *nlen = n;
    return 0;
}

char *pc_sf_keystr(const void *key, size_t klen, char *out, size_t cap)
{
    const unsigned char *k = key;
    size_t o = 0;
    if (cap == 0)
        return out;
    for (size_t i = 0; i < klen && i < 80; i++) {
        if (o + 8 >= cap)
            break;
        if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\') {
            out[o++] = (char)k[i];
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = pc_hex_digit(k[i] >> 4);
            out[o++] = pc_hex_digit(k[i]);
        }
    }
    if (klen > 80 && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
    return out;
}
