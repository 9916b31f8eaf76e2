/*
 * bench_chase.c - the dependent pointer chase of bench_chase.h.
 */
#include "bench_chase.h"

#include "bench_util.h"

#include <stdlib.h>
#include <sys/mman.h>

struct chase_node {
    struct chase_node *next;
    char pad[56];
};

_Static_assert(sizeof(struct chase_node) == 64, "one node per cache line");

struct bench_chase {
    struct chase_node *nodes;
    size_t n;
    struct chase_node *cur; /* where the next run resumes along the cycle */
};

int bench_chase_create(bench_chase **out, size_t bytes, uint64_t seed)
{
    bench_chase *c;
    uint32_t *order;
    uint64_t x = bench_mix64(seed) | 1;
    size_t n = bytes / sizeof(struct chase_node);

    if (n < 2 || n > UINT32_MAX)
        return -1;
    c = calloc(1, sizeof *c);
    order = malloc(n * sizeof *order);
    if (c == NULL || order == NULL)
        goto fail;
    c->n = n;
    c->nodes =
        mmap(NULL, n * sizeof *c->nodes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c->nodes == MAP_FAILED) {
        c->nodes = NULL;
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = bench_pick(bench_xorshift(&x), i + 1);
        uint32_t t = order[i];

        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        c->nodes[order[i]].next = &c->nodes[order[(i + 1) % n]];
    c->cur = &c->nodes[order[0]];
    free(order);
    *out = c;
    return 0;
fail:
    free(order);
    bench_chase_destroy(c);
    return -1;
}

static struct chase_node *chase(struct chase_node *p, uint64_t loads)
{
    for (uint64_t i = 0; i < loads / 8; i++) {
        p = p->next;
        p = p->next;
        p = p->next;
        p = p->next;
        p = p->next;
        p = p->next;
        p = p->next;
        p = p->next;
    }
    return p;
}

double bench_chase_run(bench_chase *c, uint64_t loads)
{
    uint64_t t0, t1;
    struct chase_node *p;

    loads = loads < 8 ? 8 : loads & ~(uint64_t)7;
    p = chase(c->cur, loads / 16 + 8); /* untimed: leave the previous run's lines behind */
    t0 = bench_now_ns();
    p = chase(p, loads);
    t1 = bench_now_ns();
    c->cur = p; /* the data dependence keeps the loop alive */
    return (double)(t1 - t0) / (double)loads;
}

size_t bench_chase_bytes(const bench_chase *c)
{
    return c->n * sizeof(struct chase_node);
}

void bench_chase_destroy(bench_chase *c)
{
    if (c == NULL)
        return;
    if (c->nodes)
        munmap(c->nodes, c->n * sizeof *c->nodes);
    free(c);
}
