/*
 * suite.h - the end of a daemon test's main: its libcheck suite run against
 * a started daemon, the daemon stopped, the logs removed or kept.
 */
#ifndef TD_TEST_SUITE_H
#define TD_TEST_SUITE_H

#include <sys/types.h>

#include <check.h>

/* Runs s, stops the daemon pid (SIGTERM; an unclean exit counts as a
 * failure; none when pid <= 0), removes tmpdir when everything passed
 * (else says where the logs are); returns main's exit status. */
int tc_run_suite(Suite *s, pid_t pid, const char *tmpdir);

#endif
