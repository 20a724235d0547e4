/*
 * cli_models.c - `transformerd models install FILE.argosmodel [--models-dir DIR]`:
 * unpacks an Argos Translate package the way argospm does (into
 * LibreTranslate's packages folder unless --models-dir says another), offline
 * and bounded (service/argos.h); `transformerd serve --models-dir DIR` then
 * serves it.
 */
#include <stdio.h>
#include <string.h>

#include "argos.h"
#include "cli_models.h"

static void models_usage(FILE *f)
{
    fprintf(f, "usage: transformerd models install FILE.argosmodel [--models-dir DIR]\n"
               "unpacks an Argos Translate package into DIR (default: $ARGOS_PACKAGES_DIR, else\n"
               "$XDG_DATA_HOME/argos-translate/packages, else "
               "~/.local/share/argos-translate/packages,\n"
               "LibreTranslate's own folder); nothing is downloaded\n");
}

int cli_models(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
        models_usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "install") != 0) {
        fprintf(stderr, "transformerd models: unknown command '%s'\n", argv[0]);
        models_usage(stderr);
        return 2;
    }
    const char *file = NULL, *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            models_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--models-dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (argv[i][0] != '-' && !file) {
            file = argv[i];
        } else {
            fprintf(stderr, "transformerd models install: unexpected argument '%s'\n", argv[i]);
            models_usage(stderr);
            return 2;
        }
    }
    if (!file) {
        models_usage(stderr);
        return 2;
    }
    char err[1024], def[4096], out[4400];
    if (!dir) {
        if (srv_argos_default_dir(def, sizeof def, err, sizeof err) != 0) {
            fprintf(stderr, "transformerd models install: %s\n", err);
            return 1;
        }
        dir = def;
    }
    srv_argos_limits lim = srv_argos_limits_default();
    if (srv_argos_install(file, dir, &lim, out, sizeof out, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd models install: %s\n", err);
        return 1;
    }
    srv_argos_meta m;
    if (srv_argos_meta_read(out, &m, err, sizeof err) == 0)
        printf("installed %s -> %s%s%s into %s\n", m.from_code, m.to_code,
               m.package_version[0] ? " version " : "", m.package_version, out);
    else
        printf("installed into %s\n", out);
    return 0;
}
