/*
 * buildinfo.c - version, commit and the bundled model's places (buildinfo.h).
 */
#include <stdlib.h>
#include <unistd.h>

#include "buildinfo.h"
#include "td_git_commit.h"

#ifndef TD_VERSION
#error "TD_VERSION (the CMake project version) must be defined"
#endif
#ifndef TD_SOURCE_MODEL_DIR
#error "TD_SOURCE_MODEL_DIR (the source tree's models/en-de) must be defined"
#endif
#ifndef TD_INSTALLED_MODEL_DIR
#error "TD_INSTALLED_MODEL_DIR must be defined"
#endif

const char srv_version[] = TD_VERSION;
const char srv_commit[] = TD_GIT_COMMIT;

const char *srv_default_model_dir(void)
{
    const char *env = getenv("TRANSFORMERD_MODEL");
    if (env && *env)
        return env;
    if (access(TD_SOURCE_MODEL_DIR "/config.json", F_OK) == 0)
        return TD_SOURCE_MODEL_DIR;
    return TD_INSTALLED_MODEL_DIR;
}
