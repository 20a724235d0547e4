/*
 * test_argos.c - Argos Translate packages (server/service/argos.h) without
 * a model: metadata.json read as argostranslate reads it (its keys,
 * defaults, a target prefix) and refused naming the key; .argosmodel
 * archives made here with libzip installed as argospm would, byte for byte
 * and atomically, and the hostile or broken ones refused before a byte is
 * written, naming the entry and the reason, nothing left behind.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zip.h>

#include "argos.h"

static const char k_meta[] =
    "{\"package_version\": \"1.9\", \"argos_version\": \"1.9.0\", \"from_code\": \"en\","
    " \"from_name\": \"English\", \"to_code\": \"de\", \"to_name\": \"German\","
    " \"links\": [\"https://example.com/en_de.argosmodel\"]}";

static char g_root[256];

static void setup(void)
{
    snprintf(g_root, sizeof g_root, "/tmp/td-argos-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_root));
    char p[512];
    snprintf(p, sizeof p, "%s/packages", g_root);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    ck_assert_int_eq(system(cmd), 0);
}

/* How many entries the packages folder holds (hidden ones included). */
static int count_entries(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/packages", g_root);
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

typedef struct entry {
    const char *name;
    const char *data; /* NULL: a directory */
    size_t len;       /* 0: strlen(data) */
    unsigned mode;    /* unix mode of the external attributes, 0: none */
} entry;

/* Writes an archive of the entries to g_root/NAME; returns its path. */
static const char *make_zip(const char *name, const entry *e, int n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_root, name);
    int zerr;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    ck_assert_ptr_nonnull(z);
    for (int i = 0; i < n; i++) {
        zip_int64_t idx;
        if (!e[i].data) {
            idx = zip_dir_add(z, e[i].name, ZIP_FL_ENC_UTF_8);
        } else {
            size_t len = e[i].len ? e[i].len : strlen(e[i].data);
            zip_source_t *s = zip_source_buffer(z, e[i].data, len, 0);
            ck_assert_ptr_nonnull(s);
            idx = zip_file_add(z, e[i].name, s, ZIP_FL_ENC_UTF_8);
        }
        ck_assert_msg(idx >= 0, "%s: %s", e[i].name, zip_strerror(z));
        if (e[i].mode)
            ck_assert_int_eq(zip_file_set_external_attributes(z, (zip_uint64_t)idx, 0,
                                                              ZIP_OPSYS_UNIX,
                                                              (zip_uint32_t)e[i].mode << 16),
                             0);
    }
    ck_assert_msg(zip_close(z) == 0, "%s", zip_strerror(z));
    return path;
}

static const char k_bin[] = "\x06\x00\x00\x00 not a real model.bin \x01\x02\x03";

#define PKG "translate-en_de-1_9"
static const entry k_good[] = {
    {PKG "/", NULL, 0, 0},
    {PKG "/metadata.json", k_meta, 0, 0100644},
    {PKG "/model/", NULL, 0, 0},
    {PKG "/model/model.bin", k_bin, sizeof k_bin, 0100644},
    {PKG "/model/shared_vocabulary.json", "[\"<unk>\", \"<s>\", \"</s>\"]", 0, 0},
    {PKG "/sentencepiece.model", "spm bytes", 0, 0},
    {PKG "/stanza/en/tokenize/ewt.pt", "ignored", 0, 0},
    {PKG "/README.md", "# en-de\n", 0, 0},
};
#define N_GOOD ((int)(sizeof k_good / sizeof k_good[0]))

/* Installs path into g_root/packages; returns the rc, the message in err. */
static int install(const char *path, const srv_argos_limits *lim, char *err, size_t errlen)
{
    char dir[512], out[4400];
    snprintf(dir, sizeof dir, "%s/packages", g_root);
    srv_argos_limits def = srv_argos_limits_default();
    return srv_argos_install(path, dir, lim ? lim : &def, out, sizeof out, err, errlen);
}

static void file_is(const char *rel, const char *data, size_t len)
{
    char p[600];
    snprintf(p, sizeof p, "%s/packages/%s", g_root, rel);
    FILE *f = fopen(p, "rb");
    ck_assert_msg(f != NULL, "%s missing", rel);
    char buf[256];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_eq(got, len);
    ck_assert(memcmp(buf, data, len) == 0);
}

START_TEST(meta_keys)
{
    srv_argos_meta m;
    char err[400];
    ck_assert_int_eq(srv_argos_meta_parse(k_meta, strlen(k_meta), &m, err, sizeof err), 0);
    ck_assert_str_eq(m.from_code, "en");
    ck_assert_str_eq(m.to_code, "de");
    ck_assert_str_eq(m.to_name, "German");
    ck_assert_str_eq(m.package_version, "1.9");
    ck_assert_str_eq(m.type, "translate");
    ck_assert_str_eq(m.target_prefix, "");
    const char *pref = "{\"from_code\": \"en\", \"to_code\": \"pt_BR\", \"target_prefix\": \"__pt__\"}";
    ck_assert_int_eq(srv_argos_meta_parse(pref, strlen(pref), &m, err, sizeof err), 0);
    ck_assert_str_eq(m.target_prefix, "__pt__");
    ck_assert_str_eq(m.to_code, "pt_BR");

    static const struct {
        const char *json, *want;
    } bad[] = {
        {"{\"to_code\": \"de\"}", "key 'from_code': missing"},
        {"{\"from_code\": \"en\"}", "key 'to_code': missing"},
        {"{\"from_code\": 7, \"to_code\": \"de\"}", "key 'from_code': must be a string"},
        {"{\"from_code\": \"e n\", \"to_code\": \"de\"}", "key 'from_code': must be 1 to 31"},
        {"{\"from_code\": \"en\", \"to_code\": \"de\", \"type\": \"sbd\"}",
         "key 'type': \"sbd\" is not a translation package"},
        {"[1]", "must be a JSON object"},
        {"{\"from_code\": \"en\", \"from_code\": \"de\"}", "not JSON"},
        {"{\"from_code\": \"en\", \"to_code\": \"de\", \"target_prefix\": [\"x\"]}",
         "key 'target_prefix': must be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        ck_assert_int_ne(srv_argos_meta_parse(bad[i].json, strlen(bad[i].json), &m, err,
                                              sizeof err),
                         0);
        ck_assert_msg(strstr(err, bad[i].want) && strstr(err, "metadata.json"),
                      "%s: got '%s', want '%s'", bad[i].json, err, bad[i].want);
    }
}
END_TEST

START_TEST(install_unpacks)
{
    const char *z = make_zip("en_de.argosmodel", k_good, N_GOOD);
    char err[1024];
    ck_assert_msg(install(z, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(count_entries(), 1); /* no hidden directory left */
    file_is(PKG "/metadata.json", k_meta, strlen(k_meta));
    file_is(PKG "/model/model.bin", k_bin, sizeof k_bin);
    file_is(PKG "/sentencepiece.model", "spm bytes", 9);
    file_is(PKG "/stanza/en/tokenize/ewt.pt", "ignored", 7);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/packages/" PKG, g_root);
    ck_assert(srv_argos_is_package(dir));
    srv_argos_meta m;
    ck_assert_int_eq(srv_argos_meta_read(dir, &m, err, sizeof err), 0);
    ck_assert_str_eq(m.from_code, "en");

    /* a second time: refused, the installed one untouched */
    ck_assert_int_ne(install(z, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "already installed"), "%s", err);
    file_is(PKG "/model/model.bin", k_bin, sizeof k_bin);
    ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* Each archive refused with the message part given, nothing written. */
START_TEST(install_refuses)
{
    static char zeros[3 << 20]; /* 3 MiB of zeros deflate ~1000 times */
    const entry meta = {PKG "/metadata.json", k_meta, 0, 0};
    const entry model = {PKG "/model/model.bin", k_bin, sizeof k_bin, 0};
    struct {
        entry e[4];
        int n;
        const char *want;
    } cases[] = {
        {{meta, model, {PKG "/../evil", "x", 0, 0}}, 3, "'" PKG "/../evil': not a plain relative"},
        {{{"/" PKG "/metadata.json", k_meta, 0, 0}, model}, 2, "not a plain relative"},
        {{meta, model, {"other/x", "x", 0, 0}}, 3, "outside the package's one directory"},
        {{{"metadata.json", k_meta, 0, 0}, {"model/model.bin", "x", 0, 0}}, 2,
         "outside the package's one directory"},
        {{meta, model, {PKG "/model/link", "/etc/passwd", 0, 0120777}}, 3,
         "a link or a device"},
        {{model}, 1, "no " PKG "/metadata.json: not an Argos Translate package"},
        {{meta, {PKG "/sentencepiece.model", "x", 0, 0}}, 2, "a package without a model"},
        {{{PKG "/metadata.json", "{\"from_code\": \"en\"}", 0, 0}, model}, 2,
         PKG "/metadata.json: key 'to_code': missing"},
        {{meta, model, {PKG "/model/bomb", zeros, sizeof zeros, 0}}, 3, "expands"},
        {{meta, model, {PKG "/a\\b", "x", 0, 0}}, 3, "not a plain relative"},
        {{meta, model, {"." PKG "/x", "x", 0, 0}}, 3, "not a plain relative"},
        /* refused while unpacking (a file where a directory must be): the
         * half-written directory goes too */
        {{meta, model, {PKG "/x", "x", 0, 0}, {PKG "/x/y", "y", 0, 0}}, 4, PKG "/x/y: cannot write it"},
    };
    char err[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *z = make_zip("bad.argosmodel", cases[i].e, cases[i].n);
        err[0] = 0;
        ck_assert_int_ne(install(z, NULL, err, sizeof err), 0);
        ck_assert_msg(strstr(err, cases[i].want) && strstr(err, "bad.argosmodel"),
                      "case %zu: got '%s', want '%s'", i, err, cases[i].want);
        ck_assert_int_eq(count_entries(), 0);
    }
    /* not a zip at all */
    char p[512];
    snprintf(p, sizeof p, "%s/plain.argosmodel", g_root);
    FILE *f = fopen(p, "wb");
    fputs("PK not really", f);
    fclose(f);
    ck_assert_int_ne(install(p, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "not a package archive"), "%s", err);
    ck_assert_int_ne(install("/nonexistent.argosmodel", NULL, err, sizeof err), 0);
    ck_assert_int_eq(count_entries(), 0);
}
END_TEST

/* The limits in entries and bytes, lowered to the good archive's size. */
START_TEST(install_limits)
{
    const char *z = make_zip("en_de.argosmodel", k_good, N_GOOD);
    char err[1024];
    srv_argos_limits lim = srv_argos_limits_default();
    lim.max_entries = N_GOOD - 1;
    ck_assert_int_ne(install(z, &lim, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "entries, more than"), "%s", err);
    lim = srv_argos_limits_default();
    lim.max_total_bytes = 64;
    ck_assert_int_ne(install(z, &lim, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "bytes unpacked"), "%s", err);
    lim = srv_argos_limits_default();
    lim.max_entry_bytes = strlen(k_meta) - 1;
    ck_assert_int_ne(install(z, &lim, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "metadata.json': ") && strstr(err, "bytes unpacked, more than"), "%s",
                  err);
    ck_assert_int_eq(count_entries(), 0);
    /* a packages folder that is not one */
    char out[4400];
    lim = srv_argos_limits_default();
    ck_assert_int_ne(srv_argos_install(z, "/nonexistent/dir", &lim, out, sizeof out, err,
                                       sizeof err),
                     0);
    ck_assert_msg(strstr(err, "is not a directory"), "%s", err);
}
END_TEST

START_TEST(default_dir)
{
    char out[4096], err[256];
    setenv("ARGOS_PACKAGES_DIR", "/srv/argos", 1);
    ck_assert_int_eq(srv_argos_default_dir(out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "/srv/argos");
    unsetenv("ARGOS_PACKAGES_DIR");
    setenv("XDG_DATA_HOME", "/home/u/.data", 1);
    ck_assert_int_eq(srv_argos_default_dir(out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "/home/u/.data/argos-translate/packages");
    unsetenv("XDG_DATA_HOME");
    setenv("HOME", "/home/u", 1);
    ck_assert_int_eq(srv_argos_default_dir(out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "/home/u/.local/share/argos-translate/packages");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("argos");
    TCase *tc = tcase_create("packages");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, meta_keys);
    tcase_add_test(tc, install_unpacks);
    tcase_add_test(tc, install_refuses);
    tcase_add_test(tc, install_limits);
    tcase_add_test(tc, default_dir);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
