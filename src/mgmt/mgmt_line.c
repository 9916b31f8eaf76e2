/*
 * mgmt_line.c - command lines: the text form of an invocation, as a CLI
 * reads it and as docs/management.md writes it:
 *     perf_keys "session-*" th limit=50
 * The grammar is in pcache_mgmt.h. It is a small shell-like tokenizer that
 * never allocates per word: the decoded bytes go into one buffer as long as
 * the line (decoding never grows text), and the arguments point into it.
 * A line comes from outside, so every malformed shape is an error with a
 * message giving its byte offset, never a guess.
 */
#include "mgmt_int.h"

#include <stdlib.h>
#include <string.h>

struct pc_mgmt_line {
    char *buf; /* decoded words, each NUL-terminated for convenience */
    const char *cmd;
    unsigned n;
    pc_mgmt_arg args[PC_MGMT_MAX_ARGS];
};

static bool pc_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Length of NAME in a NAME=... word starting at s, 0 if the word is not
 * of that form. */
static size_t pc_named(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                     (i > 0 && s[i] >= '0' && s[i] <= '9')))
        i++;
    return i > 0 && i < n && s[i] == '=' ? i : 0;
}

/* Decodes one value starting at line[*pos] into out (at *o). */
static int pc_value(const char *line, size_t len, size_t *pos, char *out, size_t *o,
                    pc_mgmt_err *err)
{
    size_t i = *pos;
    char quote = line[i];
    if (quote != '"' && quote != '\'') {
        for (; i < len && !pc_blank(line[i]); i++) {
            if (line[i] == '"' || line[i] == '\'')
                return pc_mgmt_errorf(err, PC_EINVAL,
                                      "command line: a quote inside an unquoted word at byte %zu "
                                      "(quote the whole word)",
                                      i + 1);
            out[(*o)++] = line[i];
        }
        *pos = i;
        return 0;
    }
    size_t start = i++;
    for (;;) {
        if (i >= len)
            return pc_mgmt_errorf(err, PC_EINVAL,
                                  "command line: unterminated %s quote opened at byte %zu",
                                  quote == '"' ? "double" : "single", start + 1);
        char c = line[i];
        if (c == quote) {
            i++;
            break;
        }
        if (c != '\\' || quote == '\'' || i + 1 >= len) {
            out[(*o)++] = c;
            i++;
            continue;
        }
        char e = line[i + 1];
        i += 2;
        switch (e) {
        case '"':
        case '\\':
            out[(*o)++] = e;
            break;
        case 'n':
            out[(*o)++] = '\n';
            break;
        case 'r':
            out[(*o)++] = '\r';
            break;
        case 't':
            out[(*o)++] = '\t';
            break;
        case '0':
            out[(*o)++] = '\0';
            break;
        case 'x': {
            int h = i + 1 < len ? pc_hex_val((unsigned char)line[i]) : -1;
            int l = h >= 0 ? pc_hex_val((unsigned char)line[i + 1]) : -1;
            if (l < 0)
                return pc_mgmt_errorf(err, PC_EINVAL,
                                      "command line: \\x at byte %zu needs two hex digits", i - 1);
            out[(*o)++] = (char)(h * 16 + l);
            i += 2;
            break;
        }
        default: /* kept: a glob's \* and \[ reach the glob */
            out[(*o)++] = '\\';
            out[(*o)++] = e;
        }
    }
    if (i < len && !pc_blank(line[i]))
        return pc_mgmt_errorf(err, PC_EINVAL,
                              "command line: text right after the closing quote at byte %zu "
                              "(leave a blank between arguments)",
                              i + 1);
    *pos = i;
    return 0;
}

int pc_mgmt_line_parse(const char *line, size_t len, pc_mgmt_line **out, pc_mgmt_err *err)
{
    if ((line == NULL && len > 0) || out == NULL)
        return pc_mgmt_errorf(err, PC_EINVAL, "command line: invalid arguments");
    pc_mgmt_line *l = calloc(1, sizeof *l);
    char *buf = malloc(len * 2 + 2); /* each word adds a NUL, a name's '=' becomes one */
    int rc = 0;
    if (l == NULL || buf == NULL) {
        rc = pc_mgmt_errorf(err, PC_EHEAP, "command line: out of memory");
        goto out;
    }
    l->buf = buf;
    size_t i = 0, o = 0;
    bool first = true;
    for (;;) {
        while (i < len && pc_blank(line[i]))
            i++;
        if (i >= len)
            break;
        if (first) {
            if (line[i] == '"' || line[i] == '\'' || pc_named(line + i, len - i) != 0) {
                rc = pc_mgmt_errorf(err, PC_EINVAL,
                                    "command line: the first word must be a command name");
                goto out;
            }
        } else if (l->n == PC_MGMT_MAX_ARGS) {
            rc = pc_mgmt_errorf(err, PC_EINVAL, "command line: more than %u arguments",
                                PC_MGMT_MAX_ARGS);
            goto out;
        }
        pc_mgmt_arg *a = first ? NULL : &l->args[l->n];
        size_t nl = first ? 0 : pc_named(line + i, len - i);
        if (nl > 0) {
            a->name = buf + o;
            a->nlen = nl;
            memcpy(buf + o, line + i, nl);
            o += nl;
            buf[o++] = '\0';
            i += nl + 1;
        }
        size_t vstart = o;
        if (i < len && !pc_blank(line[i]) && (rc = pc_value(line, len, &i, buf, &o, err)) != 0)
            goto out;
        buf[o++] = '\0';
        if (first)
            l->cmd = buf + vstart;
        else {
            a->val = buf + vstart;
            a->len = o - 1 - vstart;
            l->n++;
        }
        first = false;
    }
    if (first)
        rc = pc_mgmt_errorf(err, PC_EINVAL, "command line: empty (expected a command name)");
out:
    if (rc != 0) {
        pc_mgmt_line_free(l);
        if (l == NULL)
            free(buf);
        return rc;
    }
    *out = l;
    return 0;
}

const char *pc_mgmt_line_cmd(const pc_mgmt_line *l)
{
    return l->cmd;
}

unsigned pc_mgmt_line_args(const pc_mgmt_line *l, const pc_mgmt_arg **args)
{
    if (args != NULL)
        *args = l->args;
    return l->n;
}

void pc_mgmt_line_free(pc_mgmt_line *l)
{
    if (l == NULL)
        return;
    free(l->buf);
    free(l);
}

int pc_mgmt_run_line(pc_mgmt *m, const char *line, size_t len, const pc_result_ops *ops, void *rctx,
                     pc_mgmt_err *err)
{
    pc_mgmt_line *l = NULL;
    int rc = pc_mgmt_line_parse(line, len, &l, err);
    if (rc != 0)
        return rc;
    rc = pc_mgmt_run(m, l->cmd, l->args, l->n, ops, rctx, err);
    pc_mgmt_line_free(l);
    return rc;
}
