/*
 * fuzz_sync_wire.c - the sync notice datagram decoder (src/server/
 * sync_wire.c, docs/sync.md "Wire format"). The input is one datagram.
 *
 * Invariants: the verdict is one of SYNC_WIRE_*; on a refusal the output
 * is untouched; an accepted notice has a 1..63-byte printable collection
 * name, a 0..63-byte printable source, generation > 0, and encodes back to
 * exactly the datagram's bytes (the format has no slack: every byte is
 * checked, so decode is the inverse of encode).
 */
#include "fuzz_target.h"
#include "sync_wire.h"

#include <string.h>

static void check_name(const char *s, size_t cap, size_t min)
{
    size_t n = strnlen(s, cap);
    FUZZ_CHECK(n < cap);
    FUZZ_CHECK(n >= min && n <= SYNC_WIRE_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK((unsigned char)s[i] >= 0x21 && (unsigned char)s[i] <= 0x7e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sync_notice n, before;
    memset(&n, 0x5a, sizeof n);
    before = n;
    int v = sync_wire_decode(data, size, &n);
    FUZZ_CHECK(v <= SYNC_WIRE_OK && v >= SYNC_WIRE_GEN_BAD);
    FUZZ_CHECK(sync_wire_strerror(v) != NULL);
    if (v != SYNC_WIRE_OK) {
        FUZZ_CHECK(memcmp(&n, &before, sizeof n) == 0);
        return 0;
    }
    FUZZ_CHECK(size <= SYNC_WIRE_MAX);
    check_name(n.coll, sizeof n.coll, 1);
    check_name(n.source, sizeof n.source, 0);
    FUZZ_CHECK(n.generation > 0);
    unsigned char buf[SYNC_WIRE_MAX];
    size_t len = 0;
    FUZZ_CHECK(sync_wire_encode(&n, buf, sizeof buf, &len) == 0);
    FUZZ_CHECK(len == size && memcmp(buf, data, size) == 0);
    /* a buffer one byte short is refused, never overrun */
    if (len > 0)
        FUZZ_CHECK(sync_wire_encode(&n, buf, len - 1, &len) == -1);
    return 0;
}
