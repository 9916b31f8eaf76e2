/*
 * sipgen.h - a deterministic generator of SIP-like cache entries, for
 * measuring the snapshot store (compression ratio, save and load rates) on
 * data that looks like what OpenSIPS keeps in a cache: registrations
 * (usrloc contacts), dialog state, rate-limit counters and short flags.
 *
 * Not part of the store's API: the benchmark tool (store_bench.c) and the
 * tests link it. Entry i of a given seed is always the same bytes, so a
 * test can regenerate what it stored.
 *
 * What makes it realistic is the mix of structure and entropy: the field
 * names, domains, transports and user agents repeat; phone numbers, IPs,
 * ports, tags, branches, call-ids and instance UUIDs are random. The mix is
 * tuned so that zstd level 1 over the whole stream compresses the values
 * about as well as real SIP values, a little better (pcache-store-bench
 * study prints the ratio; docs/benchmarks.md, "store format study").
 */
#ifndef PC_SIPGEN_INT_H
#define PC_SIPGEN_INT_H

#include <stddef.h>
#include <stdint.h>

/* The kinds of entry, in the proportions the generator produces them. */
enum pc_sipgen_kind {
    PC_SIPGEN_CONTACT = 0, /* ~60%: "ul:<user>@<domain>" -> a Contact with params */
    PC_SIPGEN_DIALOG = 1,  /* ~25%: "dlg:<call-id>" -> from/to/tags/cseq/route set */
    PC_SIPGEN_COUNTER = 2, /* ~10%: "pike:<ip>" -> a native counter */
    PC_SIPGEN_FLAG = 3     /* ~5%: "ban:<ip>" -> a short string */
};

#define PC_SIPGEN_KEY_MAX 96u
#define PC_SIPGEN_VAL_MAX 512u

/* One generated entry: key and value live in the struct. */
typedef struct pc_sipgen_entry {
    int kind;
    size_t klen, vlen;
    int64_t counter; /* the value of a PC_SIPGEN_COUNTER entry */
    char key[PC_SIPGEN_KEY_MAX];
    char val[PC_SIPGEN_VAL_MAX];
} pc_sipgen_entry;

/* Entry i of the stream seeded with seed (deterministic, pure). */
void pc_sipgen_entry_make(uint64_t seed, uint64_t i, pc_sipgen_entry *out);

#endif /* PC_SIPGEN_INT_H */
