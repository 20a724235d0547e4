/*
 * argos.h - Argos Translate packages, as LibreTranslate installs them: a
 * directory with metadata.json, model/ (a CTranslate2 model directory),
 * sentencepiece.model or bpe.model, and sentence splitters (stanza/,
 * minisbd/, spacy/: ignored, ICU splits sentences), and the .argosmodel
 * archive (a zip of one such directory) that argospm unpacks into
 * ~/.local/share/argos-translate/packages.
 *
 * Nothing here downloads anything; an archive is bounded (entries, bytes,
 * expansion ratio, names) before a byte of it is written.
 */
#ifndef SRV_ARGOS_H
#define SRV_ARGOS_H

#include <stddef.h>
#include <stdint.h>

/* What metadata.json says of a package (argostranslate's keys). */
typedef struct srv_argos_meta {
    char from_code[32], to_code[32];
    char from_name[64], to_name[64];
    char package_version[32];
    char type[32];           /* "translate" (the default) */
    char target_prefix[128]; /* a token the decode starts with, "" for none */
} srv_argos_meta;

/* Bounds of an archive (the defaults: srv_argos_limits_default). */
typedef struct srv_argos_limits {
    uint64_t max_entries;       /* files and directories */
    uint64_t max_total_bytes;   /* unpacked */
    uint64_t max_entry_bytes;   /* one file unpacked */
    uint64_t max_ratio;         /* unpacked / packed of an entry of >= 1 MiB */
    size_t max_metadata_bytes;  /* metadata.json */
} srv_argos_limits;

srv_argos_limits srv_argos_limits_default(void);

/* 1 when dir is a package: a regular metadata.json and a directory model/. */
int srv_argos_is_package(const char *dir);

/* Parses dir/metadata.json. 0, or -1 with a message naming the file and
 * the key ("metadata.json: key 'from_code': ..."). */
int srv_argos_meta_read(const char *dir, srv_argos_meta *m, char *err, size_t errlen);
/* The same from the file's text (n bytes; for tests and the archive). */
int srv_argos_meta_parse(const char *text, size_t n, srv_argos_meta *m, char *err, size_t errlen);

/* The folder argospm installs into: $ARGOS_PACKAGES_DIR, else
 * $XDG_DATA_HOME/argos-translate/packages, else
 * $HOME/.local/share/argos-translate/packages. 0, or -1 when none can be
 * made out (no HOME). */
int srv_argos_default_dir(char *out, size_t n, char *err, size_t errlen);

/* Unpacks the package archive `file` into packages_dir as argospm does (its
 * one top-level directory becomes packages_dir/NAME), after checking every
 * entry against lim: one top-level directory holding metadata.json (parsed
 * first) and model/, relative names without "..", no links or devices, the
 * sizes and ratios bounded. Written into a hidden directory beside the
 * target and renamed into place at the end, so that a half-written package
 * is never seen; an existing NAME is refused (remove it first). 0 with the
 * installed directory in out_dir, or -1 with a message naming the archive
 * (and the entry) and the reason; nothing is left behind on failure. */
int srv_argos_install(const char *file, const char *packages_dir, const srv_argos_limits *lim,
                      char *out_dir, size_t out_n, char *err, size_t errlen);

#endif /* SRV_ARGOS_H */
