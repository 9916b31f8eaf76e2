/*
 * test_txn_kill.c - processes killed (SIGKILL) at random points while they
 * commit transactions over many buckets of two collections, round after
 * round: the table must not wedge (a dead commit's bucket locks, several
 * per process, are taken over one by one), every key stays readable, a
 * transaction over all the keys still commits, maintenance still runs, and
 * the invariant checker (pc__test_verify) finds the table sound. A commit
 * cut in the middle may survive in part (docs/design.md §18): the test
 * does not ask the keys to agree.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pc_fixture.h"
#include "pc_testhooks.h"
#include "pcache.h"

#define NKEYS 40
#define ROUNDS 40
#define KIDS 2

struct ctx {
    pc_coll *a, *b;
};

/* Every key of both collections, plus one: a wide commit. */
static int incr_all(void *p)
{
    struct ctx *x = p;
    char k[16];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(k, sizeof k, "tk%d", i);
        int rc = pc_add(i % 2 ? x->a : x->b, k, strlen(k), 1, 0, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int repairs; /* buckets taken over from a dead commit, in this process */

static void count_repairs(void *ctx, int level, const char *msg)
{
    (void)ctx, (void)level;
    if (strstr(msg, "repaired bucket") != NULL)
        repairs++;
}

/* tk0's value, 0 while absent. */
static int64_t counter0(struct ctx *x)
{
    int64_t v = 0;
    return pc_get_counter(x->b, "tk0", 3, &v) == 0 ? v : 0;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

static void killed_commits_do_not_wedge(void **state)
{
    (void)state;
    pc_config cfg;
    pc_fx_config(&cfg, "a;b", 32);
    cfg.log.fn = count_repairs;
    cfg.log.level = PC_LOG_WARN;
    pc_cache *c = pc_fx_create(&cfg);
    struct ctx x = {pc_fx_coll(c, "a"), pc_fx_coll(c, "b")};
    srand(20261202);
    for (int r = 0; r < ROUNDS; r++) {
        int64_t v0 = counter0(&x);
        pid_t kids[KIDS];
        for (int i = 0; i < KIDS; i++) {
            kids[i] = fork();
            assert_true(kids[i] >= 0);
            if (kids[i] == 0) {
                for (;;)
                    if (pc_txn_run(c, incr_all, &x, 1000000) != 0)
                        _exit(1);
            }
        }
        /* once the children commit (a forked sanitizer build starts slowly),
         * at a random point of their work */
        for (int w = 0; w < 5000 && counter0(&x) < v0 + 3; w++)
            sleep_us(1000);
        sleep_us(rand() % 5000);
        for (int i = 0; i < KIDS; i++)
            kill(kids[i], SIGKILL);
        for (int i = 0; i < KIDS; i++) {
            int st = 0;
            assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
            assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        }
        /* the parent commits over every key: it must take over any lock
         * the dead held, and finish */
        assert_int_equal(pc_txn_run(c, incr_all, &x, 1000000), PC_OK);
    }
    char k[16];
    for (int i = 0; i < NKEYS; i++) {
        int64_t v = 0;
        snprintf(k, sizeof k, "tk%d", i);
        assert_int_equal(pc_get_counter(i % 2 ? x.a : x.b, k, strlen(k), &v), PC_OK);
        assert_true(v >= ROUNDS);
    }
    /* how often a kill landed inside a commit's locks (timing-dependent:
     * shown, not asserted) */
    print_message("buckets taken over from dead commits: %d\n", repairs);
    pc_maint_report rep;
    assert_int_equal(pc_maintain(c, PC_MAINT_ALL, &rep), PC_OK);
    char msg[256] = "";
    assert_int_equal(pc__test_verify(c, msg, sizeof msg), 0);
    pc_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_commits_do_not_wedge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
