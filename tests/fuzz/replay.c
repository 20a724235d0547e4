/*
 * replay.c - a main for a fuzz target without libFuzzer: runs
 * LLVMFuzzerTestOneInput once on every file named on the command line (a
 * directory: every regular file in it, in name order), as libFuzzer does
 * with a corpus and -runs=0. `make test` builds each target with it (gcc,
 * and again under ASan+UBSan), so the targets keep building with the tree
 * and every committed seed and regression input keeps passing the target's
 * invariants; finding new inputs is tests/fuzz/run.sh's work (clang).
 * Prints the count of inputs run; exits 1 when none was found, and the
 * target itself aborts on a broken invariant.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* A custom mutator's fallback to libFuzzer's own; never called on replay. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size)
{
    (void)data;
    (void)max_size;
    return size;
}

/* Runs the target on the file's bytes, in a buffer of exactly their size
 * (so that ASan sees a read past the input's end). */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    uint8_t *in = n >= 0 ? malloc(n ? (size_t)n : 1) : NULL;
    int ok = in && fseek(f, 0, SEEK_SET) == 0 && fread(in, 1, (size_t)n, f) == (size_t)n;
    if (f)
        fclose(f);
    if (!ok) {
        free(in);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(in, (size_t)n);
    free(in);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    long runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 1;
            runs++;
            continue;
        }
        struct dirent **ents;
        int ne = scandir(argv[i], &ents, NULL, by_name);
        if (ne < 0) {
            fprintf(stderr, "replay: cannot list %s\n", argv[i]);
            return 1;
        }
        int rc = 0;
        for (int k = 0; k < ne; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], ents[k]->d_name);
            if (rc == 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
                if (run_file(path) != 0)
                    rc = 1;
                else
                    runs++;
            }
            free(ents[k]);
        }
        free(ents);
        if (rc)
            return 1;
    }
    printf("replay: %ld inputs\n", runs);
    return runs > 0 ? 0 : 1;
}
