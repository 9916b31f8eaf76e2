/*
 * cmd_command.c - COMMAND and its subcommands COUNT, LIST [FILTERBY
 * MODULE|ACLCAT|PATTERN], INFO, DOCS, GETKEYS, GETKEYSANDFLAGS and HELP,
 * answered as Redis 7.0 answers them for the commands pcached has
 * (docs/pcached.md §3.1; tests/server/test_command_meta.py compares them
 * with redis-server's).
 *
 * The commands are those of the dispatch table (cmd_all); what Redis says
 * about each - and its subcommands - comes from cmd_meta.c (cmd_meta.h). A
 * command of the dispatch table the metadata lacks (added since the file
 * was generated) is still listed, with the fields the dispatch table has
 * and empty ones for the rest. GETKEYS finds keys as Redis does: from the
 * key specs, or, for the commands whose keys Redis finds with code (SET,
 * EVAL and FCALL and their variants), with that code's rules.
 */
#include "cmd_meta.h"
#include "resp.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the table ------------------------------------------------------------------------ */

static int name_eq(const char *full, const char *p, size_t n)
{
    return strlen(full) == n && strncasecmp(full, p, n) == 0;
}

/* A top-level command of the metadata by name (any case), or NULL. */
static const cmd_meta *meta_top(const char *p, size_t n)
{
    for (unsigned i = 0; i < cmd_meta_count; i += 1 + cmd_meta_table[i].nsub)
        if (name_eq(cmd_meta_table[i].name, p, n))
            return &cmd_meta_table[i];
    return NULL;
}

/* Subcommand sub of top ("client" + "list" -> "client|list"), or NULL. */
static const cmd_meta *meta_sub(const cmd_meta *top, const char *sub, size_t n)
{
    size_t tl = strlen(top->name);
    for (unsigned i = 1; i <= top->nsub; i++)
        if (name_eq(top[i].name + tl + 1, sub, n))
            return &top[i];
    return NULL;
}

/* One command as COMMAND shows it: its metadata, or for a command the
 * metadata lacks, its dispatch-table row. */
typedef struct cmd_ref {
    const cmd_meta *m;
    const cmd_def *d;
} cmd_ref;

/* The commands pcached has, in the dispatch table's order. */
static unsigned all_refs(cmd_ref *out, unsigned cap)
{
    const cmd_def *all[SRV_CMD_SLOTS];
    unsigned n = cmd_all(all, SRV_CMD_SLOTS);
    if (n > cap)
        n = cap;
    for (unsigned i = 0; i < n; i++)
        out[i] = (cmd_ref){meta_top(all[i]->name, strlen(all[i]->name)), all[i]};
    return n;
}

/* A command by its full name, as Redis's lookupCommandBySds: "get" or
 * "client|list" (one level of subcommands), any case. */
static cmd_ref ref_by_name(const char *p, size_t n)
{
    cmd_ref r = {NULL, NULL};
    const char *bar = memchr(p, '|', n);
    size_t tl = bar != NULL ? (size_t)(bar - p) : n;
    cmd_ref all[SRV_CMD_SLOTS];
    unsigned na = all_refs(all, SRV_CMD_SLOTS);
    for (unsigned i = 0; i < na && r.d == NULL; i++)
        if (name_eq(all[i].d->name, p, tl))
            r = all[i];
    if (r.d == NULL || bar == NULL)
        return r;
    const char *sub = bar + 1;
    size_t sl = n - tl - 1;
    if (memchr(sub, '|', sl) != NULL || r.m == NULL || r.m->nsub == 0)
        return (cmd_ref){NULL, NULL};
    r.m = meta_sub(r.m, sub, sl);
    if (r.m == NULL)
        r.d = NULL;
    return r;
}

/* ---- replies ------------------------------------------------------------------------------ */

/* Writes RESP3 bytes of the table: as they are for a RESP3 client; for a
 * RESP2 one a map header %n becomes *2n and a set header ~n becomes *n,
 * which is what Redis sends it (the bytes are the table's, well formed). */
static void emit3(conn *c, const char *p, size_t n)
{
    if (c->proto == 3) {
        out_add(c, p, n);
        return;
    }
    size_t i = 0, run = 0;
    while (i < n) {
        const char *eol = memchr(p + i, '\r', n - i);
        if (eol == NULL)
            break;
        size_t hl = (size_t)(eol - (p + i)) + 2;
        if (p[i] == '%' || p[i] == '~') {
            out_add(c, p + run, i - run);
            long long v = strtoll(p + i + 1, NULL, 10);
            reply_array(c, p[i] == '%' ? 2 * v : v);
            run = i + hl;
        } else if (p[i] == '$') {
            hl += (size_t)strtoll(p + i + 1, NULL, 10) + 2;
        }
        i += hl;
    }
    out_add(c, p + run, n - run);
}

static void lower_copy(const char *in, char *out, size_t cap)
{
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
}

/* COMMAND INFO's entry of a command the metadata lacks: its dispatch row. */
static void info_fallback(conn *c, const cmd_def *d)
{
    char name[32];
    lower_copy(d->name, name, sizeof name);
    reply_array(c, 10);
    reply_bulk_str(c, name);
    reply_int(c, d->arity);
    const char *flags[4];
    int nf = 0;
    if (d->flags & CMD_WRITE)
        flags[nf++] = "write";
    if (d->flags & CMD_READONLY)
        flags[nf++] = "readonly";
    if (d->flags & CMD_FAST)
        flags[nf++] = "fast";
    if (d->flags & CMD_NOAUTH)
        flags[nf++] = "no_auth";
    reply_set(c, nf);
    for (int i = 0; i < nf; i++)
        reply_simple(c, flags[i]);
    reply_int(c, d->first_key);
    reply_int(c, d->last_key);
    reply_int(c, d->step);
    reply_set(c, 0); /* ACL categories */
    reply_set(c, 0); /* tips */
    reply_set(c, 0); /* key specs */
    reply_set(c, 0); /* subcommands */
}

/* Redis's addReplyCommandInfo: 10 fields, the 10th the subcommands'
 * entries (an empty set without subcommands). */
static void info_entry(conn *c, cmd_ref r)
{
    if (r.d == NULL) {
        reply_nil(c);
        return;
    }
    if (r.m == NULL) {
        info_fallback(c, r.d);
        return;
    }
    reply_array(c, 10);
    emit3(c, r.m->info, r.m->info_len);
    if (r.m->nsub == 0) {
        reply_set(c, 0);
        return;
    }
    reply_array(c, r.m->nsub);
    for (unsigned i = 1; i <= r.m->nsub; i++)
        info_entry(c, (cmd_ref){&r.m[i], r.d});
}

/* Redis's addReplyCommandDocs: the doc map, subcommands last (a map of
 * their full names to their doc maps). */
static void docs_map(conn *c, cmd_ref r)
{
    if (r.m == NULL) {
        reply_map(c, 1);
        reply_bulk_str(c, "group");
        reply_bulk_str(c, "generic");
        return;
    }
    reply_map(c, r.m->ndocs + (r.m->nsub > 0));
    emit3(c, r.m->docs, r.m->docs_len);
    if (r.m->nsub == 0)
        return;
    reply_bulk_str(c, "subcommands");
    reply_map(c, r.m->nsub);
    for (unsigned i = 1; i <= r.m->nsub; i++) {
        reply_bulk_str(c, r.m[i].name);
        docs_map(c, (cmd_ref){&r.m[i], r.d});
    }
}

static void ref_name(cmd_ref r, char *buf, size_t cap)
{
    if (r.m != NULL)
        lower_copy(r.m->name, buf, cap);
    else
        lower_copy(r.d->name, buf, cap);
}

/* ---- COMMAND LIST ------------------------------------------------------------------------ */

enum { FILTER_NONE, FILTER_MODULE, FILTER_ACLCAT, FILTER_PATTERN };

static int list_keep(const cmd_meta *m, const char *name, int type, uint32_t cat, const char *arg,
                     size_t alen)
{
    switch (type) {
    case FILTER_NONE:
        return 1;
    case FILTER_MODULE:
        return 0; /* pcached loads no module */
    case FILTER_ACLCAT:
        return cat != 0 && m != NULL && (m->acl & cat) != 0;
    default:
        return srv_glob_match(arg, alen, name, strlen(name), 1);
    }
}

static void command_list(conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    int type = FILTER_NONE;
    uint32_t cat = 0;
    const char *arg = NULL;
    size_t alen = 0;
    for (unsigned i = 2; i < argc; i += 3) { /* Redis: each option is FILTERBY <type> <arg> */
        if (!arg_eq(argv[i], argl[i], "FILTERBY") || argc - 1 - i != 2) {
            reply_error(c, "ERR syntax error");
            return;
        }
        if (arg_eq(argv[i + 1], argl[i + 1], "MODULE"))
            type = FILTER_MODULE;
        else if (arg_eq(argv[i + 1], argl[i + 1], "ACLCAT"))
            type = FILTER_ACLCAT;
        else if (arg_eq(argv[i + 1], argl[i + 1], "PATTERN"))
            type = FILTER_PATTERN;
        else {
            reply_error(c, "ERR syntax error");
            return;
        }
        arg = argv[i + 2];
        alen = argl[i + 2];
    }
    if (type == FILTER_ACLCAT)
        for (unsigned k = 0; k < cmd_acl_count; k++)
            if (name_eq(cmd_acl_names[k], arg, strnlen(arg, alen)))
                cat = 1u << k;
    cmd_ref all[SRV_CMD_SLOTS];
    unsigned na = all_refs(all, SRV_CMD_SLOTS), n = 0;
    conn tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.proto = c->proto;
    for (unsigned i = 0; i < na; i++) {
        unsigned nsub = all[i].m != NULL ? all[i].m->nsub : 0;
        for (unsigned s = 0; s <= nsub; s++) {
            char name[64];
            cmd_ref r = {all[i].m != NULL ? &all[i].m[s] : NULL, all[i].d};
            ref_name(r, name, sizeof name);
            if (list_keep(r.m, name, type, cat, arg, alen)) {
                reply_bulk_str(&tmp, name);
                n++;
            }
        }
    }
    if (tmp.closing) {
        reply_error(c, "ERR out of memory");
    } else {
        reply_array(c, n);
        out_add(c, tmp.out.p, tmp.out.len);
    }
    free(tmp.out.p);
}

/* ---- COMMAND GETKEYS / GETKEYSANDFLAGS ----------------------------------------------------- */

struct keys {
    unsigned n;
    unsigned *pos;
    uint32_t *flags;
};

static void keys_add(struct keys *k, unsigned pos, uint32_t flags)
{
    k->pos[k->n] = pos;
    k->flags[k->n] = flags;
    k->n++;
}

/* An argument as the C string Redis compares (up to its first NUL). */
static size_t cstr_len(const char *p, size_t n)
{
    const char *z = memchr(p, '\0', n);
    return z != NULL ? (size_t)(z - p) : n;
}

/* The keys one spec finds in argv[0, argc) (the command first), as Redis's
 * getKeysUsingKeySpecs; -1 for an invalid spec or arguments. k->pos and
 * k->flags hold room for argc entries. */
static int spec_keys(const cmd_keyspec *s, int arity, unsigned argc, const char **argv,
                     const size_t *argl, struct keys *k)
{
    long first = 0, last, step;
    if (s->bs == CMD_BS_INDEX) {
        first = s->pos;
    } else if (s->bs == CMD_BS_KEYWORD) {
        long start = s->pos > 0 ? s->pos : (long)argc + s->pos;
        long end = s->pos > 0 ? (long)argc - 1 : 1;
        for (long i = start; i != end; i = start <= end ? i + 1 : i - 1) {
            if (i >= (long)argc || i < 1)
                break;
            if (name_eq(s->keyword, argv[i], cstr_len(argv[i], argl[i]))) {
                first = i + 1;
                break;
            }
        }
        if (first == 0)
            return 0; /* keyword not found: this spec has no key */
    } else {
        return -1;
    }
    if (s->fk == CMD_FK_RANGE) {
        step = s->b;
        if (s->a >= 0)
            last = first + s->a;
        else if (s->c == 0)
            last = (long)argc + s->a;
        else
            last = first + (((long)argc - first) / s->c + s->a);
    } else if (s->fk == CMD_FK_KEYNUM) {
        step = s->c;
        int64_t numkeys;
        if (s->a >= (long)argc || first + s->a >= (long)argc)
            return -1;
        if (arg_i64(argv[first + s->a], argl[first + s->a], &numkeys) != 0 || numkeys < 0 ||
            numkeys > (int64_t)argc)
            return -1;
        first += s->b;
        last = first + (long)numkeys - 1;
    } else {
        return -1;
    }
    if (last >= (long)argc || last < first || first >= (long)argc || step <= 0)
        return -1;
    for (long i = first; i <= last; i += step) {
        if (i >= (long)argc || i < first) {
            if (arity < 0)
                continue;
            return -1;
        }
        keys_add(k, (unsigned)i, s->flags);
    }
    return (s->flags & CMD_KEY_INCOMPLETE) ? -1 : 0;
}

/* Redis's atoi of an argument (genericGetKeys): blanks, a sign, digits. */
static long arg_atoi(const char *p, size_t n)
{
    size_t i = 0;
    n = cstr_len(p, n);
    while (i < n && isspace((unsigned char)p[i]))
        i++;
    int neg = i < n && p[i] == '-';
    if (i < n && (p[i] == '-' || p[i] == '+'))
        i++;
    long v = 0;
    for (; i < n && p[i] >= '0' && p[i] <= '9' && v < INT_MAX; i++)
        v = v * 10 + (p[i] - '0');
    return neg ? -v : v;
}

/* The keys Redis finds with code rather than specs: SET (setGetKeys, whose
 * flags depend on GET) and the EVAL and FCALL families (genericGetKeys
 * with the key count at 2, keys from 3). */
static int proc_keys(const char *name, unsigned argc, const char **argv, const size_t *argl,
                     struct keys *k)
{
    if (strcmp(name, "set") == 0) {
        uint32_t f = (1u << 2) | (1u << 5); /* OW update */
        for (unsigned i = 3; i < argc; i++)
            if (cstr_len(argv[i], argl[i]) == 3 && strncasecmp(argv[i], "GET", 3) == 0)
                f = (1u << 1) | (1u << 4) | (1u << 5); /* RW access update */
        keys_add(k, 1, f);
        return 1;
    }
    static const char *const gen[] = {"eval",       "evalsha", "eval_ro",
                                      "evalsha_ro", "fcall",   "fcall_ro"};
    for (unsigned g = 0; g < sizeof gen / sizeof gen[0]; g++)
        if (strcmp(name, gen[g]) == 0) {
            long num = arg_atoi(argv[2], argl[2]);
            if (num < 1 || num > (long)argc - 3)
                return 0;
            for (long i = 0; i < num; i++)
                keys_add(k, (unsigned)(3 + i), 0);
            return 1;
        }
    return 0;
}

static int has_proc(const char *name)
{
    static const char *const procs[] = {"set",        "eval",  "evalsha", "eval_ro",
                                        "evalsha_ro", "fcall", "fcall_ro"};
    for (unsigned i = 0; i < sizeof procs / sizeof procs[0]; i++)
        if (strcmp(name, procs[i]) == 0)
            return 1;
    return 0;
}

/* The keys of a full command (Redis's getKeysFromCommandWithSpecs): from
 * the specs when some spec names real keys and none has variable flags,
 * else (or when the specs fail) from the command's own rules. */
static void find_keys(const cmd_meta *m, unsigned argc, const char **argv, const size_t *argl,
                      struct keys *k)
{
    uint32_t all = 0, notkey_everywhere = CMD_KEY_NOT_KEY;
    for (unsigned i = 0; i < m->nks; i++) {
        all |= m->ks[i].flags;
        notkey_everywhere &= m->ks[i].flags;
    }
    int specs_usable = m->nks > 0 && !notkey_everywhere && !(all & CMD_KEY_VARIABLE_FLAGS);
    if (specs_usable) {
        int ok = 1;
        for (unsigned i = 0; i < m->nks && ok; i++)
            if (!(m->ks[i].flags & CMD_KEY_NOT_KEY))
                ok = spec_keys(&m->ks[i], m->arity, argc, argv, argl, k) == 0;
        if (ok)
            return;
        k->n = 0;
    }
    (void)proc_keys(m->name, argc, argv, argl, k);
}

static const char *const key_flag_names[CMD_KEY_NFLAGS] = {
    "RO",     "RW",     "OW",      "RM",         "access",        "update",
    "insert", "delete", "not_key", "incomplete", "variable_flags"};

static void command_getkeys(conn *c, unsigned argc, const char **argv, const size_t *argl,
                            int with_flags)
{
    unsigned n = argc - 2;
    const char **cv = argv + 2;
    const size_t *cl = argl + 2;
    cmd_ref r = ref_by_name(cv[0], cl[0]);
    if (r.m != NULL && r.m->nsub > 0 && n >= 2)
        r.m = meta_sub(r.m, cv[1], cl[1]); /* Redis's lookupCommand */
    const cmd_meta *m = r.m;
    uint32_t notkey_everywhere = CMD_KEY_NOT_KEY;
    for (unsigned i = 0; m != NULL && i < m->nks; i++)
        notkey_everywhere &= m->ks[i].flags;
    if (m == NULL || memchr(cv[0], '|', cl[0]) != NULL) {
        reply_error(c, "ERR Invalid command specified");
        return;
    }
    if (!has_proc(m->name) && (m->nks == 0 || notkey_everywhere)) {
        reply_error(c, "ERR The command has no key arguments");
        return;
    }
    if ((m->arity > 0 && (unsigned)m->arity != n) || (int64_t)n < -(int64_t)m->arity) {
        reply_error(c, "ERR Invalid number of arguments specified for command");
        return;
    }
    struct keys k = {0, calloc(n, sizeof *k.pos), calloc(n, sizeof *k.flags)};
    if (k.pos == NULL || k.flags == NULL) {
        reply_error(c, "ERR out of memory");
    } else {
        find_keys(m, n, cv, cl, &k);
        if (k.n == 0 && !(m->flags & CMD_META_NO_MANDATORY_KEYS)) {
            reply_error(c, "ERR Invalid arguments specified for command");
        } else {
            reply_array(c, k.n);
            for (unsigned i = 0; i < k.n; i++) {
                if (with_flags)
                    reply_array(c, 2);
                reply_bulk(c, cv[k.pos[i]], cl[k.pos[i]]);
                if (!with_flags)
                    continue;
                unsigned nf = 0;
                for (unsigned b = 0; b < CMD_KEY_NFLAGS; b++)
                    nf += (k.flags[i] >> b) & 1u;
                reply_set(c, nf);
                for (unsigned b = 0; b < CMD_KEY_NFLAGS; b++)
                    if (k.flags[i] & (1u << b))
                        reply_simple(c, key_flag_names[b]);
            }
        }
    }
    free(k.pos);
    free(k.flags);
}

/* ---- COMMAND -------------------------------------------------------------------------------- */

static const char *const command_help[] = {
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
};

static void command_all_info(conn *c)
{
    cmd_ref all[SRV_CMD_SLOTS];
    unsigned n = all_refs(all, SRV_CMD_SLOTS);
    reply_array(c, n);
    for (unsigned i = 0; i < n; i++)
        info_entry(c, all[i]);
}

static void command_docs(conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    cmd_ref all[SRV_CMD_SLOTS];
    unsigned n = 0;
    if (argc == 2) {
        n = all_refs(all, SRV_CMD_SLOTS);
    } else {
        for (unsigned i = 2; i < argc && n < SRV_CMD_SLOTS; i++) {
            cmd_ref r = ref_by_name(argv[i], argl[i]);
            if (r.d != NULL)
                all[n++] = r;
        }
    }
    reply_map(c, n);
    for (unsigned i = 0; i < n; i++) {
        char name[64];
        ref_name(all[i], name, sizeof name);
        reply_bulk_str(c, name);
        docs_map(c, all[i]);
    }
}

void cmd_command(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    (void)w;
    if (argc == 1) {
        command_all_info(c);
        return;
    }
    const cmd_meta *top = meta_top("command", 7);
    const cmd_meta *sub = top != NULL ? meta_sub(top, argv[1], argl[1]) : NULL;
    if (sub == NULL) {
        char name[129];
        resp_sanitize(name, sizeof name, argv[1], argl[1]);
        reply_error(c, "ERR unknown subcommand '%s'. Try COMMAND HELP.", name);
        return;
    }
    if ((sub->arity > 0 && argc != (unsigned)sub->arity) || (int64_t)argc < -(int64_t)sub->arity) {
        reply_error(c, "ERR wrong number of arguments for '%s' command", sub->name);
        return;
    }
    const char *s = sub->name + 8; /* after "command|" */
    if (strcmp(s, "count") == 0) {
        const cmd_def *all[SRV_CMD_SLOTS];
        reply_int(c, cmd_all(all, SRV_CMD_SLOTS));
    } else if (strcmp(s, "list") == 0) {
        command_list(c, argc, argv, argl);
    } else if (strcmp(s, "info") == 0 && argc == 2) {
        command_all_info(c);
    } else if (strcmp(s, "info") == 0) {
        reply_array(c, argc - 2);
        for (unsigned i = 2; i < argc; i++)
            info_entry(c, ref_by_name(argv[i], argl[i]));
    } else if (strcmp(s, "docs") == 0) {
        command_docs(c, argc, argv, argl);
    } else if (strcmp(s, "getkeys") == 0 || strcmp(s, "getkeysandflags") == 0) {
        command_getkeys(c, argc, argv, argl, strcmp(s, "getkeysandflags") == 0);
    } else if (strcmp(s, "help") == 0) {
        size_t n = sizeof command_help / sizeof command_help[0];
        reply_array(c, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            reply_simple(c, command_help[i]);
    } else {
        reply_error(c, "ERR unknown subcommand '%s'. Try COMMAND HELP.", s);
    }
}
