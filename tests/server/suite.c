/*
 * suite.c - see suite.h.
 */
#include "suite.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "client.h"

int tc_run_suite(Suite *s, pid_t pid, const char *tmpdir)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (pid > 0) { /* pid <= 0: the suite's daemons are its own tests' */
        kill(pid, SIGTERM);
        int st = tc_daemon_wait(pid, 30);
        if (st != 0) {
            fprintf(stderr, "the daemon exited with %d after SIGTERM\n", st);
            failed++;
        }
    }
    if (!failed) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    } else {
        fprintf(stderr, "daemon logs kept in %s\n", tmpdir);
    }
    return failed ? 1 : 0;
}
