/*
 * argos.c - Argos Translate packages and their archives (argos.h).
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "argos.h"

#define MIB (1024ull * 1024ull)

srv_argos_limits srv_argos_limits_default(void)
{
    /* Real packages: 60-400 MB unpacked in a few dozen entries (a stanza
     * model adds some); a model.bin compresses by less than 2x. */
    srv_argos_limits l = {
        .max_entries = 4096,
        .max_total_bytes = 8192 * MIB,
        .max_entry_bytes = 4096 * MIB,
        .max_ratio = 100,
        .max_metadata_bytes = 64 * 1024,
    };
    return l;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int srv_argos_is_package(const char *dir)
{
    char p[4400];
    struct stat st;
    snprintf(p, sizeof p, "%s/metadata.json", dir);
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    snprintf(p, sizeof p, "%s/model", dir);
    return is_dir(p);
}

/* A language code or a version as a package may write it: 1..n-1 bytes of
 * letters, digits, '_', '-', '.'. */
static int plain_token(const char *s, size_t n)
{
    size_t len = strlen(s);
    if (len == 0 || len >= n)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* Copies the string key of obj into out (n bytes): 0 when absent (out
 * left as is) or copied, -1 with a message when not a string or too long. */
static int meta_string(const json_t *obj, const char *key, char *out, size_t n, int token,
                       char *err, size_t errlen)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        snprintf(err, errlen, "metadata.json: key '%s': must be a string", key);
        return -1;
    }
    const char *s = json_string_value(v);
    if (token ? !plain_token(s, n) : strlen(s) >= n) {
        snprintf(err, errlen, "metadata.json: key '%s': %s (got \"%.40s\")", key,
                 token ? "must be 1 to 31 letters, digits, '_', '-' or '.'" : "too long", s);
        return -1;
    }
    snprintf(out, n, "%s", s);
    return 0;
}

int srv_argos_meta_parse(const char *text, size_t n, srv_argos_meta *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    snprintf(m->type, sizeof m->type, "translate");
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "metadata.json: not JSON: line %d: %s", je.line, je.text);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "metadata.json: must be a JSON object");
        goto done;
    }
    if (meta_string(root, "from_code", m->from_code, sizeof m->from_code, 1, err, errlen) ||
        meta_string(root, "to_code", m->to_code, sizeof m->to_code, 1, err, errlen) ||
        meta_string(root, "from_name", m->from_name, sizeof m->from_name, 0, err, errlen) ||
        meta_string(root, "to_name", m->to_name, sizeof m->to_name, 0, err, errlen) ||
        meta_string(root, "package_version", m->package_version, sizeof m->package_version, 0,
                    err, errlen) ||
        meta_string(root, "type", m->type, sizeof m->type, 1, err, errlen) ||
        meta_string(root, "target_prefix", m->target_prefix, sizeof m->target_prefix, 0, err,
                    errlen))
        goto done;
    if (strcmp(m->type, "translate") != 0) {
        snprintf(err, errlen, "metadata.json: key 'type': \"%s\" is not a translation package",
                 m->type);
        goto done;
    }
    if (!m->from_code[0] || !m->to_code[0]) {
        snprintf(err, errlen, "metadata.json: key '%s': missing (a package of one language "
                 "pair names it)", m->from_code[0] ? "to_code" : "from_code");
        goto done;
    }
    rc = 0;
done:
    json_decref(root);
    return rc;
}

int srv_argos_meta_read(const char *dir, srv_argos_meta *m, char *err, size_t errlen)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/metadata.json", dir);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "metadata.json: %s", fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t max = srv_argos_limits_default().max_metadata_bytes;
    if ((uint64_t)st.st_size > max) {
        close(fd);
        snprintf(err, errlen, "metadata.json: %lld bytes, more than %zu", (long long)st.st_size,
                 max);
        return -1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t got = buf ? read(fd, buf, (size_t)st.st_size) : -1;
    close(fd);
    if (got != (ssize_t)st.st_size) {
        free(buf);
        snprintf(err, errlen, "metadata.json: cannot read it");
        return -1;
    }
    int rc = srv_argos_meta_parse(buf, (size_t)got, m, err, errlen);
    free(buf);
    return rc;
}

int srv_argos_default_dir(char *out, size_t n, char *err, size_t errlen)
{
    const char *v = getenv("ARGOS_PACKAGES_DIR");
    if (v && *v) {
        snprintf(out, n, "%s", v);
        return 0;
    }
    v = getenv("XDG_DATA_HOME");
    if (v && *v) {
        snprintf(out, n, "%s/argos-translate/packages", v);
        return 0;
    }
    v = getenv("HOME");
    if (v && *v) {
        snprintf(out, n, "%s/.local/share/argos-translate/packages", v);
        return 0;
    }
    snprintf(err, errlen, "no packages folder: set --models-dir, ARGOS_PACKAGES_DIR or HOME");
    return -1;
}

/* ---- archives ------------------------------------------------------------ */

typedef struct installer {
    const char *file;
    zip_t *za;
    char top[256];     /* the one top-level directory */
    char tmp[4400];    /* the hidden directory being written, "" until made */
    char *err;
    size_t errlen;
} installer;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int ifail(installer *in, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(in->err, in->errlen, "%s: %s", in->file, msg);
    return -1;
}

/* A name of the archive that can be written under the top directory:
 * relative, '/'-separated components that are neither empty (but for a
 * directory's trailing '/'), "." nor "..", no backslash or control byte.
 * Its top component into top (n bytes). */
static int safe_name(const char *name, char *top, size_t n)
{
    size_t len = strlen(name);
    if (len == 0 || len > 1024 || name[0] == '/')
        return 0;
    const char *p = name;
    int first = 1;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t clen = slash ? (size_t)(slash - p) : strlen(p);
        if (clen == 0)
            return 0;
        if ((clen == 1 && p[0] == '.') || (clen == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        for (size_t i = 0; i < clen; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == '\\' || p[i] == 0x7f)
                return 0;
        if (first) {
            if (clen >= n || p[0] == '.')
                return 0;
            memcpy(top, p, clen);
            top[clen] = 0;
            first = 0;
        }
        if (!slash)
            break;
        p = slash + 1;
    }
    return 1;
}

/* Creates every missing directory of path below in->tmp (path's own last
 * component excluded unless it ends with '/'). */
static int make_dirs(installer *in, const char *path)
{
    char buf[4400];
    snprintf(buf, sizeof buf, "%s", path);
    size_t base = strlen(in->tmp);
    for (char *p = buf + base + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return ifail(in, "cannot make %s: %s", buf, strerror(errno));
        *p = '/';
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Reads entry i whole (metadata.json) into a NUL-terminated buffer. */
static char *read_small(installer *in, zip_uint64_t i, zip_uint64_t size)
{
    zip_file_t *zf = zip_fopen_index(in->za, i, 0);
    char *buf = zf ? malloc(size + 1) : NULL;
    zip_int64_t got = 0, r = 0;
    while (buf && got <= (zip_int64_t)size &&
           (r = zip_fread(zf, buf + got, size + 1 - (zip_uint64_t)got)) > 0)
        got += r;
    if (zf)
        zip_fclose(zf);
    if (!buf || r < 0 || got != (zip_int64_t)size) {
        free(buf);
        ifail(in, "%s/metadata.json: cannot be read (damaged archive)", in->top);
        return NULL;
    }
    buf[size] = 0;
    return buf;
}

/* Writes entry i (of the declared size) to path, refusing more bytes or
 * fewer than declared. */
static int write_entry(installer *in, zip_uint64_t i, const char *name, const char *path,
                       zip_uint64_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return ifail(in, "%s: cannot write it%s: %s", name,
                     errno == EEXIST ? " (the archive names it twice)" : "", strerror(errno));
    zip_file_t *zf = zip_fopen_index(in->za, i, 0);
    if (!zf) {
        close(fd);
        return ifail(in, "%s: %s", name, zip_strerror(in->za));
    }
    char buf[65536];
    zip_uint64_t total = 0;
    zip_int64_t r;
    int rc = 0;
    while ((r = zip_fread(zf, buf, sizeof buf)) > 0) {
        total += (zip_uint64_t)r;
        if (total > size) {
            rc = ifail(in, "%s: more data than its declared %llu bytes", name,
                       (unsigned long long)size);
            break;
        }
        for (zip_int64_t off = 0; off < r;) {
            ssize_t w = write(fd, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                rc = ifail(in, "%s: cannot write it: %s", name, strerror(errno));
                break;
            }
            off += w;
        }
        if (rc)
            break;
    }
    if (!rc && r < 0)
        rc = ifail(in, "%s: %s", name, zip_file_strerror(zf));
    if (!rc && total != size)
        rc = ifail(in, "%s: %llu bytes where %llu were declared", name,
                   (unsigned long long)total, (unsigned long long)size);
    zip_fclose(zf);
    if (close(fd) != 0 && !rc)
        rc = ifail(in, "%s: cannot write it: %s", name, strerror(errno));
    return rc;
}

/* Every entry checked against the limits before anything is written;
 * metadata.json's index into *meta_i. */
static int check_entries(installer *in, const srv_argos_limits *lim, zip_int64_t ne,
                         zip_uint64_t *meta_i, zip_uint64_t *meta_size)
{
    if (ne <= 0)
        return ifail(in, "an empty archive");
    if ((uint64_t)ne > lim->max_entries)
        return ifail(in, "%lld entries, more than %llu", (long long)ne,
                     (unsigned long long)lim->max_entries);
    uint64_t total = 0;
    int has_meta = 0, has_model = 0;
    for (zip_int64_t i = 0; i < ne; i++) {
        zip_stat_t st;
        if (zip_stat_index(in->za, (zip_uint64_t)i, 0, &st) != 0 ||
            !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE) ||
            !(st.valid & ZIP_STAT_COMP_SIZE))
            return ifail(in, "entry %lld: cannot be read (damaged archive)", (long long)i);
        char top[256];
        if (!safe_name(st.name, top, sizeof top))
            return ifail(in, "entry '%.200s': not a plain relative name inside the package",
                         st.name);
        if (!in->top[0])
            snprintf(in->top, sizeof in->top, "%s", top);
        else if (strcmp(top, in->top) != 0)
            return ifail(in, "entry '%.200s': outside the package's one directory '%s'",
                         st.name, in->top);
        if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
            return ifail(in, "entry '%.200s': encrypted", st.name);
        zip_uint8_t opsys;
        zip_uint32_t attr;
        if (zip_file_get_external_attributes(in->za, (zip_uint64_t)i, 0, &opsys, &attr) == 0 &&
            opsys == ZIP_OPSYS_UNIX) {
            mode_t mode = (mode_t)(attr >> 16);
            if ((mode & S_IFMT) != 0 && !S_ISREG(mode) && !S_ISDIR(mode))
                return ifail(in, "entry '%.200s': a link or a device, not a file", st.name);
        }
        size_t len = strlen(st.name);
        int dir = st.name[len - 1] == '/';
        if (dir && st.size != 0)
            return ifail(in, "entry '%.200s': a directory with data", st.name);
        if (st.size > lim->max_entry_bytes)
            return ifail(in, "entry '%.200s': %llu bytes unpacked, more than %llu", st.name,
                         (unsigned long long)st.size, (unsigned long long)lim->max_entry_bytes);
        total += st.size;
        if (total > lim->max_total_bytes)
            return ifail(in, "more than %llu bytes unpacked", (unsigned long long)lim->max_total_bytes);
        if (st.size >= MIB && (st.comp_size == 0 || st.size / st.comp_size > lim->max_ratio))
            return ifail(in, "entry '%.200s': expands %llu times (%llu bytes from %llu), more "
                         "than %llu", st.name,
                         (unsigned long long)(st.comp_size ? st.size / st.comp_size : st.size),
                         (unsigned long long)st.size, (unsigned long long)st.comp_size,
                         (unsigned long long)lim->max_ratio);
        const char *rest = st.name + strlen(in->top);
        if (strcmp(rest, "/metadata.json") == 0) {
            *meta_i = (zip_uint64_t)i;
            *meta_size = st.size;
            has_meta = 1;
        }
        if (strncmp(rest, "/model/", 7) == 0)
            has_model = 1;
    }
    if (!has_meta)
        return ifail(in, "no %s/metadata.json: not an Argos Translate package", in->top);
    if (!has_model)
        return ifail(in, "no %s/model/: a package without a model", in->top);
    if (*meta_size > lim->max_metadata_bytes)
        return ifail(in, "%s/metadata.json: %llu bytes, more than %zu", in->top,
                     (unsigned long long)*meta_size, lim->max_metadata_bytes);
    return 0;
}

static int unpack(installer *in, zip_int64_t ne)
{
    size_t toplen = strlen(in->top);
    for (zip_int64_t i = 0; i < ne; i++) {
        zip_stat_t st;
        if (zip_stat_index(in->za, (zip_uint64_t)i, 0, &st) != 0)
            return ifail(in, "entry %lld: cannot be read (damaged archive)", (long long)i);
        const char *rest = st.name + toplen; /* "" or "/..." */
        if (!rest[0] || strcmp(rest, "/") == 0)
            continue;
        char path[4400];
        if ((size_t)snprintf(path, sizeof path, "%s%s", in->tmp, rest) >= sizeof path)
            return ifail(in, "entry '%.200s': name too long", st.name);
        if (make_dirs(in, path) != 0)
            return -1;
        if (rest[strlen(rest) - 1] == '/')
            continue;
        if (write_entry(in, (zip_uint64_t)i, st.name, path, st.size) != 0)
            return -1;
    }
    return 0;
}

int srv_argos_install(const char *file, const char *packages_dir, const srv_argos_limits *lim,
                      char *out_dir, size_t out_n, char *err, size_t errlen)
{
    installer in;
    memset(&in, 0, sizeof in);
    in.file = file;
    in.err = err;
    in.errlen = errlen;
    int zerr = 0;
    in.za = zip_open(file, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    if (!in.za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        ifail(&in, "not a package archive (%s)", zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return -1;
    }
    int rc = -1;
    zip_int64_t ne = zip_get_num_entries(in.za, 0);
    zip_uint64_t meta_i = 0, meta_size = 0;
    if (check_entries(&in, lim, ne, &meta_i, &meta_size) != 0)
        goto done;
    char *meta_text = read_small(&in, meta_i, meta_size);
    if (!meta_text)
        goto done;
    srv_argos_meta meta;
    char merr[400];
    int mrc = srv_argos_meta_parse(meta_text, (size_t)meta_size, &meta, merr, sizeof merr);
    free(meta_text);
    if (mrc != 0) {
        ifail(&in, "%s/%s", in.top, merr);
        goto done;
    }
    if (!is_dir(packages_dir)) {
        ifail(&in, "the packages folder %s is not a directory", packages_dir);
        goto done;
    }
    char target[4400];
    snprintf(target, sizeof target, "%s/%s", packages_dir, in.top);
    struct stat st;
    if (lstat(target, &st) == 0) {
        ifail(&in, "%s is already installed (remove it first)", target);
        goto done;
    }
    snprintf(in.tmp, sizeof in.tmp, "%s/.%s.installing-XXXXXX", packages_dir, in.top);
    if (!mkdtemp(in.tmp)) {
        ifail(&in, "cannot write into %s: %s", packages_dir, strerror(errno));
        in.tmp[0] = 0;
        goto done;
    }
    chmod(in.tmp, 0755);
    if (unpack(&in, ne) != 0)
        goto done;
    if (rename(in.tmp, target) != 0) {
        ifail(&in, "cannot move it into place at %s: %s", target, strerror(errno));
        goto done;
    }
    in.tmp[0] = 0;
    snprintf(out_dir, out_n, "%s", target);
    rc = 0;
done:
    if (in.tmp[0])
        nftw(in.tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    zip_discard(in.za);
    return rc;
}
