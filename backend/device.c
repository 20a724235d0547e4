/*
 * device.c - the device registry and the resolver of device names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

#define TD_MAX_FAMILIES 8

/* Written by td_device_register at start-up (runtime/backends_all.c, before
 * main), read-only afterwards. */
static const td_device_family *g_families[TD_MAX_FAMILIES];
static int g_n_families;

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

/* The one parser of device names: "KIND" or "KIND:N" with KIND a kind this
 * program knows (built or not) and N in 0..1023. Returns 0, -1 for a
 * malformed index (*kind set), -2 for an unknown name. */
static int parse_name(const char *text, td_device_kind *kind, int *index)
{
    const char *colon = strchr(text, ':');
    size_t name_len = colon ? (size_t)(colon - text) : strlen(text);
    int found = 0;
    for (int k = TD_DEVICE_CPU; k <= TD_DEVICE_CUDA && !found; k++) {
        const char *kn = td_device_kind_name((td_device_kind)k);
        if (strlen(kn) == name_len && strncmp(kn, text, name_len) == 0) {
            *kind = (td_device_kind)k;
            found = 1;
        }
    }
    if (!found)
        return -2;
    *index = 0;
    if (!colon)
        return 0;
    char *end = NULL;
    long v = colon[1] >= '0' && colon[1] <= '9' ? strtol(colon + 1, &end, 10) : -1;
    if (v < 0 || v > 1023 || !end || *end)
        return -1;
    *index = (int)v;
    return 0;
}

static void bad_index_msg(const char *text, td_device_kind kind, char *err, size_t errlen)
{
    const char *kn = td_device_kind_name(kind);
    snprintf(err, errlen, "device '%s': expected %s or %s:N with N a device index", text, kn, kn);
}

int td_device_parse(const char *text, td_device_kind *kind, int *index, char *err, size_t errlen)
{
    if (!text || !*text)
        text = "cpu";
    int rc = parse_name(text, kind, index);
    if (rc == -2)
        snprintf(err, errlen, "device '%s': unknown device (expected cpu or cuda[:N])", text);
    else if (rc == -1)
        bad_index_msg(text, *kind, err, errlen);
    return rc ? -1 : 0;
}

int td_device_resolve(const char *text, td_device *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        text = "cpu";
    char have[128];
    td_device_available(have, sizeof have);
    td_device_kind kind = TD_DEVICE_CPU;
    int index = 0;
    int rc = parse_name(text, &kind, &index);
    if (rc == -2) {
        snprintf(err, errlen, "device '%s': unknown device (expected cpu or cuda[:N]; this "
                 "build has: %s)", text, g_n_families ? have : "no backend");
        return -1;
    }
    if (rc == -1) {
        bad_index_msg(text, kind, err, errlen);
        return -1;
    }
    const td_device_family *f = NULL;
    for (int i = 0; i < g_n_families && !f; i++)
        if (g_families[i]->kind == kind)
            f = g_families[i];
    if (!f) {
        snprintf(err, errlen, "device '%s': this build has no %s backend (this build has: %s); "
                 "use --device cpu", text, kind == TD_DEVICE_CUDA ? "CUDA" : "cpu",
                 g_n_families ? have : "no backend, link runtime/backends_all.c");
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
