/*
 * device.c - the device registry and the resolver of device names.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

#define TD_MAX_FAMILIES 8

/* Written only inside register_once (pthread_once), read-only afterwards. */
static const td_device_family *g_families[TD_MAX_FAMILIES];
static int g_n_families;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void register_once(void)
{
    td_backends_register_all();
}

int td_device_register(const td_device_family *f)
{
    if (!f || !f->name || !f->create || !f->count || g_n_families == TD_MAX_FAMILIES)
        return -1;
    for (int i = 0; i < g_n_families; i++)
        if (strcmp(g_families[i]->name, f->name) == 0)
            return -1;
    g_families[g_n_families++] = f;
    return 0;
}

const char *td_device_kind_name(td_device_kind kind)
{
    switch (kind) {
    case TD_DEVICE_CPU:
        return "cpu";
    case TD_DEVICE_CUDA:
        return "cuda";
    }
    return "unknown";
}

void td_device_available(char *buf, size_t len)
{
    pthread_once(&g_once, register_once);
    size_t at = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < g_n_families && at < len; i++) {
        int k = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", g_families[i]->name);
        if (k < 0)
            break;
        at += (size_t)k;
    }
}

/* "NAME" or "NAME:N" -> the name's length and the index (0 when absent).
 * Returns 0, or -1 when the index is not a number in 0..1023. */
static int split_name(const char *text, size_t *name_len, int *index)
{
    const char *colon = strchr(text, ':');
    *index = 0;
    if (!colon) {
        *name_len = strlen(text);
        return 0;
    }
    *name_len = (size_t)(colon - text);
    char *end = NULL;
    long v = colon[1] >= '0' && colon[1] <= '9' ? strtol(colon + 1, &end, 10) : -1;
    if (v < 0 || v > 1023 || !end || *end)
        return -1;
    *index = (int)v;
    return 0;
}

int td_device_resolve(const char *text, td_device *out, char *err, size_t errlen)
{
    pthread_once(&g_once, register_once);
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        text = "cpu";
    char have[128];
    td_device_available(have, sizeof have);
    size_t name_len = 0;
    int index = 0;
    int bad_index = split_name(text, &name_len, &index) != 0;
    const td_device_family *f = NULL;
    for (int i = 0; i < g_n_families && !f; i++)
        if (strlen(g_families[i]->name) == name_len &&
            strncmp(g_families[i]->name, text, name_len) == 0)
            f = g_families[i];
    if (!f) {
        /* A kind we know of but did not build, or no such thing at all. */
        for (int k = TD_DEVICE_CPU; k <= TD_DEVICE_CUDA; k++) {
            const char *kn = td_device_kind_name((td_device_kind)k);
            if (strlen(kn) == name_len && strncmp(kn, text, name_len) == 0) {
                if (bad_index) {
                    snprintf(err, errlen, "device '%s': expected %s or %s:N with N a device "
                             "index", text, kn, kn);
                    return -1;
                }
                snprintf(err, errlen, "device '%s': this build has no %s backend (this build "
                         "has: %s); use --device cpu", text, k == TD_DEVICE_CUDA ? "CUDA" : kn,
                         have);
                return -1;
            }
        }
        snprintf(err, errlen, "device '%s': unknown device (expected cpu or cuda[:N]; this "
                 "build has: %s)", text, have);
        return -1;
    }
    if (bad_index) {
        snprintf(err, errlen, "device '%s': expected %s or %s:N with N a device index", text,
                 f->name, f->name);
        return -1;
    }
    char why[256] = "no device found";
    int count = f->count(why, sizeof why);
    if (count <= 0) {
        snprintf(err, errlen, "device '%s': no usable %s device (%s); use --device cpu", text,
                 f->kind == TD_DEVICE_CUDA ? "CUDA" : f->name, why);
        return -1;
    }
    if (index >= count) {
        snprintf(err, errlen, "device '%s' does not exist (%d %s device%s: %s:0..%s:%d); or use "
                 "--device cpu", text, count, f->name, count == 1 ? "" : "s", f->name, f->name,
                 count - 1);
        return -1;
    }
    if (index == 0)
        snprintf(out->name, sizeof out->name, "%s", f->name);
    else
        snprintf(out->name, sizeof out->name, "%s:%d", f->name, index);
    out->kind = f->kind;
    out->index = index;
    out->create = f->create;
    return 0;
}
