/*
 * buildinfo.h - what this executable is: its version (the CMake project's),
 * the git commit it was built from (written at every build by
 * cmake/git_commit.cmake; "unknown" outside git) and where the bundled
 * model is looked for when no --model is given (docs/api.md, "Command line
 * and environment"). Constants; any thread.
 */
#ifndef SRV_BUILDINFO_H
#define SRV_BUILDINFO_H

extern const char srv_version[]; /* "0.1.0" */
extern const char srv_commit[];  /* "3a7ae62f01bc", "...-dirty" or "unknown" */

/* The model directory to use when --model is not given: TRANSFORMERD_MODEL
 * when set (and not empty), else the source tree's models/en-de when it
 * has a config.json (a build tree's executable), else the installed
 * TD_INSTALLED_MODEL_DIR (/usr/share/transformerd/models/en-de by default).
 * Never relative to the current directory. */
const char *srv_default_model_dir(void);

#endif /* SRV_BUILDINFO_H */
