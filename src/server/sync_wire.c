/*
 * sync_wire.c - encoder and decoder of the sync notice datagram (format in
 * docs/sync.md "Wire format"; everything big-endian):
 *
 *   OFFSET SIZE DESCRIPTION
 *   0      4    magic 0x50435359 ("PCSY")
 *   4      1    version (1)
 *   5      1    flags (0; any set bit is refused)
 *   6      1    C = collection name length, 1..63
 *   7      1    S = source node length, 0..63
 *   8      8    generation, > 0
 *   16     C    collection name, printable ASCII (0x21..0x7e)
 *   16+C   S    source node, printable ASCII
 * The datagram is exactly 16 + C + S bytes: a shorter one is truncated, a
 * longer one carries bytes nobody defined; both are refused.
 */
#include "sync_wire.h"

#include <string.h>

#include "pcache_util.h"

static int name_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

int sync_wire_encode(const sync_notice *n, unsigned char *buf, size_t cap, size_t *len)
{
    size_t c = strnlen(n->coll, sizeof n->coll), s = strnlen(n->source, sizeof n->source);
    if (c == 0 || c > SYNC_WIRE_NAME_MAX || s > SYNC_WIRE_NAME_MAX || n->generation == 0 ||
        !name_ok(n->coll, c) || !name_ok(n->source, s) || cap < SYNC_WIRE_HDR + c + s)
        return -1;
    pc_put_be32(buf, SYNC_WIRE_MAGIC);
    buf[4] = SYNC_WIRE_VERSION;
    buf[5] = 0;
    buf[6] = (unsigned char)c;
    buf[7] = (unsigned char)s;
    pc_put_be64(buf + 8, n->generation);
    memcpy(buf + SYNC_WIRE_HDR, n->coll, c);
    memcpy(buf + SYNC_WIRE_HDR + c, n->source, s);
    *len = SYNC_WIRE_HDR + c + s;
    return 0;
}

int sync_wire_decode(const unsigned char *buf, size_t len, sync_notice *out)
{
    if (len < SYNC_WIRE_HDR)
        return SYNC_WIRE_SHORT;
    if (pc_get_be32(buf) != SYNC_WIRE_MAGIC)
        return SYNC_WIRE_MAGIC_BAD;
    if (buf[4] != SYNC_WIRE_VERSION)
        return SYNC_WIRE_VERSION_BAD;
    if (buf[5] != 0)
        return SYNC_WIRE_FLAGS_BAD;
    size_t c = buf[6], s = buf[7];
    if (c == 0 || c > SYNC_WIRE_NAME_MAX || s > SYNC_WIRE_NAME_MAX || len != SYNC_WIRE_HDR + c + s)
        return SYNC_WIRE_LENGTH_BAD;
    uint64_t gen = pc_get_be64(buf + 8);
    if (gen == 0)
        return SYNC_WIRE_GEN_BAD;
    const char *cn = (const char *)buf + SYNC_WIRE_HDR, *sn = cn + c;
    if (!name_ok(cn, c) || !name_ok(sn, s))
        return SYNC_WIRE_NAME_BAD;
    memcpy(out->coll, cn, c);
    out->coll[c] = '\0';
    memcpy(out->source, sn, s);
    out->source[s] = '\0';
    out->generation = gen;
    return SYNC_WIRE_OK;
}

const char *sync_wire_strerror(int verdict)
{
    switch (verdict) {
    case SYNC_WIRE_OK:
        return "ok";
    case SYNC_WIRE_SHORT:
        return "shorter than the 16-byte header";
    case SYNC_WIRE_MAGIC_BAD:
        return "bad magic (not a pcache sync notice)";
    case SYNC_WIRE_VERSION_BAD:
        return "unknown version";
    case SYNC_WIRE_FLAGS_BAD:
        return "reserved flag bits set";
    case SYNC_WIRE_LENGTH_BAD:
        return "name lengths out of range or not matching the datagram's size";
    case SYNC_WIRE_NAME_BAD:
        return "a name holds bytes outside printable ASCII";
    case SYNC_WIRE_GEN_BAD:
        return "generation 0";
    default:
        return "unknown verdict";
    }
}
