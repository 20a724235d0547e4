/*
 * memstat.c - the process's resident memory, measured (memstat.h).
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "memstat.h"

int srv_memstat_read(srv_memstat *m)
{
    memset(m, 0, sizeof *m);
    struct mallinfo2 mi = mallinfo2();
    m->heap = mi.uordblks + mi.hblkhd;
    m->heap_free = mi.fordblks;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return -1;
    char line[256];
    unsigned long kib;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %lu kB", &kib) == 1)
            m->rss = (size_t)kib << 10;
        else if (sscanf(line, "RssFile: %lu kB", &kib) == 1)
            m->file = (size_t)kib << 10;
    }
    fclose(f);
    return m->rss ? 0 : -1;
}
