/*
 * cdbp_cdb.c - the cachedb_funcs vtable of the "perf" engine.
 *
 * A connection is one resolved collection: the URL (perf://, perf:///name,
 * perf://name, perf:group:///name) is parsed by pc_url_parse against the
 * declared collections, so naming an undeclared collection fails startup
 * with the library's message. The connection struct begins with the
 * cachedb pool's fields, as the pool requires. Each operation is one
 * engine call; its result is mapped to the return conventions the OpenSIPS
 * cachedb callers expect (those of cachedb_local): get 1 = hit, -2 = miss,
 * -1 = error; get_counter 0 / -2 / -1; set, remove, add, sub 0 / -1.
 * Where the core declares it (CACHEDB_HAVE_GET_BUF, OpenSIPS pull request
 * 4118), get_buf too, with its own conventions (cachedb.h): 0 hit, -2
 * miss, -3 buffer too small, -1 error. A core without it (4.0.1) builds
 * the module without get_buf.
 *
 * Hot path: get/set are one engine call and nothing else (the journal's
 * per-process flush is an IPC job the maintenance process sends every
 * second, between SIP messages).
 */
#include <dprint.h>
#include <mem/mem.h>
#include <timer.h>
#include <ut.h>
#include <cachedb/cachedb.h>

#include "cdbp.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cdbp_con {
    /* the cachedb pool's fields, first (cachedb_pool.h) */
    struct cachedb_id *id;
    unsigned int ref;
    struct cachedb_pool_con_t *next;
    /* ours */
    pc_coll *coll;
} cdbp_con;

#define CDBP_COLL(con) (((cdbp_con *)(con)->data)->coll)

static void *cdbp_new_connection(struct cachedb_id *id)
{
    if (id == NULL || id->initial_url == NULL) {
        LM_ERR("no URL to open\n");
        return NULL;
    }
    pc_url u;
    char err[256];
    int rc = pc_url_parse(cdbp_cache, id->initial_url, &u, err, sizeof err);
    if (rc != 0) {
        LM_ERR("cachedb_url \"%s\": %s (declare collections with cache_collections)\n",
               id->initial_url, err[0] ? err : pc_store_strerror(rc));
        return NULL;
    }
    cdbp_con *con = pkg_malloc(sizeof *con);
    if (con == NULL) {
        LM_ERR("no more pkg memory\n");
        return NULL;
    }
    memset(con, 0, sizeof *con);
    con->id = id;
    con->ref = 1;
    con->coll = u.coll;
    LM_DBG("connection %s -> collection %s\n", id->initial_url, pc_coll_name(u.coll));
    return con;
}

static cachedb_con *cdbp_init(str *url)
{
    return cachedb_do_init(url, cdbp_new_connection);
}

static void cdbp_free_connection(cachedb_pool_con *con)
{
    pkg_free(con);
}

static void cdbp_destroy(cachedb_con *con)
{
    cachedb_do_close(con, cdbp_free_connection);
}

/* The value goes straight into pkg memory, the caller's to pkg_free: one
 * copy, one allocation, none on a miss (pc_get_alloc calls these outside
 * any lock of the table). pkg_malloc is a macro, hence the wrappers. */
static void *cdbp_pkg_obtain(size_t n, void *ctx)
{
    (void)ctx;
    return n > INT_MAX ? NULL : pkg_malloc(n);
}

static void cdbp_pkg_release(void *p, void *ctx)
{
    (void)ctx;
    pkg_free(p);
}

static const pc_allocator cdbp_pkg = {cdbp_pkg_obtain, cdbp_pkg_release, NULL};

static int cdbp_get(cachedb_con *con, str *attr, str *val)
{
    void *v = NULL;
    size_t vlen = 0;
    int rc = pc_get_alloc(CDBP_COLL(con), attr->s, (size_t)attr->len, &cdbp_pkg, &v, &vlen, NULL);
    if (rc == PC_ENOTFOUND && cdbp_pull_on_miss && cdbp_pull_replicates(CDBP_COLL(con))) {
        /* a replicated collection asks the cluster (bounded: pull_timeout_ms) */
        cdbp_pull_result pr;
        if (cdbp_pull(CDBP_COLL(con), attr->s, (size_t)attr->len, &pr) == 0 &&
            pr.outcome == CDBP_PULL_SERVED) {
            val->s = pr.value;
            val->len = (int)pr.vlen;
            return 1;
        }
        return -2;
    }
    if (rc == PC_ENOTFOUND)
        return -2;
    if (rc != 0) {
        LM_ERR("get of %.*s: %s\n", attr->len, attr->s,
               rc == PC_EHEAP ? "no more pkg memory for the value" : pc_store_strerror(rc));
        return -1;
    }
    val->s = v;
    val->len = (int)vlen;
    return 1;
}

#ifdef CACHEDB_HAVE_GET_BUF
/* A pull-on-miss for get_buf: what get() does on a miss of a replicated
 * collection, the served value (stored here by the pull, so a fallback
 * get() after -3 hits locally) copied into the caller's buffer. */
static int cdbp_get_buf_pull(pc_coll *coll, str *attr, char *buf, unsigned int buflen,
                             unsigned int *vlen, unsigned int *needed)
{
    cdbp_pull_result pr;
    if (cdbp_pull(coll, attr->s, (size_t)attr->len, &pr) != 0 || pr.outcome != CDBP_PULL_SERVED)
        return -2;
    int ret = 0;
    if (pr.vlen <= buflen) {
        memcpy(buf, pr.value, pr.vlen);
        *vlen = pr.vlen;
    } else {
        if (needed != NULL)
            *needed = pr.vlen;
        ret = -3;
    }
    pkg_free(pr.value);
    return ret;
}

/* get() into the caller's private buffer (cachedb.h states the contract):
 * a local hit is one engine call and no pkg allocation. *vlen and *needed
 * are zeroed before anything else. The minimum buflen is 0 (an empty value
 * fits any buffer), so -1 means a NULL buf / vlen / key, a key over
 * PC_KEY_MAX bytes, or an engine error. Counters read as decimal text, as
 * get() returns them. Hot path: pc_get_buf copies under the bucket's read
 * protocol straight into buf; on -3 buf holds undefined bytes. */
static int cdbp_get_buf(cachedb_con *con, str *attr, char *buf, unsigned int buflen,
                        unsigned int *vlen, unsigned int *needed)
{
    if (vlen != NULL)
        *vlen = 0;
    if (needed != NULL)
        *needed = 0;
    if (con == NULL || attr == NULL || attr->len < 0 || (attr->s == NULL && attr->len > 0) ||
        buf == NULL || vlen == NULL) {
        LM_ERR("get_buf: NULL buffer, length or key\n");
        return -1;
    }
    size_t n = 0, need = 0;
    pc_coll *coll = CDBP_COLL(con);
    int rc = pc_get_buf(coll, attr->s, (size_t)attr->len, buf, buflen, &n, &need, NULL);
    if (rc == 0) {
        *vlen = (unsigned int)n; /* <= buflen */
        return 0;
    }
    if (rc == PC_ETOOSMALL) {
        if (needed != NULL)
            *needed = (unsigned int)need; /* <= PC_VALUE_MAX */
        return -3;
    }
    if (rc == PC_ENOTFOUND) {
        if (cdbp_pull_on_miss && cdbp_pull_replicates(coll))
            return cdbp_get_buf_pull(coll, attr, buf, buflen, vlen, needed);
        return -2;
    }
    LM_ERR("get_buf of %.*s: %s\n", attr->len > 256 ? 256 : attr->len, attr->s,
           pc_store_strerror(rc));
    return -1;
}
#endif

static int cdbp_get_counter(cachedb_con *con, str *attr, int *val)
{
    int64_t n;
    int rc = pc_get_counter(CDBP_COLL(con), attr->s, (size_t)attr->len, &n);
    if (rc == PC_ENOTFOUND)
        return -2;
    if (rc != 0) {
        LM_ERR("get_counter of %.*s: %s\n", attr->len, attr->s, pc_store_strerror(rc));
        return -1;
    }
    if (n < INT_MIN || n > INT_MAX) {
        LM_ERR("counter %.*s = %lld does not fit an int\n", attr->len, attr->s, (long long)n);
        return -1;
    }
    *val = (int)n;
    return 0;
}

static int cdbp_set(cachedb_con *con, str *attr, str *val, int expires)
{
    int64_t ttl_ms = expires > 0 ? (int64_t)expires * 1000 : 0;
    int rc =
        pc_set(CDBP_COLL(con), attr->s, (size_t)attr->len, val->s, (size_t)val->len, ttl_ms, 0);
    if (rc != 0) {
        /* a full region drops every write: one line a second per process
         * (perf_stats nomem and E_CACHEDB_PERF_NOMEM count them all) */
        static unsigned int last_nomem_log;
        static unsigned long dropped;
        if (rc == PC_ENOMEM && last_nomem_log == get_ticks()) {
            dropped++;
            return -1;
        }
        if (rc == PC_ENOMEM)
            last_nomem_log = get_ticks();
        LM_ERR("set of %.*s (%d bytes) in %s: %s (%lu more dropped since the last line)\n",
               attr->len, attr->s, val->len, pc_coll_name(CDBP_COLL(con)), pc_store_strerror(rc),
               dropped);
        dropped = 0;
        return -1;
    }
    return 0;
}

static int cdbp_remove(cachedb_con *con, str *attr)
{
    int rc = pc_remove(CDBP_COLL(con), attr->s, (size_t)attr->len);
    if (rc != 0 && rc != PC_ENOTFOUND) {
        LM_ERR("remove of %.*s: %s\n", attr->len, attr->s, pc_store_strerror(rc));
        return -1;
    }
    return 0;
}

static int cdbp_addsub(cachedb_con *con, str *attr, int delta, int expires, int *new_val, int sub)
{
    int64_t ttl_ms = expires > 0 ? (int64_t)expires * 1000 : 0;
    int64_t res = 0;
    pc_coll *coll = CDBP_COLL(con);
    int rc = sub ? pc_sub(coll, attr->s, (size_t)attr->len, delta, ttl_ms, &res)
                 : pc_add(coll, attr->s, (size_t)attr->len, delta, ttl_ms, &res);
    if (rc != 0) {
        LM_ERR("%s %d on %.*s: %s\n", sub ? "sub" : "add", delta, attr->len, attr->s,
               pc_store_strerror(rc));
        return -1;
    }
    if (new_val != NULL)
        *new_val = res < INT_MIN ? INT_MIN : res > INT_MAX ? INT_MAX : (int)res;
    return 0;
}

static int cdbp_add(cachedb_con *con, str *attr, int val, int expires, int *new_val)
{
    return cdbp_addsub(con, attr, val, expires, new_val, 0);
}

static int cdbp_sub(cachedb_con *con, str *attr, int val, int expires, int *new_val)
{
    return cdbp_addsub(con, attr, val, expires, new_val, 1);
}

struct cdbp_iter {
    int (*kv_func)(const str *key, const str *value);
    int n;
};

static int cdbp_iter_cb(void *ctx, const pc_entry *e)
{
    struct cdbp_iter *it = ctx;
    str k = {(char *)e->key, (int)e->klen};
    str v = {(char *)e->val, (int)e->vlen};
    if (it->kv_func(&k, &v) == 0)
        it->n++;
    return 0;
}

/* Every live key with its value, through the lock-free walker: the
 * callback runs with no lock held. A key moved by a concurrent split may be
 * visited twice. */
static int cdbp_iter_keys(cachedb_con *con, int (*kv_func)(const str *key, const str *value))
{
    struct cdbp_iter it = {kv_func, 0};
    int rc = pc_walk(CDBP_COLL(con), NULL, 0, PC_WALK_VALUES, cdbp_iter_cb, &it);
    if (rc != 0) {
        LM_ERR("iter_keys: %s\n", pc_store_strerror(rc));
        return -1;
    }
    return it.n;
}

int cdbp_cdb_init(struct cachedb_url *urls)
{
    cachedb_engine cde;
    memset(&cde, 0, sizeof cde);
    cde.name.s = "perf";
    cde.name.len = 4;
    cde.cdb_func.init = cdbp_init;
    cde.cdb_func.destroy = cdbp_destroy;
    cde.cdb_func.get = cdbp_get;
    cde.cdb_func.get_counter = cdbp_get_counter;
    cde.cdb_func.set = cdbp_set;
    cde.cdb_func.remove = cdbp_remove;
    cde.cdb_func.add = cdbp_add;
    cde.cdb_func.sub = cdbp_sub;
    cde.cdb_func.iter_keys = cdbp_iter_keys;
    cde.cdb_func.capability = CACHEDB_CAP_BINARY_VALUE;
#ifdef CACHEDB_HAVE_GET_BUF
    /* check_cachedb_api derives no capability from get_buf: set it here */
    cde.cdb_func.get_buf = cdbp_get_buf;
    cde.cdb_func.capability |= CACHEDB_CAP_GET_BUF;
#endif
    if (register_cachedb(&cde) < 0) {
        LM_ERR("cannot register the perf cachedb engine\n");
        return -1;
    }

    str engine = str_init("perf");
    /* without a cachedb_url: perf:// when "default" is declared, else the
     * first declared collection */
    char def_buf[PC_COLL_NAME_MAX + 16];
    pc_coll *first;
    struct cachedb_url fallback = {{def_buf, 0}, NULL};
    if (pc_coll_find(cdbp_cache, "default", 7, &first) == 0)
        fallback.url.len = snprintf(def_buf, sizeof def_buf, "perf://");
    else
        fallback.url.len = snprintf(def_buf, sizeof def_buf, "perf:///%s",
                                    pc_coll_name(pc_coll_at(cdbp_cache, 0)));
    cdbp_default = NULL;
    for (struct cachedb_url *u = urls ? urls : &fallback; u != NULL; u = u->next) {
        cachedb_con *con = cdbp_init(&u->url);
        if (con == NULL) {
            LM_ERR("cannot open cachedb_url \"%.*s\"\n", u->url.len, u->url.s);
            return -1;
        }
        if (cachedb_put_connection(&engine, con) < 0) {
            LM_ERR("cannot add cachedb_url \"%.*s\" for the script\n", u->url.len, u->url.s);
            return -1;
        }
        /* the groupless URL is where cache_store("perf", ...) writes */
        pc_url pu;
        if (pc_url_parse(cdbp_cache, ((cdbp_con *)con->data)->id->initial_url, &pu, NULL, 0) == 0 &&
            pu.group[0] == '\0')
            cdbp_default = CDBP_COLL(con);
    }
    if (cdbp_default == NULL && pc_coll_find(cdbp_cache, "default", 7, &cdbp_default) != 0)
        cdbp_default = pc_coll_at(cdbp_cache, 0);
    LM_INFO("default collection (groupless cachedb_url): %s\n", pc_coll_name(cdbp_default));
    return 0;
}
