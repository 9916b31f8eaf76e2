/*
 * sipgen.c - SIP-like cache entries for measurements and tests (see
 * sipgen.h). Each entry draws from its own splitmix64 stream seeded by
 * (seed, i), so entry i never depends on the entries before it.
 */
#include "sipgen.h"

#include "pcache_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static uint64_t sg_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned sg_below(uint64_t *s, unsigned n)
{
    return (unsigned)(sg_next(s) % n);
}

static const char *const sg_domains[] = {"voip.example.net", "sip.example.com",
                                         "ims.mnc001.mcc262.3gppnetwork.org", "pbx.example.org",
                                         "trunk.carrier.example"};
static const char *const sg_uas[] = {"Yealink SIP-T46S 66.86.0.15",
                                     "Linphone/4.5.2 (belle-sip/4.5.3)",
                                     "Zoiper rv2.10.19.7",
                                     "Grandstream GXP2170 1.0.11.23",
                                     "Cisco-CP8845/14.1.1",
                                     "MicroSIP/3.21.3",
                                     "Bria iOS release 6.8.2 stamp 112",
                                     "FRITZ!OS",
                                     "snom D785/10.1.73.16",
                                     "Obi-202 3.2.2"};
static const char *const sg_transports[] = {"udp", "tcp", "tls", "ws"};
static const char *const sg_methods[] = {"INVITE", "SUBSCRIBE", "REFER", "NOTIFY"};

/* Appends printf output at *len, clamped to the buffer. */
__attribute__((format(printf, 4, 5))) static void sg_put(char *buf, size_t cap, size_t *len,
                                                         const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = (size_t)n < cap - *len ? *len + (size_t)n : cap - 1;
}

static void sg_hex(uint64_t *s, char *out, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        out[i] = pc_hex_digit((unsigned)sg_next(s));
    out[n] = 0;
}

/* A phone-number-like user: a few country/area prefixes, random line. */
static void sg_user(uint64_t *s, char *out, size_t cap)
{
    static const char *const pre[] = {"4930", "4989", "4915112", "4917", "331", "4420", "1212"};
    snprintf(out, cap, "%s%07u", pre[sg_below(s, 7)], sg_below(s, 10000000));
}

/* Public and private address pools: a handful of /16s, as on a real edge. */
static void sg_ip(uint64_t *s, char *out, size_t cap)
{
    static const char *const nets[] = {"203.0", "198.51", "192.0", "10.20", "172.16", "100.64"};
    snprintf(out, cap, "%s.%u.%u", nets[sg_below(s, 6)], sg_below(s, 256), 1 + sg_below(s, 254));
}

static void sg_contact(uint64_t *s, uint64_t i, pc_sipgen_entry *e)
{
    char user[24], ip[24], rip[24], uuid[40], cid[24];
    /* the line number is a bijection of i mod 10^7 (7919 is prime to 10^7),
     * so the keys of one stream are unique up to 10 million entries */
    static const char *const pre[] = {"4930", "4989", "4915112", "4917", "331", "4420", "1212"};
    snprintf(user, sizeof user, "%s%07u", pre[sg_below(s, 7)],
             (unsigned)((i % 10000000u) * 7919u % 10000000u));
    sg_ip(s, ip, sizeof ip);
    const char *dom = sg_domains[sg_below(s, 5)];
    const char *tp = sg_transports[sg_below(s, 4)];
    unsigned port = sg_below(s, 8) == 0 ? 5060 : 1024 + sg_below(s, 64000);
    e->klen = (size_t)snprintf(e->key, sizeof e->key, "ul:%s@%s", user, dom);
    size_t n = 0;
    sg_put(e->val, sizeof e->val, &n, "<sip:%s@%s:%u;transport=%s;ob>;expires=%u;q=%s", user, ip,
           port, tp, sg_below(s, 4) == 0 ? 600 : 3600, sg_below(s, 3) == 0 ? "0.5" : "1.0");
    if (sg_below(s, 4) != 0) { /* behind NAT: the received address */
        sg_ip(s, rip, sizeof rip);
        sg_put(e->val, sizeof e->val, &n, ";received=\"sip:%s:%u\"", rip,
               1024 + sg_below(s, 64000));
    }
    if (sg_below(s, 3) == 0) { /* RFC 5626 outbound: a per-device instance id */
        sg_hex(s, uuid, 32);
        sg_put(e->val, sizeof e->val, &n,
               ";+sip.instance=\"<urn:uuid:%.8s-%.4s-4%.3s-a%.3s-%.12s>\";reg-id=1", uuid, uuid + 8,
               uuid + 12, uuid + 15, uuid + 18);
    }
    sg_hex(s, cid, 20);
    sg_put(e->val, sizeof e->val, &n,
           ";callid=%.8s-%.12s@%s;cseq=%u;ua=\"%s.%u\";socket=%s:%s:5060;ruid=uloc-%08x-%x-%u", cid,
           cid + 8, ip, 1 + sg_below(s, 9000), sg_uas[sg_below(s, 10)], sg_below(s, 400), tp,
           "192.0.2.10", (unsigned)(sg_next(s) >> 32), 1000 + sg_below(s, 60000),
           1 + sg_below(s, 900));
    e->vlen = n;
}

static void sg_dialog(uint64_t *s, pc_sipgen_entry *e)
{
    char cid[24], ftag[16], ttag[16], br[16], a[24], b[24], ip[24];
    sg_hex(s, cid, 20);
    sg_hex(s, ftag, 8);
    sg_hex(s, ttag, 10);
    sg_hex(s, br, 10);
    sg_user(s, a, sizeof a);
    sg_user(s, b, sizeof b);
    sg_ip(s, ip, sizeof ip);
    const char *dom = sg_domains[sg_below(s, 5)];
    e->klen = (size_t)snprintf(e->key, sizeof e->key, "dlg:%s@%s", cid, ip);
    size_t n = 0;
    sg_put(e->val, sizeof e->val, &n,
           "from=sip:%s@%s;tag=%s;to=sip:%s@%s;tag=%s;cseq=%u %s;branch=z9hG4bK%s;"
           "route=<sip:192.0.2.10;lr;did=%.6s>;state=%u;start=%u",
           a, dom, ftag, b, dom, ttag, 1 + sg_below(s, 200), sg_methods[sg_below(s, 4)], br, cid,
           1 + sg_below(s, 5), 1732960000u + sg_below(s, 86400));
    e->vlen = n;
}

void pc_sipgen_entry_make(uint64_t seed, uint64_t i, pc_sipgen_entry *out)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + i;
    (void)sg_next(&s);
    memset(out, 0, offsetof(pc_sipgen_entry, key));
    unsigned pick = sg_below(&s, 100);
    char ip[24];
    if (pick < 60) {
        out->kind = PC_SIPGEN_CONTACT;
        sg_contact(&s, i, out);
    } else if (pick < 85) {
        out->kind = PC_SIPGEN_DIALOG;
        sg_dialog(&s, out);
    } else if (pick < 95) {
        out->kind = PC_SIPGEN_COUNTER;
        sg_ip(&s, ip, sizeof ip);
        out->klen =
            (size_t)snprintf(out->key, sizeof out->key, "pike:%s#%llu", ip, (unsigned long long)i);
        out->counter = (int64_t)sg_below(&s, 5000);
        out->vlen = 8;
        memcpy(out->val, &out->counter, 8); /* little-endian host: PC_WALK_RAW bytes */
    } else {
        out->kind = PC_SIPGEN_FLAG;
        sg_ip(&s, ip, sizeof ip);
        out->klen =
            (size_t)snprintf(out->key, sizeof out->key, "ban:%s#%llu", ip, (unsigned long long)i);
        out->vlen = (size_t)snprintf(out->val, sizeof out->val, "reason=flood;until=%u",
                                     1732960000u + sg_below(&s, 3600));
    }
}
