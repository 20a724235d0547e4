/*
 * test_safetensors.c - the safetensors reader: every validation rule is
 * broken once by a hand-built file and must be reported by name, valid files
 * open with the right tensors, a file that changes while it is read fails
 * its open (truncated or grown under the reader, through --wrap=pread),
 * and the F16/BF16 conversions are exact.
 *
 * Files are written into a private mkdtemp directory under /tmp that is
 * removed after each test.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

static char g_dir[64];
static char g_path[128];

static void setup(void)
{
    strcpy(g_dir, "/tmp/td_st_test_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    snprintf(g_path, sizeof g_path, "%s/model.safetensors", g_dir);
}

static void teardown(void)
{
    unlink(g_path);
    rmdir(g_dir);
}

/* Writes raw bytes to g_path. */
static void write_raw(const void *bytes, size_t n)
{
    FILE *f = fopen(g_path, "wb");
    ck_assert_ptr_nonnull(f);
    if (n > 0)
        ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Writes a safetensors file to g_path: 8-byte little-endian length hlen
 * (which may lie about the header), the header string, then data. */
static void write_st_len(uint64_t hlen, const char *header, const void *data, size_t ndata)
{
    size_t nh = strlen(header);
    size_t total = 8 + nh + ndata;
    unsigned char *buf = malloc(total);
    ck_assert_ptr_nonnull(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + 8, header, nh);
    if (ndata > 0)
        memcpy(buf + 8 + nh, data, ndata);
    write_raw(buf, total);
    free(buf);
}

/* Writes a well-formed safetensors file: true header length. */
static void write_st(const char *header, const void *data, size_t ndata)
{
    write_st_len(strlen(header), header, data, ndata);
}

/* Writes header plus ndata zero bytes and asserts that open fails with a
 * message containing want (and starting with the file's basename), and that
 * the struct is left zeroed. */
static void expect_fail(const char *header, size_t ndata, const char *want)
{
    unsigned char *data = calloc(ndata > 0 ? ndata : 1, 1);
    ck_assert_ptr_nonnull(data);
    write_st(header, data, ndata);
    free(data);
    td_st st;
    memset(&st, 0xab, sizeof st);
    char err[512];
    ck_assert_int_eq(td_st_open(&st, g_path, err, sizeof err), -1);
    ck_assert_msg(strstr(err, want) != NULL, "err '%s' lacks '%s'", err, want);
    ck_assert_msg(strncmp(err, "model.safetensors: ", 19) == 0, "err '%s' lacks basename", err);
    ck_assert_ptr_null(st.path);
    ck_assert_ptr_null(st.file);
    ck_assert_ptr_null(st.tensors);
    ck_assert_int_eq(st.n_tensors, 0);
    ck_assert_uint_eq(st.file_size, 0);
}

/* Asserts that open of the current g_path fails mentioning want. */
static void expect_open_fail(const char *want)
{
    td_st st;
    char err[512];
    ck_assert_int_eq(td_st_open(&st, g_path, err, sizeof err), -1);
    ck_assert_msg(strstr(err, want) != NULL, "err '%s' lacks '%s'", err, want);
    ck_assert_ptr_null(st.file);
}

/* ---- a file that changes while it is read ----------------------------- */

/* The test links with --wrap=pread: the reader's reads come here, and the
 * first one after g_change is set changes the file under it, as a `cp`
 * over the model during a reload does: truncated or grown with its
 * modification time put back (only the sizes tell), or rewritten in place
 * at the same size (only the modification time tells). */
static enum { CHANGE_NONE, CHANGE_TRUNCATE, CHANGE_GROW, CHANGE_REWRITE } g_change;
ssize_t __real_pread(int fd, void *buf, size_t n, off_t off);
ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off);
ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off)
{
    struct stat before;
    if (g_change != CHANGE_NONE)
        ck_assert_int_eq(stat(g_path, &before), 0);
    if (g_change == CHANGE_TRUNCATE)
        ck_assert_int_eq(truncate(g_path, 20), 0);
    if (g_change == CHANGE_GROW || g_change == CHANGE_REWRITE) {
        FILE *f = fopen(g_path, g_change == CHANGE_GROW ? "ab" : "r+b");
        ck_assert_ptr_nonnull(f);
        if (g_change == CHANGE_REWRITE)
            fseek(f, -4, SEEK_END);
        fputs(g_change == CHANGE_GROW ? "0123456789abcdef" : "\x01\x02\x03\x04", f);
        fclose(f);
    }
    if (g_change == CHANGE_TRUNCATE || g_change == CHANGE_GROW) {
        struct timespec t[2] = {before.st_atim, before.st_mtim};
        ck_assert_int_eq(utimensat(AT_FDCWD, g_path, t, 0), 0);
    }
    g_change = CHANGE_NONE;
    return __real_pread(fd, buf, n, off);
}

START_TEST(test_changed_while_read)
{
    float x[16] = {0};
    const char *h = "{\"t\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[0,64]}}";
    for (int k = CHANGE_TRUNCATE; k <= CHANGE_REWRITE; k++) {
        write_st(h, x, sizeof x);
        if (k == CHANGE_REWRITE) {
            /* a modification time of its own to differ from */
            struct timespec t[2] = {{1000000000, 0}, {1000000000, 0}};
            ck_assert_int_eq(utimensat(AT_FDCWD, g_path, t, 0), 0);
        }
        g_change = k;
        expect_open_fail("the file changed while it was read");
    }
    /* untouched, the same file opens */
    write_st(h, x, sizeof x);
    td_st st;
    char err[512];
    ck_assert_msg(td_st_open(&st, g_path, err, sizeof err) == 0, "%s", err);
    td_st_close(&st);
}
END_TEST

/* ---- file and header level ------------------------------------------ */

START_TEST(test_file_too_short)
{
    write_raw("\x02\0\0\0\0", 5);
    expect_open_fail("header: file is 5 bytes, shorter than the 8-byte header length");
    write_raw("", 0);
    expect_open_fail("header: file is 0 bytes");
}
END_TEST

START_TEST(test_missing_file)
{
    td_st st;
    char err[512];
    ck_assert_int_eq(td_st_open(&st, "/tmp/td_st_no_such_dir/x.safetensors", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "x.safetensors: header: cannot open") != NULL, "%s", err);
}
END_TEST

START_TEST(test_header_past_eof)
{
    write_st_len(100, "{}", NULL, 0);
    expect_open_fail("header: header length 100 runs past the end of the file (10 bytes)");
}
END_TEST

START_TEST(test_header_over_cap)
{
    write_st_len((uint64_t)TD_ST_MAX_HEADER + 1, "{}", NULL, 0);
    expect_open_fail("header: header length 104857601 exceeds the maximum 104857600");
    write_st_len(UINT64_MAX, "{}", NULL, 0);
    expect_open_fail("exceeds the maximum");
}
END_TEST

START_TEST(test_header_not_json)
{
    expect_fail("{\"a\": ", 0, "header: invalid JSON");
    expect_fail("{} trailing", 0, "header: invalid JSON");
}
END_TEST

START_TEST(test_header_not_object)
{
    expect_fail("[1, 2]", 0, "header: JSON is not an object");
}
END_TEST

START_TEST(test_duplicate_key)
{
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                4, "duplicate object key");
}
END_TEST

START_TEST(test_metadata_not_object)
{
    expect_fail("{\"__metadata__\": [\"x\"]}", 0, "header: __metadata__ is not an object");
    expect_fail("{\"__metadata__\": {\"format\": 1}}", 0,
                "header: __metadata__ value for key 'format' is not a string");
}
END_TEST

START_TEST(test_empty_name)
{
    expect_fail("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                "header: tensor with an empty name");
}
END_TEST

/* ---- tensor entries ---------------------------------------------------- */

START_TEST(test_entry_not_object)
{
    expect_fail("{\"w\": 3}", 0, "tensor 'w': entry is not an object");
}
END_TEST

START_TEST(test_unknown_dtype)
{
    expect_fail("{\"w\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
                "tensor 'w': unsupported dtype 'I64'");
    expect_fail("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
                "tensor 'w': unsupported dtype 'F64'");
    expect_fail("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
                "tensor 'w': dtype is not a string");
}
END_TEST

START_TEST(test_missing_keys)
{
    expect_fail("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing dtype");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4,
                "tensor 'w': missing shape");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'w': missing data_offsets");
}
END_TEST

START_TEST(test_extra_key)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
                "tensor 'w': unexpected key 'x'");
}
END_TEST

START_TEST(test_shape_negative)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4,
                "tensor 'w': shape[1] is negative (-1)");
}
END_TEST

START_TEST(test_shape_not_integer)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
                "tensor 'w': shape[0] is not an integer");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
                "tensor 'w': shape[0] is not an integer");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4,
                "tensor 'w': shape is not an array");
}
END_TEST

START_TEST(test_rank_too_large)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
                4, "tensor 'w': shape rank 9 exceeds the maximum 8");
}
END_TEST

START_TEST(test_shape_overflow)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                "\"data_offsets\":[0,4]}}",
                4, "tensor 'w': element count overflows at shape[1] (4294967296)");
    /* 2^62 elements fit int64 but not as F32 bytes in a 64-bit size_t. */
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                "\"data_offsets\":[0,4]}}",
                4, "tensor 'w': byte size of 4611686018427387904 elements of F32 overflows");
}
END_TEST

START_TEST(test_offsets_wrong_length)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4,
                "tensor 'w': data_offsets is not an array of 2 integers");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4,
                "tensor 'w': data_offsets is not an array of 2 integers");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4,
                "tensor 'w': data_offsets[1] is negative (-4)");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4,
                "tensor 'w': data_offsets[1] is not an integer");
}
END_TEST

START_TEST(test_begin_after_end)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8,
                "tensor 'w': data_offsets begin 8 is after end 4");
}
END_TEST

START_TEST(test_size_mismatch)
{
    expect_fail("{\"w\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", 16,
                "tensor 'w': data_offsets span 16 bytes but 6 elements of F16 need 12");
}
END_TEST

START_TEST(test_end_past_buffer)
{
    expect_fail("{\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                16, "tensor 'lm_head.weight': data_offsets end 24 is past the data buffer (16 bytes)");
}
END_TEST

START_TEST(test_gap)
{
    /* a [0,4), b [8,12): 4 bytes nobody owns. */
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                12, "tensor 'b': gap of 4 bytes before data_offsets begin 8 (previous tensor 'a' ends at 4)");
    /* nothing starts at 0 */
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                "tensor 'a': gap of 4 bytes at the start of the data buffer");
}
END_TEST

START_TEST(test_overlap)
{
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                12, "tensor 'b': data_offsets [4, 12) overlap tensor 'a' which ends at 8");
}
END_TEST

START_TEST(test_trailing_bytes)
{
    expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7,
                "tensor 'a': last tensor ends at 4 but the data buffer has 7 bytes (3 trailing bytes)");
    expect_fail("{}", 2, "header: no tensors but the data buffer has 2 bytes");
}
END_TEST

/* ---- valid files --------------------------------------------------------- */

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

START_TEST(test_valid_file)
{
    /* Data layout (the header length is arbitrary, so the data pointers
     * need not be aligned; td_to_f32 must cope):
     *   w  F32  [2,2]  [0,16)   1, -2.5, 0.125, 1e30
     *   h  F16  [5]    [16,26)  0x0001, 0x3c00, 0xfc00, 0x7e00, 0x8400
     *   b  BF16 [3]    [26,32)  0x3f80, 0xc040, 0x7f80
     *   s  F32  []     [32,36)  7.0 (rank-0 scalar)
     *   z  F32  [0,3]  [36,36)  empty
     * The header lists them out of name and offset order. */
    const char *hdr =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[36,36]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[16,26]},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
        "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[32,36]},"
        "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[26,32]}}  ";
    unsigned char data[36];
    const float wv[4] = {1.0f, -2.5f, 0.125f, 1e30f};
    memcpy(data, wv, 16);
    const uint16_t hv[5] = {0x0001, 0x3c00, 0xfc00, 0x7e00, 0x8400};
    for (int i = 0; i < 5; i++)
        put_u16(data + 16 + 2 * i, hv[i]);
    const uint16_t bv[3] = {0x3f80, 0xc040, 0x7f80};
    for (int i = 0; i < 3; i++)
        put_u16(data + 26 + 2 * i, bv[i]);
    const float sv = 7.0f;
    memcpy(data + 32, &sv, 4);
    write_st(hdr, data, sizeof data);

    td_st st;
    char err[512] = "";
    ck_assert_msg(td_st_open(&st, g_path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(st.n_tensors, 5);
    ck_assert_str_eq(st.path, g_path);
    for (int i = 1; i < st.n_tensors; i++)
        ck_assert_int_lt(strcmp(st.tensors[i - 1].name, st.tensors[i].name), 0);

    const td_st_tensor *w = td_st_find(&st, "w");
    ck_assert_ptr_nonnull(w);
    ck_assert_str_eq(w->name, "w");
    ck_assert_int_eq(w->dtype, TD_F32);
    ck_assert_int_eq(w->rank, 2);
    ck_assert_int_eq(w->shape[0], 2);
    ck_assert_int_eq(w->shape[1], 2);
    ck_assert_int_eq(w->n_elements, 4);
    ck_assert_uint_eq(w->n_bytes, 16);
    float out[5];
    td_to_f32(out, w->data, w->dtype, w->n_elements);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(out[i], wv[i]);

    const td_st_tensor *h = td_st_find(&st, "h");
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(h->dtype, TD_F16);
    ck_assert_int_eq(h->n_elements, 5);
    ck_assert_uint_eq(h->n_bytes, 10);
    ck_assert_ptr_eq(h->data, (const unsigned char *)w->data + 16);
    td_to_f32(out, h->data, h->dtype, h->n_elements);
    ck_assert_float_eq(out[0], 0x1p-24f); /* smallest subnormal */
    ck_assert_float_eq(out[1], 1.0f);
    ck_assert(isinf(out[2]) && out[2] < 0);
    ck_assert(isnan(out[3]));
    ck_assert_float_eq(out[4], -0x1p-14f); /* smallest normal, negative */

    const td_st_tensor *b = td_st_find(&st, "b");
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(b->dtype, TD_BF16);
    td_to_f32(out, b->data, b->dtype, b->n_elements);
    ck_assert_float_eq(out[0], 1.0f);
    ck_assert_float_eq(out[1], -3.0f);
    ck_assert(isinf(out[2]) && out[2] > 0);

    const td_st_tensor *s = td_st_find(&st, "s");
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->rank, 0);
    ck_assert_int_eq(s->n_elements, 1);
    td_to_f32(out, s->data, s->dtype, s->n_elements);
    ck_assert_float_eq(out[0], 7.0f);

    const td_st_tensor *z = td_st_find(&st, "z");
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(z->rank, 2);
    ck_assert_int_eq(z->n_elements, 0);
    ck_assert_uint_eq(z->n_bytes, 0);

    ck_assert_ptr_null(td_st_find(&st, "__metadata__"));
    ck_assert_ptr_null(td_st_find(&st, "x"));
    ck_assert_ptr_null(td_st_find(&st, ""));
    ck_assert_ptr_null(td_st_find(&st, "ww"));
    td_st_close(&st);
    ck_assert_ptr_null(st.file);
    ck_assert_int_eq(st.n_tensors, 0);
    td_st_close(&st); /* second close of a zeroed struct is harmless */
}
END_TEST

START_TEST(test_zero_tensors)
{
    write_st("{}", NULL, 0);
    td_st st;
    char err[512] = "";
    ck_assert_msg(td_st_open(&st, g_path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(st.n_tensors, 0);
    ck_assert_ptr_null(td_st_find(&st, "a"));
    td_st_close(&st);

    write_st("{\"__metadata__\":{}}", NULL, 0);
    ck_assert_msg(td_st_open(&st, g_path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(st.n_tensors, 0);
    td_st_close(&st);
}
END_TEST

START_TEST(test_zero_element_tensor)
{
    write_st("{\"e\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[0,0]}}", NULL, 0);
    td_st st;
    char err[512] = "";
    ck_assert_msg(td_st_open(&st, g_path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(st.n_tensors, 1);
    const td_st_tensor *e = td_st_find(&st, "e");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->n_elements, 0);
    ck_assert_uint_eq(e->n_bytes, 0);
    td_st_close(&st);

    /* an empty tensor sharing its offset with a non-empty one still tiles */
    float one = 1.0f;
    write_st("{\"e\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[0,0]},"
             "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", &one, 4);
    ck_assert_msg(td_st_open(&st, g_path, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(st.n_tensors, 2);
    td_st_close(&st);
}
END_TEST

START_TEST(test_close_zeroed_and_null)
{
    td_st st;
    memset(&st, 0, sizeof st);
    td_st_close(&st);
    td_st_close(NULL);
    ck_assert_ptr_null(td_st_find(&st, "a"));
    ck_assert_ptr_null(td_st_find(NULL, "a"));
}
END_TEST

/* ---- dtype helpers and conversions -------------------------------------- */

START_TEST(test_dtype_helpers)
{
    ck_assert_uint_eq(td_dtype_size(TD_F32), 4);
    ck_assert_uint_eq(td_dtype_size(TD_F16), 2);
    ck_assert_uint_eq(td_dtype_size(TD_BF16), 2);
    ck_assert_str_eq(td_dtype_name(TD_F32), "F32");
    ck_assert_str_eq(td_dtype_name(TD_F16), "F16");
    ck_assert_str_eq(td_dtype_name(TD_BF16), "BF16");
}
END_TEST

static float f16_to_f32(uint16_t h)
{
    unsigned char b[2];
    put_u16(b, h);
    float f;
    td_to_f32(&f, b, TD_F16, 1);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of f16 bit pattern h computed independently from the
 * definition: (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024. */
static double f16_reference(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp((double)m, -24) : ldexp(1024.0 + m, e - 25);
    return s ? -v : v;
}

START_TEST(test_f16_to_f32_exhaustive)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 0x1f && m != 0) {
            ck_assert_msg(isnan(f), "0x%04x", h);
            ck_assert_int_eq(signbit(f) != 0, (h & 0x8000u) != 0);
        } else if (e == 0x1f) {
            ck_assert_msg(isinf(f), "0x%04x", h);
            ck_assert_int_eq(signbit(f) != 0, (h & 0x8000u) != 0);
        } else {
            ck_assert_msg((double)f == f16_reference((uint16_t)h), "0x%04x -> %a", h, (double)f);
            ck_assert_int_eq(signbit(f) != 0, (h & 0x8000u) != 0); /* -0 stays -0 */
        }
    }
}
END_TEST

START_TEST(test_f32_to_f16_round_trip)
{
    /* Every finite and infinite f16 survives f16 -> f32 -> f16. */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0)
            continue;
        ck_assert_msg(td_f32_to_f16(f16_to_f32((uint16_t)h)) == h, "0x%04x", h);
    }
    ck_assert_uint_eq(td_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(td_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(td_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(td_f32_to_f16(0.1f), 0x2e66);
    ck_assert_uint_eq(td_f32_to_f16(0x1p-24f), 0x0001);
    ck_assert_uint_eq(td_f32_to_f16(-0.0f), 0x8000);
}
END_TEST

START_TEST(test_f32_to_f16_rounding)
{
    /* Halfway cases round to even. 1 + 2^-11 is halfway between 1.0 (0x3c00,
     * even) and 1 + 2^-10 (0x3c01): goes down. 1 + 3*2^-11 is halfway
     * between 0x3c01 and 0x3c02: goes up to the even 0x3c02. */
    ck_assert_uint_eq(td_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    ck_assert_uint_eq(td_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    /* Just above and below a halfway point go to the nearest. */
    ck_assert_uint_eq(td_f32_to_f16(nextafterf(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
    ck_assert_uint_eq(td_f32_to_f16(nextafterf(1.0f + 3 * 0x1p-11f, 0.0f)), 0x3c01);
    /* Rounding up carries into the exponent: 2 - 2^-12 -> 2.0. */
    ck_assert_uint_eq(td_f32_to_f16(2.0f - 0x1p-12f), 0x4000);
    /* Overflow: 65519 rounds to 65504, 65520 (halfway, odd below) to inf. */
    ck_assert_uint_eq(td_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(td_f32_to_f16(65520.0f), 0x7c00);
    ck_assert_uint_eq(td_f32_to_f16(-1e10f), 0xfc00);
    ck_assert_uint_eq(td_f32_to_f16(INFINITY), 0x7c00);
    ck_assert_uint_eq(td_f32_to_f16(-INFINITY), 0xfc00);
    /* Subnormals: 2^-25 is halfway between 0 and 2^-24 -> 0 (even);
     * 3*2^-25 is halfway between 0x0001 and 0x0002 -> 0x0002;
     * just above 2^-25 -> 0x0001; largest subnormal + half ulp -> 2^-14. */
    ck_assert_uint_eq(td_f32_to_f16(0x1p-25f), 0x0000);
    ck_assert_uint_eq(td_f32_to_f16(-0x1p-25f), 0x8000);
    ck_assert_uint_eq(td_f32_to_f16(nextafterf(0x1p-25f, 1.0f)), 0x0001);
    ck_assert_uint_eq(td_f32_to_f16(3 * 0x1p-25f), 0x0002);
    ck_assert_uint_eq(td_f32_to_f16(1023 * 0x1p-24f + 0x1p-25f), 0x0400);
    ck_assert_uint_eq(td_f32_to_f16(1e-30f), 0x0000);
    /* NaN stays NaN, with its sign. */
    uint16_t n = td_f32_to_f16(NAN);
    ck_assert((n & 0x7c00u) == 0x7c00u && (n & 0x3ffu) != 0);
    n = td_f32_to_f16(bits_f32(0xff800001u)); /* payload only in low bits */
    ck_assert((n & 0xfc00u) == 0xfc00u && (n & 0x3ffu) != 0);

    /* Every midpoint between consecutive finite positive f16 values (exact
     * in f32) rounds to the even neighbour; one f32 ulp either side rounds
     * to the nearer one. */
    for (uint32_t h = 0; h < 0x7bffu; h++) {
        float lo = f16_to_f32((uint16_t)h), hi = f16_to_f32((uint16_t)(h + 1));
        float mid = lo + (hi - lo) / 2;
        ck_assert(f32_bits(mid) != f32_bits(lo) && f32_bits(mid) != f32_bits(hi));
        uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
        ck_assert_msg(td_f32_to_f16(mid) == even, "mid of 0x%04x", h);
        ck_assert_msg(td_f32_to_f16(-mid) == (even | 0x8000u), "-mid of 0x%04x", h);
        ck_assert_msg(td_f32_to_f16(nextafterf(mid, 0.0f)) == h, "below mid of 0x%04x", h);
        ck_assert_msg(td_f32_to_f16(nextafterf(mid, INFINITY)) == h + 1, "above mid 0x%04x", h);
    }
}
END_TEST

static Suite *safetensors_suite(void)
{
    Suite *s = suite_create("safetensors");

    TCase *tc = tcase_create("invalid");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_file_too_short);
    tcase_add_test(tc, test_changed_while_read);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_header_past_eof);
    tcase_add_test(tc, test_header_over_cap);
    tcase_add_test(tc, test_header_not_json);
    tcase_add_test(tc, test_header_not_object);
    tcase_add_test(tc, test_duplicate_key);
    tcase_add_test(tc, test_metadata_not_object);
    tcase_add_test(tc, test_empty_name);
    tcase_add_test(tc, test_entry_not_object);
    tcase_add_test(tc, test_unknown_dtype);
    tcase_add_test(tc, test_missing_keys);
    tcase_add_test(tc, test_extra_key);
    tcase_add_test(tc, test_shape_negative);
    tcase_add_test(tc, test_shape_not_integer);
    tcase_add_test(tc, test_rank_too_large);
    tcase_add_test(tc, test_shape_overflow);
    tcase_add_test(tc, test_offsets_wrong_length);
    tcase_add_test(tc, test_begin_after_end);
    tcase_add_test(tc, test_size_mismatch);
    tcase_add_test(tc, test_end_past_buffer);
    tcase_add_test(tc, test_gap);
    tcase_add_test(tc, test_overlap);
    tcase_add_test(tc, test_trailing_bytes);
    suite_add_tcase(s, tc);

    tc = tcase_create("valid");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_valid_file);
    tcase_add_test(tc, test_zero_tensors);
    tcase_add_test(tc, test_zero_element_tensor);
    tcase_add_test(tc, test_close_zeroed_and_null);
    suite_add_tcase(s, tc);

    tc = tcase_create("convert");
    tcase_add_test(tc, test_dtype_helpers);
    tcase_add_test(tc, test_f16_to_f32_exhaustive);
    tcase_add_test(tc, test_f32_to_f16_round_trip);
    tcase_add_test(tc, test_f32_to_f16_rounding);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(safetensors_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
