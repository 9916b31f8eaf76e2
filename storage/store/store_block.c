/*
 * store_block.c - one block in memory (docs/snapshot-format.md §5): raw
 * records collected in order, compressed into the stored value, and the
 * reverse, checking every checksum on the way back.
 *
 * The zstd frame carries its content size and no checksum of its own: the
 * block header's XXH3-64 of the payload is checked before decompressing and
 * the XXH3-64 of the raw records after.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "store_int.h"

int pc_sb_raw_add(pc_sb_raw *b, const pc_sf_rec *r, uint64_t order)
{
    size_t need = pc_sf_rec_size(r->klen, r->vlen);
    if (b->len + need > b->cap) {
        size_t cap = b->cap == 0 ? 64 * 1024 : b->cap;
        while (cap < b->len + need)
            cap *= 2;
        uint8_t *nb = realloc(b->buf, cap);
        if (nb == NULL)
            return PC_EHEAP;
        b->buf = nb;
        b->cap = cap;
    }
    PC_INVARIANT(NULL, S1, b->count == 0 || order >= b->last);
    size_t wrote = pc_sf_rec_encode(b->buf + b->len, r);
    PC_INVARIANT(NULL, S2, wrote == need);
    b->len += wrote;
    if (b->count == 0)
        b->first = order;
    b->last = order;
    b->count++;
    b->key_bytes += r->klen;
    b->value_bytes += r->vlen;
    return 0;
}

void pc_sb_raw_reset(pc_sb_raw *b)
{
    b->len = 0;
    b->count = 0;
    b->first = b->last = 0;
    b->key_bytes = b->value_bytes = 0;
}

void pc_sb_raw_free(pc_sb_raw *b)
{
    free(b->buf);
    memset(b, 0, sizeof *b);
}

int pc_sb_pack(void *zstd_cctx, int level, const pc_sb_raw *b, const char *name, size_t nlen,
               uint64_t generation, pc_sb_scratch *scratch, pc_sb_out *out)
{
    ZSTD_CCtx *cc = zstd_cctx;
    size_t bound = ZSTD_compressBound(b->len);
    if (scratch->cap < bound) { /* compress into reusable scratch, keep an exact copy */
        uint8_t *nb = realloc(scratch->buf, bound);
        if (nb == NULL)
            return PC_EHEAP;
        scratch->buf = nb;
        scratch->cap = bound;
    }
    pc_sf_block h = {.version = PC_SF_VERSION,
                     .codec = PC_SF_CODEC_ZSTD,
                     .count = b->count,
                     .raw_len = (uint32_t)b->len,
                     .first = b->first,
                     .last = b->last,
                     .generation = generation,
                     .nlen = nlen};
    memcpy(h.name, name, nlen < sizeof h.name ? nlen : sizeof h.name - 1);
    ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
    size_t z = ZSTD_compress2(cc, scratch->buf, bound, b->buf, b->len);
    if (ZSTD_isError(z))
        return PC_EIO;
    const uint8_t *payload = scratch->buf;
    if (z >= b->len) { /* incompressible: keep the records as they are */
        h.codec = PC_SF_CODEC_NONE;
        payload = b->buf;
        z = b->len;
    }
    /* exact size: the whole snapshot stays in memory until the commit */
    out->val = malloc(PC_SF_BLOCK_HDR + z);
    if (out->val == NULL)
        return PC_EHEAP;
    memcpy(out->val + PC_SF_BLOCK_HDR, payload, z);
    h.payload_len = (uint32_t)z;
    h.payload_sum = pc_sf_hash(payload, z);
    h.raw_sum = pc_sf_hash(b->buf, b->len);
    size_t hl = pc_sf_block_hdr_encode(&h, out->val);
    PC_INVARIANT(NULL, S2, hl == PC_SF_BLOCK_HDR);
    out->val_len = hl + z;
    out->klen = pc_sf_bkey(out->key, name, nlen, b->last);
    out->raw_sum = h.raw_sum;
    out->count = b->count;
    out->raw_len = (uint32_t)b->len;
    return 0;
}

int pc_sb_unpack(void *zstd_dctx, const void *val, size_t len, pc_sf_block *hdr, uint8_t **buf,
                 size_t *cap, const uint8_t **raw, unsigned *state, const char **why)
{
    *state = 0;
    *raw = NULL;
    int rc = pc_sf_block_decode(val, len, hdr, why);
    if (rc != 0)
        return rc;
    *state |= PC_SB_HDR;
    int payload_bad = pc_sf_hash(hdr->payload, hdr->payload_len) != hdr->payload_sum;
    const uint8_t *r = hdr->payload;
    if (hdr->codec == PC_SF_CODEC_ZSTD) {
        if (*cap < hdr->raw_len) {
            size_t ncap = hdr->raw_len < 64 * 1024 ? 64 * 1024 : hdr->raw_len;
            uint8_t *nb = realloc(*buf, ncap);
            if (nb == NULL) {
                *why = "out of memory decompressing a block";
                return PC_EHEAP;
            }
            *buf = nb;
            *cap = ncap;
        }
        /* zstd checks the frame's structure and never writes past cap */
        size_t got =
            ZSTD_decompressDCtx(zstd_dctx, *buf, hdr->raw_len, hdr->payload, hdr->payload_len);
        if (ZSTD_isError(got) || got != hdr->raw_len) {
            *why = payload_bad ? "block payload fails its checksum and does not decompress"
                               : "block payload does not decompress to its raw length";
            return PC_ECORRUPT;
        }
        r = *buf;
    }
    *raw = r;
    *state |= PC_SB_RAW;
    if (payload_bad) {
        *why = "block payload fails its checksum";
        return PC_ECORRUPT;
    }
    if (pc_sf_hash(r, hdr->raw_len) != hdr->raw_sum) {
        *why = "block raw records fail their checksum";
        return PC_ECORRUPT;
    }
    return 0;
}
