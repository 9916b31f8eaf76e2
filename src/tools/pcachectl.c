/*
 * pcachectl - calls one pcached management command over JSON-RPC and
 * prints the JSON answer (docs/pcached.md, "pcachectl").
 *
 *   pcachectl [-s SOCKET | [-H HOST] -p PORT] METHOD [ARG | NAME=VALUE]...
 *
 * Arguments are positional unless written NAME=VALUE (NAME an identifier),
 * as on an OpenSIPS MI command line; one call uses one style (JSON-RPC
 * params are an array or an object). The result goes to stdout and the exit
 * status is 0; a JSON-RPC error goes to stderr with status 1; a transport
 * failure with status 2. Without -s / -p (nor PCACHECTL_SOCKET /
 * PCACHECTL_PORT) it calls the unix socket of the installed pcached.conf.
 * On a terminal the result is indented; elsewhere (a pipe, a file) it is
 * the server's one line, for scripts.
 *
 *   pcachectl help [METHOD]
 *
 * calls the door's help method and prints its list as text: the methods and
 * their parameters come from the server's tables, never from a copy here.
 * Depends on libc, jansson (to read help's answer) and libpcache for its
 * version only.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pcache.h" /* pcache_version(): the project's one version */

/* The unix_socket of the installed pcached.conf (src/server/pcached.conf),
 * the target when neither -s / -p nor the environment names one. */
#define PCACHECTL_DEFAULT_SOCKET "/run/pcache/pcached.sock"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pcachectl [-s SOCKET | [-H HOST] -p PORT] METHOD [ARG | NAME=VALUE]...\n"
            "Calls one pcached management command over JSON-RPC and prints its result.\n"
            "  -s, --socket SOCKET  pcached's unix_socket (default " PCACHECTL_DEFAULT_SOCKET ")\n"
            "  -H, --host HOST      IPv4 address of pcached's http_bind (default 127.0.0.1)\n"
            "  -p, --port PORT      pcached's http_port (1-65535): JSON-RPC over TCP\n"
            "  -h, --help           this text\n"
            "  -V, --version        the version\n"
            "pcachectl help [METHOD] lists the methods pcached serves and their parameters.\n"
            "environment: PCACHECTL_SOCKET, PCACHECTL_PORT (the default target),\n"
            "  PCACHECTL_PASSWORD (management_password, for the TCP door)\n"
            "e.g. pcachectl perf_stats default\n"
            "     pcachectl -s " PCACHECTL_DEFAULT_SOCKET " perf_stats default\n"
            "     pcachectl -p 8380 perf_keys glob='session-*' limit=50\n"
            "exit status: 0 result, 1 JSON-RPC error (on stderr), 2 usage or transport error\n");
}

/* A TCP port, strictly: decimal digits only, 1..65535; -1 otherwise. */
static int parse_port(const char *s)
{
    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v == 0 || v > 65535)
        return -1;
    return (int)v;
}

/* The value of option argv[*i] (-x VALUE, --long VALUE or --long=VALUE);
 * NULL when a is not that option. Exits 2 when the value is missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *shrt, const char *lng)
{
    const char *a = argv[*i];
    size_t ll = strlen(lng);
    if (strncmp(a, lng, ll) == 0 && a[ll] == '=')
        return a + ll + 1;
    if (strcmp(a, shrt) != 0 && strcmp(a, lng) != 0)
        return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "pcachectl: %s needs a value (pcachectl --help)\n", a);
        exit(2);
    }
    return argv[++*i];
}

/* Appends s as a JSON string: bytes >= 0x80 and control bytes as \u00XX,
 * which pcached maps back to the same single byte. */
static int json_str(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*cap - *len < n * 6 + 3) {
        size_t nc = (*cap + n * 6 + 3) * 2;
        char *p = realloc(*buf, nc);
        if (p == NULL)
            return -1;
        *buf = p;
        *cap = nc;
    }
    char *o = *buf + *len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            o += sprintf(o, "\\u%04x", c);
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    *len = (size_t)(o - *buf);
    return 0;
}

static int named(const char *a, size_t *nlen)
{
    if (!(isalpha((unsigned char)a[0]) || a[0] == '_'))
        return 0;
    size_t i = 1;
    while (isalnum((unsigned char)a[i]) || a[i] == '_')
        i++;
    if (a[i] != '=')
        return 0;
    *nlen = i;
    return 1;
}

/* Writes the JSON text j (n bytes, as the server wrote it) indented by two
 * spaces a level, copying every token verbatim: numbers are never
 * re-encoded (a parse and dump would print a double's shortest digits as
 * 17, and a uint64 counter past INT64_MAX would not load) and strings keep
 * their escapes. Empty containers stay "{}" / "[]". */
static void print_indented(const char *j, size_t n)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = j[i];
        if (in_str) {
            putchar(c);
            if (c == '\\' && i + 1 < n)
                putchar(j[++i]);
            else if (c == '"')
                in_str = 0;
            continue;
        }
        switch (c) {
        case '"':
            in_str = 1;
            putchar(c);
            break;
        case '{':
        case '[':
            putchar(c);
            if (i + 1 < n && (j[i + 1] == '}' || j[i + 1] == ']')) {
                putchar(j[++i]);
                break;
            }
            printf("\n%*s", 2 * ++depth, "");
            break;
        case '}':
        case ']':
            depth -= depth > 0;
            printf("\n%*s%c", 2 * depth, "", c);
            break;
        case ',':
            printf(",\n%*s", 2 * depth, "");
            break;
        case ':':
            fputs(": ", stdout);
            break;
        case ' ':
        case '\t':
        case '\r':
        case '\n':
            break;
        default:
            putchar(c);
        }
    }
    putchar('\n');
}

/* "perf_keys glob [collection] [limit]" from a help entry. */
static void help_usage(json_t *m)
{
    printf("%s", json_string_value(json_object_get(m, "method")));
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(m, "params"), i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        printf(json_is_true(json_object_get(p, "required")) ? " %s" : " [%s]", name);
    }
    putchar('\n');
}

/* One parameter of a help entry: name, type, range, default, help. */
static void help_param(json_t *p)
{
    printf("    %-12s %s", json_string_value(json_object_get(p, "name")),
           json_string_value(json_object_get(p, "type")));
    json_t *min = json_object_get(p, "min"), *max = json_object_get(p, "max");
    if (json_is_integer(min) && json_is_integer(max))
        printf(" %" JSON_INTEGER_FORMAT "-%" JSON_INTEGER_FORMAT, json_integer_value(min),
               json_integer_value(max));
    else if (json_is_integer(max))
        printf(", at most %" JSON_INTEGER_FORMAT "%s", json_integer_value(max),
               strcmp(json_string_value(json_object_get(p, "type")), "string") == 0 ? " bytes"
                                                                                    : "");
    if (json_is_true(json_object_get(p, "required")))
        printf(", required");
    else if (json_is_string(json_object_get(p, "default")))
        printf(", default %s", json_string_value(json_object_get(p, "default")));
    const char *h = json_string_value(json_object_get(p, "help"));
    printf("%s%s\n", h != NULL ? ": " : "", h != NULL ? h : "");
}

/* The answer of the door's help method (res: n bytes of JSON) as text:
 * one usage line and summary per method, and with one method asked, its
 * parameters. 0, or 2 when the answer is not help's shape. */
static int print_help(const char *res, size_t n, int one)
{
    json_error_t jerr;
    json_t *doc = json_loadb(res, n, 0, &jerr);
    json_t *ms = json_object_get(doc, "methods");
    if (!json_is_array(ms)) {
        fprintf(stderr, "pcachectl: help: the answer is not a method list: %.200s\n", res);
        json_decref(doc);
        return 2;
    }
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m)
    {
        if (!json_is_string(json_object_get(m, "method")))
            continue;
        help_usage(m);
        printf("    %s\n", json_string_value(json_object_get(m, "summary")));
        if (!one)
            continue;
        json_t *ps = json_object_get(m, "params");
        if (json_array_size(ps) > 0)
            printf("parameters (positional in this order, or NAME=VALUE):\n");
        size_t k;
        json_t *p;
        json_array_foreach(ps, k, p) help_param(p);
    }
    if (!one)
        printf("pcachectl help METHOD: its parameters\n");
    json_decref(doc);
    return 0;
}

/* The request and the answer: freed at exit, whichever return is taken. */
static char *body, *resp;

static void free_buffers(void)
{
    free(body);
    free(resp);
}

/* Where the request goes: a unix socket, or host:port over TCP. */
struct ctl_target {
    const char *sock, *host;
    int port;
    int default_target; /* neither -s nor -p nor the environment named one */
};

/* The environment, then the options before METHOD, into *t; *next is the
 * index of METHOD. -1 to go on, else the exit status (--help, --version,
 * a usage error). */
static int parse_args(int argc, char **argv, struct ctl_target *t, int *next)
{
    const char *sock = getenv("PCACHECTL_SOCKET"), *opt;
    const char *penv = getenv("PCACHECTL_PORT");
    int port = 0;
    t->host = "127.0.0.1";
    if (sock != NULL && sock[0] == '\0')
        sock = NULL;
    if (penv != NULL && penv[0] != '\0') {
        if ((port = parse_port(penv)) < 0) {
            fprintf(stderr, "pcachectl: PCACHECTL_PORT: '%.100s' is not a port (1-65535)\n", penv);
            return 2;
        }
        if (sock != NULL) {
            fprintf(stderr, "pcachectl: PCACHECTL_SOCKET and PCACHECTL_PORT are both set: "
                            "unset one\n");
            return 2;
        }
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "-V") == 0 || strcmp(argv[i], "--version") == 0) {
            printf("pcachectl %s\n", pcache_version());
            return 0;
        } else if ((opt = opt_value(argc, argv, &i, "-s", "--socket")) != NULL) {
            sock = opt, port = 0;
        } else if ((opt = opt_value(argc, argv, &i, "-H", "--host")) != NULL) {
            t->host = opt;
        } else if ((opt = opt_value(argc, argv, &i, "-p", "--port")) != NULL) {
            if ((port = parse_port(opt)) < 0) {
                fprintf(stderr, "pcachectl: -p: '%.100s' is not a port (1-65535)\n", opt);
                return 2;
            }
            sock = NULL;
        } else {
            fprintf(stderr, "pcachectl: unknown option '%.100s' (pcachectl --help)\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "pcachectl: no METHOD given (pcachectl --help; e.g. pcachectl "
                        "perf_stats default)\n");
        return 2;
    }
    t->default_target = sock == NULL && port == 0;
    t->sock = t->default_target ? PCACHECTL_DEFAULT_SOCKET : sock;
    t->port = port;
    *next = i;
    return -1;
}

/* Room for 32 more bytes in body. */
static int body_room(size_t len, size_t *cap)
{
    if (*cap - len >= 32)
        return 0;
    char *nb = realloc(body, *cap *= 2);
    if (nb == NULL)
        return -1;
    body = nb;
    return 0;
}

/* The JSON-RPC request for method with the arguments argv[first..argc)
 * (all positional or all NAME=VALUE) into body, *len its length. 0, or
 * the exit status 2. */
static int build_body(const char *method, int argc, char **argv, int first, size_t *lenp)
{
    int nnamed = 0, npos = 0;
    for (int k = first; k < argc; k++) {
        size_t nl;
        if (named(argv[k], &nl))
            nnamed++;
        else
            npos++;
    }
    if (nnamed && npos) {
        fprintf(stderr, "pcachectl: use either positional arguments or NAME=VALUE ones, not "
                        "both\n");
        return 2;
    }
    size_t cap = 256, len = 0;
    body = malloc(cap);
    if (body == NULL)
        return 2;
    len = (size_t)snprintf(body, cap, "{\"jsonrpc\":\"2.0\",\"method\":");
    if (json_str(&body, &len, &cap, method, strlen(method)) != 0)
        return 2;
    const char *pre = nnamed ? ",\"params\":{" : ",\"params\":[";
    if (body_room(len, &cap) != 0)
        return 2;
    len += (size_t)sprintf(body + len, "%s", pre);
    for (int k = first; k < argc; k++) {
        size_t nl = 0;
        if (k > first)
            body[len++] = ',';
        if (nnamed) {
            named(argv[k], &nl);
            if (json_str(&body, &len, &cap, argv[k], nl) != 0)
                return 2;
            body[len++] = ':';
            const char *v = argv[k] + nl + 1;
            if (json_str(&body, &len, &cap, v, strlen(v)) != 0)
                return 2;
        } else if (json_str(&body, &len, &cap, argv[k], strlen(argv[k])) != 0) {
            return 2;
        }
    }
    if (body_room(len, &cap) != 0)
        return 2;
    len += (size_t)sprintf(body + len, "%c,\"id\":1}", nnamed ? '}' : ']');
    *lenp = len;
    return 0;
}

/* A connected socket to the target, or -1 (said on stderr). */
static int connect_target(const struct ctl_target *t)
{
    int fd;
    if (t->sock != NULL) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(t->sock) >= sizeof sa.sun_path) {
            fprintf(stderr, "pcachectl: %.100s...: socket path longer than %zu bytes\n", t->sock,
                    sizeof sa.sun_path - 1);
            return -1;
        }
        strcpy(sa.sun_path, t->sock);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            fprintf(stderr, "pcachectl: %s: %s%s\n", t->sock, strerror(errno),
                    t->default_target ? " (the default socket: is pcached running with this "
                                        "unix_socket? otherwise give -s SOCKET or -p PORT)"
                                      : "");
            return -1;
        }
        return fd;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->port)};
    if (inet_pton(AF_INET, t->host, &sa.sin_addr) != 1) {
        fprintf(stderr, "pcachectl: %s: not an IPv4 address\n", t->host);
        return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "pcachectl: %s:%d: %s\n", t->host, t->port, strerror(errno));
        return -1;
    }
    return fd;
}

/* Sends body (len bytes) as an HTTP POST on fd and reads the whole answer
 * into resp (NUL-terminated). 0, or the exit status 2. */
static int exchange(int fd, size_t len)
{
    /* the management password (pcached's management_password or
     * requirepass) for the TCP door, from the environment: never argv,
     * which ps shows */
    const char *pw = getenv("PCACHECTL_PASSWORD");
    if (pw != NULL && (strlen(pw) > 255 || strpbrk(pw, "\r\n") != NULL)) {
        fprintf(stderr, "pcachectl: PCACHECTL_PASSWORD: at most 255 bytes, no line breaks\n");
        return 2;
    }
    char hdr[640];
    int hn = snprintf(hdr, sizeof hdr,
                      "POST /mi HTTP/1.1\r\nHost: pcached\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n%s%s%sConnection: close\r\n\r\n",
                      len, pw != NULL && pw[0] ? "Authorization: Bearer " : "",
                      pw != NULL && pw[0] ? pw : "", pw != NULL && pw[0] ? "\r\n" : "");
    if (write(fd, hdr, (size_t)hn) != hn || write(fd, body, len) != (ssize_t)len) {
        fprintf(stderr, "pcachectl: write: %s\n", strerror(errno));
        return 2;
    }
    size_t rcap = 65536, rlen = 0;
    resp = malloc(rcap + 1);
    for (;;) {
        if (resp == NULL)
            return 2;
        if (rlen == rcap) {
            char *p = realloc(resp, (rcap *= 2) + 1);
            if (p == NULL)
                return 2;
            resp = p;
        }
        ssize_t r = read(fd, resp + rlen, rcap - rlen);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        rlen += (size_t)r;
    }
    resp[rlen] = '\0';
    return 0;
}

/* The answer in resp: its result on stdout (help as text, indented on a
 * terminal) and 0, or the error on stderr and 1; 2 when it is not HTTP. */
static int print_answer(const char *method, int with_args)
{
    char *b = strstr(resp, "\r\n\r\n");
    if (b == NULL) {
        fprintf(stderr, "pcachectl: no HTTP answer\n");
        return 2;
    }
    b += 4;
    /* the answer's result or error member, as the server wrote it */
    const char *res = strstr(b, "\"result\":");
    const char *er = strstr(b, "\"error\":");
    if (res != NULL && (er == NULL || res < er) &&
        strncmp(b, "{\"jsonrpc\":\"2.0\",\"result\":", 26) == 0) {
        const char *end = strrchr(b, ',');
        const char *idp = strstr(b, ",\"id\":");
        while (idp != NULL && strstr(idp + 1, ",\"id\":") != NULL)
            idp = strstr(idp + 1, ",\"id\":");
        if (idp != NULL)
            end = idp;
        size_t rn = (size_t)(end - (b + 26));
        if (strcmp(method, "help") == 0)
            return print_help(b + 26, rn, with_args);
        if (isatty(STDOUT_FILENO))
            print_indented(b + 26, rn);
        else
            printf("%.*s\n", (int)rn, b + 26);
        return 0;
    }
    fprintf(stderr, "%s\n", b);
    return 1;
}

int main(int argc, char **argv)
{
    atexit(free_buffers);
    struct ctl_target t;
    int i = 0;
    int rc = parse_args(argc, argv, &t, &i);
    if (rc >= 0)
        return rc;
    const char *method = argv[i++];
    size_t len = 0;
    if ((rc = build_body(method, argc, argv, i, &len)) != 0)
        return rc;
    int fd = connect_target(&t);
    if (fd < 0)
        return 2;
    rc = exchange(fd, len);
    if (rc != 0)
        return rc; /* the process ends: fd goes with it */
    close(fd);
    return print_answer(method, argc > i);
}
