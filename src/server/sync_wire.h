/*
 * sync_wire.h - the sync notice datagram of pcached (docs/sync.md "Wire
 * format"): collection, generation and source node of a committed
 * perf_sync; no data. Parsed from outside bytes: the decoder trusts
 * nothing (tests/unit/test_sync_wire.c feeds it hostile input against a guard
 * page).
 */
#ifndef PCACHED_SYNC_WIRE_H
#define PCACHED_SYNC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SYNC_WIRE_MAGIC 0x50435359u /* "PCSY" */
#define SYNC_WIRE_VERSION 1u
#define SYNC_WIRE_HDR 16u
#define SYNC_WIRE_NAME_MAX 63u /* PC_COLL_NAME_MAX and PC_SYNC_NODE_MAX */
#define SYNC_WIRE_MAX (SYNC_WIRE_HDR + 2u * SYNC_WIRE_NAME_MAX)

typedef struct sync_notice {
    char coll[SYNC_WIRE_NAME_MAX + 1];   /* NUL-terminated, 1..63 bytes */
    char source[SYNC_WIRE_NAME_MAX + 1]; /* NUL-terminated, 0..63 bytes */
    uint64_t generation;                 /* > 0 */
} sync_notice;

/* Verdicts of the decoder (0 = a well-formed notice). */
enum {
    SYNC_WIRE_OK = 0,
    SYNC_WIRE_SHORT = -1, /* fewer bytes than the header */
    SYNC_WIRE_MAGIC_BAD = -2,
    SYNC_WIRE_VERSION_BAD = -3,
    SYNC_WIRE_FLAGS_BAD = -4,  /* a reserved bit set */
    SYNC_WIRE_LENGTH_BAD = -5, /* a name length out of range, or the sizes do not add up */
    SYNC_WIRE_NAME_BAD = -6,   /* a byte outside printable ASCII in a name */
    SYNC_WIRE_GEN_BAD = -7     /* generation 0 */
};

/* Encodes n into buf (cap bytes); *len = bytes written. -1 when a name is
 * empty (collection), too long, not printable ASCII, gen is 0, or cap is
 * too small. */
int sync_wire_encode(const sync_notice *n, unsigned char *buf, size_t cap, size_t *len);
/* Decodes exactly len bytes (a whole datagram; never reads past len). On
 * success fills *out; otherwise returns a SYNC_WIRE_* verdict and *out is
 * untouched. */
int sync_wire_decode(const unsigned char *buf, size_t len, sync_notice *out);
/* A one-line text of a verdict (static). */
const char *sync_wire_strerror(int verdict);

#endif /* PCACHED_SYNC_WIRE_H */
