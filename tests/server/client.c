/*
 * client.c - see client.h.
 */
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tc_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void tc_resp_free(tc_resp *r)
{
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

int tc_io_timeout_s = 60; /* no exchange in most tests takes a minute */

int tc_slowness(void)
{
    int build = 1;
#if defined(__SANITIZE_THREAD__)
    build = 5;
#elif defined(__SANITIZE_ADDRESS__)
    build = 3;
#endif
    double load = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    int got = f && fscanf(f, "%lf", &load) == 1;
    if (f)
        fclose(f);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double per_core = got && cpus > 0 ? load / (double)cpus : 1.0;
    int k = build * (per_core > 1.0 ? (int)per_core + 1 : 1);
    return k > 20 ? 20 : k;
}

int tc_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {(time_t)tc_io_timeout_s * tc_slowness(), 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static const char *find_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return hay;
    return NULL;
}

/* Reads one response: headers, then Content-Length bytes (or to EOF). */
static int read_resp(int fd, tc_resp *out)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    char *hend = NULL;
    long clen = -1;
    if (!buf)
        return -1;
    for (;;) {
        if (hend) {
            size_t hlen = (size_t)(hend - buf) + 4;
            if (clen >= 0 && n >= hlen + (size_t)clen)
                break;
        }
        if (n + 4096 > cap) {
            cap *= 2;
            char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                return -1;
            }
            buf = p;
            if (hend)
                hend = NULL; /* recomputed below */
        }
        ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
        buf[n] = 0;
        if (!hend) {
            hend = strstr(buf, "\r\n\r\n");
            if (hend) {
                const char *cl = find_ci(buf, "\r\nContent-Length:");
                if (cl && cl < hend)
                    clen = strtol(cl + 17, NULL, 10);
            }
        }
    }
    buf[n] = 0;
    hend = strstr(buf, "\r\n\r\n");
    if (!hend || sscanf(buf, "HTTP/1.%*d %d", &out->status) != 1) {
        free(buf);
        out->status = 0;
        return -1;
    }
    size_t hlen = (size_t)(hend - buf);
    out->headers = strndup(buf, hlen);
    size_t blen = n - hlen - 4;
    if (clen >= 0 && (size_t)clen < blen)
        blen = (size_t)clen;
    out->body = malloc(blen + 1);
    memcpy(out->body, hend + 4, blen);
    out->body[blen] = 0;
    out->body_len = blen;
    free(buf);
    return 0;
}

int tc_request(int port, const char *method, const char *path, const char *extra_headers,
               const char *body, size_t body_len, tc_resp *out)
{
    memset(out, 0, sizeof *out);
    int fd = tc_connect(port);
    if (fd < 0)
        return -1;
    char head[2048];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, extra_headers ? extra_headers : "", body ? body_len : 0);
    int rc = send_all(fd, head, (size_t)hl);
    if (rc == 0 && body && body_len)
        send_all(fd, body, body_len); /* a server may answer (413) and close early */
    if (rc == 0)
        rc = read_resp(fd, out);
    close(fd);
    return rc;
}

int tc_post_json(int port, const char *path, const char *json, tc_resp *out)
{
    return tc_request(port, "POST", path, "Content-Type: application/json\r\n", json,
                      strlen(json), out);
}

int tc_request_on(int fd, const char *method, const char *path, tc_resp *out)
{
    memset(out, 0, sizeof *out);
    char head[1024];
    int hl = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", method,
                      path);
    if (send_all(fd, head, (size_t)hl) != 0)
        return -1;
    return read_resp(fd, out);
}

int tc_read_on(int fd, tc_resp *out)
{
    memset(out, 0, sizeof *out);
    return read_resp(fd, out);
}

const char *tc_header(const tc_resp *r, const char *name, char *buf, size_t n)
{
    if (!r->headers)
        return NULL;
    size_t nl = strlen(name);
    for (const char *p = strstr(r->headers, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
        const char *h = p + 2;
        if (!strncasecmp(h, name, nl) && h[nl] == ':') {
            h += nl + 1;
            while (*h == ' ')
                h++;
            size_t k = strcspn(h, "\r\n");
            if (k >= n)
                k = n - 1;
            memcpy(buf, h, k);
            buf[k] = 0;
            return buf;
        }
    }
    return NULL;
}

pid_t tc_daemon_spawn(const char *daemon, const char *const *args, const char *log_path)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = daemon;
    argv[n++] = "serve";
    argv[n++] = "--host";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--port";
    argv[n++] = "0";
    for (int i = 0; args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    /* Truncated here, not only in the child: otherwise a caller reading
     * the log may find an old log's "ready" line before the child started. */
    int lfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (lfd >= 0)
        close(lfd);
    /* The daemon's default deadline scaled to this build and load (a flag
     * or the caller's environment wins): its environment made before the
     * fork (the child only execs). */
    extern char **environ;
    static const char key[] = "TRANSFORMERD_REQUEST_TIMEOUT_S=";
    char deadline[64];
    snprintf(deadline, sizeof deadline, "%s%d", key, 60 * tc_slowness());
    size_t ne = 0;
    int have = 0;
    for (; environ[ne]; ne++)
        have |= !strncmp(environ[ne], key, sizeof key - 1);
    char **envp = calloc(ne + 2, sizeof *envp);
    if (!envp)
        return -1;
    memcpy(envp, environ, ne * sizeof *envp);
    if (!have)
        envp[ne] = deadline;
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0) {
        free(envp);
        return -1;
    }
    if (p == 0) {
        /* The daemon dies with the test: when ctest or libcheck kills the
         * test on a timeout (SIGKILL, no clean-up runs), the kernel kills
         * the daemon too, so no daemon outlives its test. The parent may
         * already be gone before the request is made: then exit. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            /* stdout too: a caller's pipe must not stay open in the daemon */
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execve(daemon, (char *const *)argv, envp);
        _exit(127);
    }
    free(envp);
    return p;
}

int tc_daemon_start(const char *daemon, const char *const *args, const char *log_path,
                    double timeout_s, pid_t *pid)
{
    pid_t p = tc_daemon_spawn(daemon, args, log_path);
    if (p < 0)
        return -1;
    *pid = p;
    double until = tc_now() + timeout_s;
    int port = -1;
    while (tc_now() < until) {
        FILE *f = fopen(log_path, "r");
        char line[1024];
        int ready = 0;
        while (f && fgets(line, sizeof line, f)) {
            const char *q = strstr(line, "listening on http://127.0.0.1:");
            if (q)
                port = atoi(q + strlen("listening on http://127.0.0.1:"));
            if (strstr(line, "transformerd: ready"))
                ready = 1;
        }
        if (f)
            fclose(f);
        if (ready && port > 0)
            return port;
        int st;
        if (waitpid(p, &st, WNOHANG) == p) {
            *pid = -1;
            return -1;
        }
        tc_sleep_ms(20);
    }
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    *pid = -1;
    return -1;
}

int tc_log_has(const char *log_path, const char *needle)
{
    FILE *f = fopen(log_path, "r");
    char line[2048];
    int hit = 0;
    while (f && !hit && fgets(line, sizeof line, f))
        hit = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return hit;
}

char *tc_metrics_text(int port)
{
    tc_resp r;
    if (tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r) != 0)
        return NULL;
    char *text = r.status == 200 ? r.body : NULL;
    if (text)
        r.body = NULL;
    tc_resp_free(&r);
    return text;
}

/* The next line of Prometheus text after line (NULL after the last). */
static const char *next_line(const char *line)
{
    const char *nl = strchr(line, '\n');
    return nl && nl[1] ? nl + 1 : NULL;
}

double tc_metric_in(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = next_line(p))
        if (!strncmp(p, series, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

double tc_metric_sum_in(const char *text, const char *name)
{
    size_t n = strlen(name);
    double sum = -1;
    for (const char *p = text; p && *p; p = next_line(p)) {
        if (strncmp(p, name, n) != 0 || (p[n] != ' ' && p[n] != '{'))
            continue;
        const char *v = p[n] == ' ' ? p + n : strstr(p + n, "} ");
        sum = (sum < 0 ? 0 : sum) + (v ? strtod(v + (*v == '}' ? 2 : 1), NULL) : 0);
    }
    return sum;
}

double tc_metric(int port, const char *series)
{
    char *text = tc_metrics_text(port);
    double v = text ? tc_metric_in(text, series) : -1;
    free(text);
    return v;
}

double tc_metric_sum(int port, const char *name)
{
    char *text = tc_metrics_text(port);
    double v = text ? tc_metric_sum_in(text, name) : -1;
    free(text);
    return v;
}

int tc_daemon_wait(pid_t pid, double timeout_s)
{
    double until = tc_now() + timeout_s;
    while (tc_now() < until) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (r < 0)
            return -1;
        tc_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int tc_daemon_start_model(const char *daemon, const char *model, const char *tmpdir,
                          const char *name, const char *const *args, pid_t *pid)
{
    char log[512];
    snprintf(log, sizeof log, "%s/%s.log", tmpdir, name);
    const char *a[48];
    int n = 0;
    a[n++] = "--model";
    a[n++] = model;
    a[n++] = "--threads";
    a[n++] = "1";
    for (int i = 0; args[i] && n < 47; i++)
        a[n++] = args[i];
    a[n] = NULL;
    return tc_daemon_start(daemon, a, log, 60, pid);
}

int tc_daemon_start_both(const char *daemon, const char *en_de, const char *tmpdir,
                         const char *name, const char *const *args, pid_t *pid)
{
    char a_de[4200], de_en[4200];
    snprintf(a_de, sizeof a_de, "en-de=%s", en_de);
    snprintf(de_en, sizeof de_en, "de-en=%s/../de-en", en_de);
    const char *a[48];
    int n = 0;
    a[n++] = "--model";
    a[n++] = de_en;
    for (int i = 0; args[i] && n < 47; i++)
        a[n++] = args[i];
    a[n] = NULL;
    return tc_daemon_start_model(daemon, a_de, tmpdir, name, a, pid);
}

size_t tc_multipart(char *out, size_t cap, const char *const *kv, int n, const char *fname,
                    const char *fdata, size_t flen)
{
    size_t k = 0;
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(out + k, cap - k,
                              "--" TC_BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\""
                              "\r\n\r\n%s\r\n",
                              kv[2 * i], kv[2 * i + 1]);
    if (fname) {
        k += (size_t)snprintf(out + k, cap - k,
                              "--" TC_BOUNDARY "\r\nContent-Disposition: form-data; name=\"file\"; "
                              "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                              fname);
        memcpy(out + k, fdata, flen);
        k += flen;
        k += (size_t)snprintf(out + k, cap - k, "\r\n");
    }
    k += (size_t)snprintf(out + k, cap - k, "--" TC_BOUNDARY "--\r\n");
    return k;
}
