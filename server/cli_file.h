/*
 * cli_file.h - `transformerd translate-file IN OUT [--format EXT]
 * [--source LANG] [--target LANG] [--overwrite] [serve's options]`: a file
 * translated as POST /translate_file translates it (cli_file.c).
 */
#ifndef CLI_FILE_H
#define CLI_FILE_H

/* The arguments after "translate-file"; the process's exit status: 0, 1
 * (the file not translated: the reason on stderr), 2 (usage). */
int cli_translate_file(int argc, char **argv);

#endif
