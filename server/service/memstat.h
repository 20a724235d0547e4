/*
 * memstat.h - where the daemon's resident memory is, measured: the
 * process's resident set and its file-backed part (/proc/self/status:
 * VmRSS, RssFile: the executable, its libraries, their data), and the
 * C library's heap in use (mallinfo2: the arenas' allocated bytes and the
 * chunks it maps apart, where the weights and the workers' buffers are).
 * RSS is about the file-backed part plus the heap in use; what the heap
 * holds is said part by part by /v1/models (docs/api.md).
 */
#ifndef SRV_MEMSTAT_H
#define SRV_MEMSTAT_H

#include <stddef.h>

typedef struct srv_memstat {
    size_t rss;       /* VmRSS */
    size_t file;      /* RssFile */
    size_t heap;      /* mallinfo2: uordblks + hblkhd */
    size_t heap_free; /* mallinfo2: fordblks (free in the arenas, resident or not) */
} srv_memstat;

/* 0, or -1 when /proc/self/status cannot be read (then rss and file 0). */
int srv_memstat_read(srv_memstat *m);

#endif
