/*
 * jsonrpc_help.c - the JSON-RPC door's own methods (docs/pcached.md,
 * "JSON-RPC"): today one, help, which lists every method the door serves
 * with its parameters, so that a client (pcachectl help) never keeps a copy
 * of the list. It reads the two declarative tables there are: the
 * management commands registered in the context (pc_mgmt_cmd_at: the
 * management layer's built-ins, then what the storage layer registered)
 * and door_methods below, declared with the same types.
 *
 *   {"method":"help"}                       every method
 *   {"method":"help","params":["perf_keys"]} one ("method" when named)
 *
 * The result: {"methods":[{"method","summary","params":[{"name","type",
 * "required","default" (when there is one),"min","max" (numbers, when
 * bounded),"help"}]}]}.
 */
#include "pcached.h"

#include <string.h>

static const pc_mgmt_param help_params[] = {
    {"method", PC_MP_STRING, 0, NULL, 0, PC_MGMT_NAME_MAX,
     "a method name: that method alone (default: every method)"},
};

/* The door's own methods; run is NULL: srv_rpc_own_run serves them. */
static const pc_mgmt_cmd door_methods[] = {
    {"help", "the methods this door serves, with their parameters", help_params,
     sizeof help_params / sizeof help_params[0], NULL, NULL},
};
#define DOOR_NMETHODS (sizeof door_methods / sizeof door_methods[0])

static const pc_mgmt_cmd *door_find(const char *name)
{
    for (size_t i = 0; i < DOOR_NMETHODS; i++)
        if (strcmp(door_methods[i].name, name) == 0)
            return &door_methods[i];
    return NULL;
}

int srv_rpc_own(const char *name)
{
    return door_find(name) != NULL;
}

static const char *ptype_name(int type)
{
    switch (type) {
    case PC_MP_GLOB:
        return "glob";
    case PC_MP_UINT:
        return "integer";
    case PC_MP_TTL:
        return "seconds";
    case PC_MP_CURSOR:
        return "cursor";
    case PC_MP_COLL:
    case PC_MP_COLL_ALL:
        return "collection";
    default:
        return "string";
    }
}

/* One parameter's object, into jb. */
static int help_param(pc_json *jb, const pc_mgmt_param *p)
{
    const pc_result_ops *o = pc_json_ops();
    int rc = o->obj_begin(jb, NULL);
    rc = rc ? rc : o->str(jb, "name", p->name, strlen(p->name));
    const char *t = ptype_name(p->type);
    rc = rc ? rc : o->str(jb, "type", t, strlen(t));
    rc = rc ? rc : o->boolean(jb, "required", p->required);
    if (p->def != NULL)
        rc = rc ? rc : o->str(jb, "default", p->def, strlen(p->def));
    if (p->type == PC_MP_UINT)
        rc = rc ? rc : o->u64(jb, "min", p->min);
    if (p->type == PC_MP_UINT || p->type == PC_MP_TTL || p->type == PC_MP_STRING)
        rc = rc ? rc : o->u64(jb, "max", p->max);
    if (p->help != NULL)
        rc = rc ? rc : o->str(jb, "help", p->help, strlen(p->help));
    return rc ? rc : o->obj_end(jb);
}

/* One method's object, into jb. */
static int help_method(pc_json *jb, const pc_mgmt_cmd *c)
{
    const pc_result_ops *o = pc_json_ops();
    int rc = o->obj_begin(jb, NULL);
    rc = rc ? rc : o->str(jb, "method", c->name, strlen(c->name));
    rc = rc ? rc : o->str(jb, "summary", c->summary, strlen(c->summary));
    rc = rc ? rc : o->arr_begin(jb, "params");
    for (unsigned i = 0; rc == 0 && i < c->nparams; i++)
        rc = help_param(jb, &c->params[i]);
    rc = rc ? rc : o->arr_end(jb);
    return rc ? rc : o->obj_end(jb);
}

/* The one argument help takes, positional or named "method"; NUL-terminated
 * into name (at least PC_MGMT_NAME_MAX + 1 bytes), "" when omitted. */
static int help_arg(const struct rpc_req *r, char *name, pc_mgmt_err *err)
{
    name[0] = '\0';
    if (r->nargs > 1)
        return pc_mgmt_errorf(err, PC_EINVAL, "help: takes one parameter, [method]");
    if (r->nargs == 0)
        return 0;
    const pc_mgmt_arg *a = &r->args[0];
    if (a->name != NULL && (a->nlen != 6 || memcmp(a->name, "method", 6) != 0))
        return pc_mgmt_errorf(err, PC_EINVAL,
                              "help: unknown parameter \"%.*s\" (help takes [method])",
                              (int)(a->nlen < 64 ? a->nlen : 64), a->name);
    if (a->len > PC_MGMT_NAME_MAX || memchr(a->val, '\0', a->len) != NULL)
        return pc_mgmt_errorf(err, PC_EINVAL, "help: no such method (help lists them)");
    memcpy(name, a->val, a->len);
    name[a->len] = '\0';
    return 0;
}

int srv_rpc_own_run(pc_mgmt *m, pc_json *jb, const struct rpc_req *r, pc_mgmt_err *err,
                    const char **text, size_t *len)
{
    char only[PC_MGMT_NAME_MAX + 1];
    int rc = help_arg(r, only, err);
    if (rc != 0)
        return rc;
    const pc_mgmt_cmd *one = NULL;
    if (only[0] != '\0') {
        one = pc_mgmt_cmd_find(m, only);
        one = one != NULL ? one : door_find(only);
        if (one == NULL)
            return pc_mgmt_errorf(err, PC_EINVAL, "help: no method \"%s\" (help lists them)", only);
    }
    const pc_result_ops *o = pc_json_ops();
    pc_json_reset(jb);
    rc = o->obj_begin(jb, NULL);
    rc = rc ? rc : o->arr_begin(jb, "methods");
    if (one != NULL) {
        rc = rc ? rc : help_method(jb, one);
    } else {
        for (unsigned i = 0; rc == 0 && i < pc_mgmt_cmd_count(m); i++)
            rc = help_method(jb, pc_mgmt_cmd_at(m, i));
        for (size_t i = 0; rc == 0 && i < DOOR_NMETHODS; i++)
            rc = help_method(jb, &door_methods[i]);
    }
    rc = rc ? rc : o->arr_end(jb);
    rc = rc ? rc : o->obj_end(jb);
    rc = rc ? rc : pc_json_text(jb, text, len);
    if (rc != 0)
        pc_mgmt_errorf(err, rc, "help: the result could not be built");
    return rc;
}
