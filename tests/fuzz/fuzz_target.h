/*
 * fuzz_target.h - what every fuzz target of tests/fuzz/ shares: the
 * libFuzzer entry point each fuzz_<name>.c defines, and the check by which
 * a target asserts an invariant of the parser it drives.
 *
 * A target is built two ways (tests/fuzz/CMakeLists.txt): with libFuzzer
 * (-DPCACHE_FUZZ=ON, clang), which supplies main() and mutates inputs, and
 * in the normal suite with replay_main.c, which feeds every file of the
 * target's seed corpus and regression folder once (ctest label fuzz; under
 * ASan/UBSan with -DPCACHE_SANITIZE=ON). Either way an input that breaks
 * an invariant aborts the process with the line that failed.
 */
#ifndef PC_FUZZ_TARGET_H
#define PC_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs one input (data: size bytes, borrowed; nothing may be read past
 * them). Returns 0; a violated invariant aborts. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with the condition's text when it is false: unlike assert() it
 * is never compiled out (the Release build replays the corpora too). */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif /* PC_FUZZ_TARGET_H */
