/*
 * procfs.c - what /proc says of another process (pcache_util.h): the one
 * reading of a process's state shared by pcached's start (a port or the
 * instance lock held by an earlier one) and persist's store lock.
 */
#include "pcache_util.h"

#include <signal.h>
#include <stdio.h>

int pc_pid_dying(long pid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 1;
    int dying = 0;
    while (!dying && fgets(line, sizeof line, f) != NULL) {
        unsigned long long mask;
        if (strncmp(line, "State:", 6) == 0)
            dying = strchr(line, 'Z') != NULL || strchr(line, 'X') != NULL;
        else if ((sscanf(line, "SigPnd: %llx", &mask) == 1 ||
                  sscanf(line, "ShdPnd: %llx", &mask) == 1) &&
                 (mask & (1ull << (SIGKILL - 1))) != 0)
            dying = 1;
    }
    fclose(f);
    return dying;
}
