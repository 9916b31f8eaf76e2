/*
 * test_mgmt_register.c - extending the management command table
 * (src/mgmt/): pc_mgmt_register with its parameter binding and errors, the
 * malformed tables it refuses, and the perf_stats hook.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mgmt_testlib.h"
#include "pcache_mgmt.h"

/* ---- extending the table ----------------------------------------------------- */
struct ext {
    int runs;
    pc_coll *coll;
    uint64_t n;
    int n_given;
};

static int ext_run(void *ctx, const pc_mgmt_call *call, const pc_result_ops *o, void *r,
                   pc_mgmt_err *err)
{
    struct ext *x = ctx;
    size_t len;
    const void *store = pc_mgmt_call_bytes(call, 1, &len);
    x->runs++;
    x->coll = pc_mgmt_call_coll(call, 0);
    x->n = pc_mgmt_call_uint(call, 2);
    x->n_given = pc_mgmt_call_given(call, 2);
    assert_ptr_equal(pc_mgmt_call_mgmt(call), pc_mgmt_call_mgmt(call));
    if (store != NULL && len == 4 && memcmp(store, "fail", 4) == 0)
        return pc_mgmt_errorf(err, PC_ESYS, "perf_save: store \"fail\" is not writable");
    if (store != NULL && len == 5 && memcmp(store, "plain", 5) == 0)
        return PC_ECONFIG; /* no message: the layer names the code */
    int rc;
    if ((rc = o->obj_begin(r, NULL)) == 0 &&
        (rc = o->u64(r, "collections",
                     x->coll ? 1 : pc_coll_count(pc_mgmt_cache(pc_mgmt_call_mgmt(call))))) == 0 &&
        (rc = (store ? o->str(r, "store", store, len) : o->null(r, "store"))) == 0)
        rc = o->obj_end(r);
    return rc;
}

static int ext_stats(void *ctx, pc_coll *c, const pc_result_ops *o, void *r)
{
    (void)ctx;
    return o->i64(r, "last_save", strcmp(pc_coll_name(c), "th") == 0 ? 1700000000 : 0);
}

static void test_register(void **state)
{
    struct fx *f = *state;
    static const pc_mgmt_param params[] = {
        {"collection", PC_MP_COLL_ALL, 0, NULL, 0, 0, "collection (default: all)"},
        {"store", PC_MP_STRING, 0, NULL, 0, 16, "store URL"},
        {"batch", PC_MP_UINT, 0, "500", 1, 10000, "rows per batch"},
    };
    struct ext x = {0};
    pc_mgmt_cmd cmd = {"perf_save", "snapshot collections", params, 3, ext_run, &x};
    unsigned before = pc_mgmt_cmd_count(f->m);
    assert_int_equal(before, 11);
    assert_int_equal(pc_mgmt_register(f->m, &cmd), 0);
    assert_int_equal(pc_mgmt_cmd_count(f->m), before + 1);
    assert_string_equal(pc_mgmt_cmd_at(f->m, before)->name, "perf_save");
    assert_ptr_equal(pc_mgmt_cmd_find(f->m, "perf_save"), pc_mgmt_cmd_at(f->m, before));
    assert_null(pc_mgmt_cmd_find(f->m, "perf_load"));
    assert_null(pc_mgmt_cmd_at(f->m, before + 1));
    assert_int_equal(pc_mgmt_register(f->m, &cmd), PC_EEXIST);

    ok(f, "perf_save");
    assert_string_equal(f->out, "{\"collections\":4,\"store\":null}");
    assert_null(x.coll);
    assert_int_equal(x.n, 500); /* the default */
    assert_int_equal(x.n_given, 0);
    ok(f, "perf_save th lmdb:///x batch=7");
    assert_string_equal(f->out, "{\"collections\":1,\"store\":\"lmdb:///x\"}");
    assert_ptr_equal(x.coll, coll(f, "th"));
    assert_int_equal(x.n, 7);
    assert_int_equal(x.n_given, 1);
    int runs = x.runs;
    bad(f, "perf_save nosuch", PC_ENOCOLL, "perf_save: unknown collection \"nosuch\"");
    bad(f, "perf_save th batch=0", PC_EINVAL,
        "perf_save: parameter \"batch\": out of range [1, 10000]");
    bad(f, "perf_save th 0123456789abcdefX", PC_ETOOBIG,
        "perf_save: parameter \"store\": 17 bytes");
    bad(f, "perf_save th x 5 extra", PC_EINVAL, "perf_save: too many positional parameters");
    assert_int_equal(x.runs, runs); /* never reached the command */
    bad(f, "perf_save th fail", PC_ESYS, "perf_save: store \"fail\" is not writable");
    bad(f, "perf_save th plain", PC_ECONFIG, "perf_save: invalid configuration");

    /* malformed tables are refused */
    static const pc_mgmt_param dup[] = {{"a", PC_MP_UINT, 0, NULL, 0, 9, ""},
                                        {"a", PC_MP_UINT, 0, NULL, 0, 9, ""}};
    static const pc_mgmt_param baddef[] = {{"a", PC_MP_UINT, 0, "ten", 0, 9, ""}};
    static const pc_mgmt_param outdef[] = {{"a", PC_MP_UINT, 0, "10", 0, 9, ""}};
    static const pc_mgmt_param reqdef[] = {{"a", PC_MP_UINT, 1, "1", 0, 9, ""}};
    static const pc_mgmt_param colldef[] = {{"c", PC_MP_COLL, 0, "th", 0, 0, ""}};
    static const pc_mgmt_param badtype[] = {{"a", 99, 0, NULL, 0, 9, ""}};
    static const pc_mgmt_param badname[] = {{"a b", PC_MP_UINT, 0, NULL, 0, 9, ""}};
    static const pc_mgmt_param minmax[] = {{"a", PC_MP_UINT, 0, NULL, 9, 1, ""}};
    const struct {
        const char *name;
        const pc_mgmt_param *p;
        unsigned n;
    } tabs[] = {{"t_dup", dup, 2},
                {"t_baddef", baddef, 1},
                {"t_outdef", outdef, 1},
                {"t_reqdef", reqdef, 1},
                {"t_colldef", colldef, 1},
                {"t_badtype", badtype, 1},
                {"t_badname", badname, 1},
                {"t_minmax", minmax, 1},
                {"bad name", NULL, 0},
                {"", NULL, 0},
                {"t_many", params, PC_MGMT_MAX_PARAMS + 1},
                {"t_null", NULL, 1}};
    for (size_t i = 0; i < sizeof tabs / sizeof tabs[0]; i++) {
        pc_mgmt_cmd c = {tabs[i].name, "", tabs[i].p, tabs[i].n, ext_run, &x};
        if (pc_mgmt_register(f->m, &c) != PC_EINVAL)
            fail_msg("table %s accepted", tabs[i].name);
    }
    pc_mgmt_cmd norun = {"t_norun", "", NULL, 0, NULL, NULL};
    assert_int_equal(pc_mgmt_register(f->m, &norun), PC_EINVAL);
    assert_int_equal(pc_mgmt_register(NULL, &cmd), PC_EINVAL);
    assert_int_equal(pc_mgmt_cmd_count(f->m), before + 1);

    /* the perf_stats hook adds members to every collection object */
    assert_int_equal(pc_mgmt_stats_hook(f->m, ext_stats, NULL), 0);
    ok(f, "perf_stats");
    has(f, "\"reset_at\":0,\"last_save\":0}");
    has(f, "\"collection\":\"th\"");
    has(f, "\"last_save\":1700000000}");
    assert_int_equal(pc_mgmt_stats_hook(f->m, NULL, NULL), 0);
    ok(f, "perf_stats th");
    lacks(f, "last_save");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_register, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
