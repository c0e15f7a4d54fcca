/*
 * mcpctl commands that talk to a running server (plus `validate`, which is
 * local so it can run in CI and pre-commit hooks):
 *
 *   apply -f model.yaml        POST /v2/repository/models/NAME/load
 *   get models                 POST /v2/repository/index
 *   describe model NAME        GET /v2/repository/models/NAME + GET /v2/models/NAME
 *   delete model NAME          POST /v2/repository/models/NAME/unload
 *   validate -f FILE ...       local: every problem with file:line:col
 *   infer NAME IN=FILE.npy ... (mcpctl_infer.c)
 *   bench NAME ...             (mcpctl_bench.c)
 *
 * The server comes from --server URL, else $MCP_SERVER, else
 * http://127.0.0.1:8080. Failures print one line on stderr and exit 1;
 * usage errors exit 2.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/mcpctl.h"
#include "app/mcpctl_http.h"
#include "registry/registry.h"

#define DEFAULT_SERVER "http://127.0.0.1:8080"
/* Loading a large model can take a while; nothing else should. */
#define CONTROL_TIMEOUT_MS 600000L

static int fail(const char *cmd, const char *msg)
{
    fprintf(stderr, "mcpctl: %s: %s\n", cmd, msg);
    return 1;
}

static int usage_error(const char *cmd, const char *usage)
{
    fprintf(stderr, "mcpctl: %s: usage: mcpctl %s\n", cmd, usage);
    return 2;
}

/* ---- validate / apply: local descriptor checks ---- */

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Loads a YAML descriptor, a Triton model folder, or a folder's
 * config.pbtxt, and prints every diagnostic as file:line:col: path: message.
 * Returns the load status; *desc (when OK) is the caller's. */
static mcp_status load_descriptor(const char *file, mcp_descriptor **desc, int *n_diags)
{
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    defaults.check_load = true; /* as the server will: files exist, precision implemented */
    mcp_diags diags = {0};
    mcp_status st;
    char dir[PATH_MAX];
    const char *shown = file;
    *desc = NULL;
    if (is_dir(file)) {
        /* Diagnostics point into the folder's config.pbtxt. */
        size_t n = strlen(file);
        snprintf(dir, sizeof dir, "%s%sconfig.pbtxt", file, n && file[n - 1] == '/' ? "" : "/");
        shown = dir;
        st = mcp_descriptor_load_triton(file, &defaults, desc, &diags);
    } else if (ends_with(file, "config.pbtxt")) {
        snprintf(dir, sizeof dir, "%s", file);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
        st = mcp_descriptor_load_triton(dir, &defaults, desc, &diags);
    } else {
        st = mcp_descriptor_load_file(file, &defaults, desc, &diags);
    }
    if (diags.count > 0) {
        size_t cap = 256 + (size_t)diags.count * 1024;
        char *buf = mcp_malloc(cap);
        if (buf) {
            buf[0] = '\0';
            mcp_diags_format(&diags, shown, buf, cap);
            size_t n = strlen(buf);
            fputs(buf, stderr);
            if (n && buf[n - 1] != '\n') fputc('\n', stderr);
            mcp_free(buf);
        }
    } else if (st != MCP_STATUS_OK) {
        fprintf(stderr, "%s: cannot be loaded (%s)\n", shown, mcp_status_str(st));
    }
    *n_diags = diags.count;
    mcp_diags_clear(&diags);
    if (st != MCP_STATUS_OK && *desc) {
        mcp_descriptor_free(*desc);
        *desc = NULL;
    }
    return st;
}

static int cmd_validate(int argc, char **argv)
{
    const char *usage = "validate -f FILE [-f FILE ...]  (FILE: model.yaml, or a Triton model folder)";
    int n_files = 0, rc = 0;
    for (int a = 0; a < argc; a++) {
        const char *file = argv[a];
        if (!strcmp(argv[a], "-f") || !strcmp(argv[a], "--filename")) {
            if (a + 1 >= argc) return usage_error("validate", usage);
            file = argv[++a];
        } else if (argv[a][0] == '-') {
            return usage_error("validate", usage);
        }
        n_files++;
        mcp_descriptor *desc = NULL;
        int n_diags = 0;
        mcp_status st = load_descriptor(file, &desc, &n_diags);
        if (st != MCP_STATUS_OK) {
            fprintf(stderr, "%s: %d problem%s\n", file, n_diags ? n_diags : 1, n_diags == 1 ? "" : "s");
            rc = 1;
        } else if (n_diags) {
            printf("%s: valid (%d warning%s)\n", file, n_diags, n_diags == 1 ? "" : "s");
        } else {
            printf("%s: valid\n", file);
        }
        mcp_descriptor_free(desc);
    }
    if (n_files == 0) return usage_error("validate", usage);
    return rc;
}

typedef struct apply_call {
    mcpctl_http *h;
    const char *path, *body;
    mcp_status st;
    char msg[1024];
    mcp_err err;
    atomic_bool done;
} apply_call;

static void *apply_post(void *arg)
{
    apply_call *c = arg;
    c->st = mcpctl_http_do(c->h, "POST", c->path, c->body, strlen(c->body), NULL, -1, &c->err);
    atomic_store(&c->done, true);
    return NULL;
}

/* Until the load answers: after a second, its phase and time from the
 * repository index every half second, on stderr. */
static void watch_load(const char *server, const char *name, apply_call *c)
{
    mcpctl_http poll = {0};
    char msg[256];
    mcp_err err = {msg, sizeof msg};
    bool ready = false;
    for (int tick = 0; !atomic_load(&c->done); tick++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (tick < 10 || tick % 5) continue;
        if (!ready) ready = mcpctl_http_init(&poll, server, 5000, &err) == MCP_STATUS_OK;
        if (!ready || mcpctl_http_do(&poll, "POST", "/v2/repository/index", "{}", 2, NULL, -1, &err) != MCP_STATUS_OK ||
            poll.code != 200)
            continue;
        json_t *list = json_loadb((const char *)poll.resp.data, poll.resp.len, 0, NULL);
        for (size_t i = 0; json_is_array(list) && i < json_array_size(list); i++) {
            json_t *e = json_array_get(list, i);
            const char *n = json_string_value(json_object_get(e, "name"));
            const char *reason = json_string_value(json_object_get(e, "reason"));
            if (n && !strcmp(n, name) && reason && !strncmp(reason, "loading: ", 9))
                fprintf(stderr, "mcpctl: apply: model %s %s\n", name, reason);
        }
        json_decref(list);
    }
    if (ready) mcpctl_http_cleanup(&poll);
}

static int cmd_apply(mcpctl_http *h, int argc, char **argv)
{
    const char *usage = "apply -f model.yaml";
    const char *file = NULL;
    for (int a = 0; a < argc; a++) {
        if ((!strcmp(argv[a], "-f") || !strcmp(argv[a], "--filename")) && a + 1 < argc) file = argv[++a];
        else return usage_error("apply", usage);
    }
    if (!file) return usage_error("apply", usage);
    mcp_descriptor *desc = NULL;
    int n_diags = 0;
    if (load_descriptor(file, &desc, &n_diags) != MCP_STATUS_OK) {
        fprintf(stderr, "mcpctl: apply: %s is not valid (%d problem%s); nothing sent\n", file, n_diags ? n_diags : 1,
                n_diags == 1 ? "" : "s");
        return 1;
    }
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = 0;
    if (is_dir(file) || ends_with(file, "config.pbtxt")) {
        rc = fail("apply", "a Triton model folder is loaded by the server's --model-repository; apply takes a YAML descriptor");
        goto done;
    }
    if (mcp_file_read(file, &text, &len, &err) != MCP_STATUS_OK) {
        rc = fail("apply", msg);
        goto done;
    }
    /* The descriptor travels as text; its absolute location lets a server on
     * this machine resolve `path:` relative to the descriptor, as validate does. */
    char abs[PATH_MAX];
    json_t *params = json_object();
    json_object_set_new(params, "config", json_stringn((const char *)text, len));
    if (realpath(file, abs)) json_object_set_new(params, "descriptor_path", json_string(abs));
    json_t *root = json_object();
    json_object_set_new(root, "parameters", params);
    char *body = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!body) {
        rc = fail("apply", "cannot encode the request (is the file UTF-8 text?)");
        goto done;
    }
    char seg[1024], path[1200];
    mcpctl_path_segment(desc->name, seg, sizeof seg);
    snprintf(path, sizeof path, "/v2/repository/models/%s/load", seg);
    /* The load runs on its own thread; this one tells how it goes once it
     * has taken a second ("loading digits: warm-up, 2.5 s"). */
    apply_call call = {.h = h, .path = path, .body = body, .err = {call.msg, sizeof call.msg}};
    pthread_t th;
    bool threaded = pthread_create(&th, NULL, apply_post, &call) == 0;
    if (!threaded) apply_post(&call);
    else watch_load(h->base, desc->name, &call);
    if (threaded) pthread_join(th, NULL);
    free(body);
    mcp_status st = call.st;
    snprintf(msg, sizeof msg, "%s", call.msg);
    if (st == MCP_STATUS_OK && h->code != 200) st = mcpctl_http_fail(h, &err);
    if (st != MCP_STATUS_OK) {
        char m2[1200];
        snprintf(m2, sizeof m2, "model '%s': %s", desc->name, msg);
        rc = fail("apply", m2);
        goto done;
    }
    printf("model %s %s ready at %s/v2/models/%s/infer\n", desc->name, desc->version ? desc->version : "", h->base, seg);
done:
    mcp_free(text);
    mcp_descriptor_free(desc);
    return rc;
}

/* ---- get / describe / delete ---- */

/* Sends a control request and checks for 200; prints the failure. */
static int control(mcpctl_http *h, const char *cmd, const char *method, const char *path, const char *body, json_t **out)
{
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcpctl_http_do(h, method, path, body, body ? strlen(body) : 0, NULL, -1, &err);
    if (st == MCP_STATUS_OK && h->code != 200) st = mcpctl_http_fail(h, &err);
    if (st != MCP_STATUS_OK) return fail(cmd, msg);
    if (!out) return 0;
    json_error_t jerr;
    *out = json_loadb((const char *)h->resp.data, h->resp.len, 0, &jerr);
    if (!*out) {
        snprintf(msg, sizeof msg, "%s answered something that is not JSON (byte %d: %s)", path, jerr.position, jerr.text);
        return fail(cmd, msg);
    }
    return 0;
}

static const char *str_or(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && *s ? s : dflt;
}

static int cmd_get(mcpctl_http *h, int argc, char **argv)
{
    if (argc != 1 || (strcmp(argv[0], "models") && strcmp(argv[0], "model"))) return usage_error("get", "get models");
    json_t *list = NULL;
    int rc = control(h, "get models", "POST", "/v2/repository/index", "{}", &list);
    if (rc) return rc;
    if (!json_is_array(list)) {
        json_decref(list);
        return fail("get models", "the repository index is not a JSON list");
    }
    int w_name = 4, w_ver = 7, w_state = 5;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        int n = (int)strlen(str_or(e, "name", "-")), v = (int)strlen(str_or(e, "version", "-")),
            s = (int)strlen(str_or(e, "state", "-"));
        w_name = n > w_name ? n : w_name;
        w_ver = v > w_ver ? v : w_ver;
        w_state = s > w_state ? s : w_state;
    }
    printf("%-*s  %-*s  %-*s  %s\n", w_name, "NAME", w_ver, "VERSION", w_state, "STATE", "REASON");
    json_array_foreach(list, i, e)
    {
        printf("%-*s  %-*s  %-*s  %s\n", w_name, str_or(e, "name", "-"), w_ver, str_or(e, "version", "-"), w_state,
               str_or(e, "state", "-"), str_or(e, "reason", ""));
    }
    json_decref(list);
    return 0;
}

static void print_scalar(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING: printf("%s", json_string_value(v)); break;
    case JSON_INTEGER: printf("%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: printf("%.6g", json_real_value(v)); break;
    case JSON_TRUE: printf("true"); break;
    case JSON_FALSE: printf("false"); break;
    case JSON_NULL: printf("null"); break;
    default: break;
    }
}

static bool is_flat(json_t *v)
{
    if (json_is_object(v)) return json_object_size(v) == 0;
    if (!json_is_array(v)) return true;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (json_is_object(e) || json_is_array(e)) return false;
    return true;
}

static void print_flat(json_t *v)
{
    if (json_is_object(v)) {
        printf("{}");
    } else if (json_is_array(v)) {
        printf("[");
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            printf("%s", i ? ", " : "");
            print_scalar(e);
        }
        printf("]");
    } else {
        print_scalar(v);
    }
}

/* JSON as indented "key: value" lines (YAML-like); bounded by JSON depth.
 * dash >= 0: the first line of this object starts with "- " at column dash. */
static void print_tree(json_t *v, int indent, int dash, int depth);

static void print_member(json_t *e, int depth, int indent)
{
    if (is_flat(e)) {
        printf(" ");
        print_flat(e);
        printf("\n");
    } else {
        printf("\n");
        print_tree(e, indent + 2, -1, depth + 1);
    }
}

static void print_tree(json_t *v, int indent, int dash, int depth)
{
    if (depth > 32) return;
    if (json_is_object(v)) {
        const char *key;
        json_t *e;
        bool first = true;
        json_object_foreach(v, key, e)
        {
            if (first && dash >= 0) printf("%*s- %s:", dash, "", key);
            else printf("%*s%s:", indent, "", key);
            first = false;
            print_member(e, depth, indent);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (json_is_object(e) && json_object_size(e) > 0) {
                print_tree(e, indent + 2, indent, depth + 1);
            } else {
                printf("%*s-", indent, "");
                print_member(e, depth, indent);
            }
        }
    } else {
        printf("%*s", indent, "");
        print_scalar(v);
        printf("\n");
    }
}

static void print_io(const char *kind, const mcpctl_tensor_meta *t)
{
    printf("  %s %s: %s [", kind, t->name, t->datatype);
    for (int d = 0; d < t->rank; d++) printf("%s%lld", d ? ", " : "", (long long)t->dims[d]);
    printf("]\n");
}

static int cmd_describe(mcpctl_http *h, int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[0], "model") && strcmp(argv[0], "models")))
        return usage_error("describe", "describe model NAME");
    const char *name = argv[1];
    char seg[1024], path[1200];
    mcpctl_path_segment(name, seg, sizeof seg);
    snprintf(path, sizeof path, "/v2/repository/models/%s", seg);
    json_t *info = NULL;
    int rc = control(h, "describe model", "GET", path, NULL, &info);
    if (rc) return rc;
    print_tree(info, 0, -1, 0);
    json_decref(info);
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    mcpctl_model_meta meta;
    if (mcpctl_model_meta_fetch(h, name, NULL, &meta, &err) != MCP_STATUS_OK) {
        /* A model that is not ready has no metadata; say why, not a failure. */
        printf("metadata: unavailable (%s)\n", msg);
        return 0;
    }
    printf("metadata:\n");
    if (meta.platform) printf("  platform: %s\n", meta.platform);
    for (int i = 0; i < meta.n_inputs; i++) print_io("input", &meta.inputs[i]);
    for (int i = 0; i < meta.n_outputs; i++) print_io("output", &meta.outputs[i]);
    mcpctl_model_meta_free(&meta);
    return 0;
}

static int cmd_delete(mcpctl_http *h, int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[0], "model") && strcmp(argv[0], "models")))
        return usage_error("delete", "delete model NAME");
    char seg[1024], path[1200];
    mcpctl_path_segment(argv[1], seg, sizeof seg);
    snprintf(path, sizeof path, "/v2/repository/models/%s/unload", seg);
    int rc = control(h, "delete model", "POST", path, "{}", NULL);
    if (rc == 0) printf("model %s unloaded\n", argv[1]);
    return rc;
}

/* mcpctl events [NAME] [--after ID] [--follow] [--json]: the server's
 * event log; --follow polls for new events until interrupted. */
static int cmd_events(mcpctl_http *h, int argc, char **argv)
{
    const char *usage = "events [NAME] [--after ID] [--denied] [--follow] [--json]";
    const char *model = NULL;
    long long after = 0;
    bool follow = false, as_json = false, denied = false;
    for (int a = 0; a < argc; a++) {
        if (!strcmp(argv[a], "--follow")) follow = true;
        else if (!strcmp(argv[a], "--denied")) denied = true;
        else if (!strcmp(argv[a], "--json")) as_json = true;
        else if (!strcmp(argv[a], "--after") && a + 1 < argc) after = atoll(argv[++a]);
        else if (argv[a][0] != '-' && !model) model = argv[a];
        else return usage_error("events", usage);
    }
    char seg[1024] = "";
    if (model) mcpctl_path_segment(model, seg, sizeof seg);
    for (;;) {
        char path[1400];
        snprintf(path, sizeof path, "/v2/events?after=%lld&limit=1000%s%s%s", after, model ? "&model=" : "", model ? seg : "",
                 denied ? "&denied=true" : "");
        json_t *list = NULL;
        int rc = control(h, "events", "GET", path, NULL, &list);
        if (rc) return rc;
        if (!json_is_array(list)) {
            json_decref(list);
            return fail("events", "the server answered something that is not a list of events");
        }
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            json_int_t id = json_integer_value(json_object_get(e, "id"));
            if (id > after) after = id;
            if (as_json) {
                char *line = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
                if (line) printf("%s\n", line);
                free(line);
                continue;
            }
            time_t t = (time_t)(json_integer_value(json_object_get(e, "time_ms")) / 1000);
            struct tm tm;
            char when[32] = "";
            if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
            const char *reason = str_or(e, "reason", "");
            printf("%s %-8s %-8s %-24s %s%s%s\n", when, str_or(e, "actor", "-"), str_or(e, "action", "-"),
                   str_or(e, "target", "-"), str_or(e, "outcome", "-"), reason[0] ? ": " : "", reason);
        }
        json_decref(list);
        fflush(stdout);
        if (!follow) return 0;
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* ---- rollout ---- */

static void print_rollout(json_t *st)
{
    printf("model %s\n  primary   %s\n", str_or(st, "model", "-"), str_or(st, "primary", "-"));
    json_t *c = json_object_get(st, "canary"), *s = json_object_get(st, "shadow");
    if (json_is_object(c))
        printf("  canary    %s at %g%%\n", str_or(c, "version", "-"), json_number_value(json_object_get(c, "weight")));
    if (json_is_object(s))
        printf("  shadow    %s on %g%% of requests\n", str_or(s, "version", "-"),
               100 * json_number_value(json_object_get(s, "sample")));
    const char *prev = json_string_value(json_object_get(st, "previous"));
    const char *cold = json_string_value(json_object_get(st, "previous_unloaded"));
    if (prev) printf("  previous  %s (loaded: undo is instant)\n", prev);
    else if (cold) printf("  previous  %s (unloaded: undo reloads it from the store)\n", cold);
    json_t *g = json_object_get(st, "gates");
    printf("  validator %s, window %gs, gates: error rate margin ", str_or(st, "validator", "-"),
           (double)json_integer_value(json_object_get(st, "window_ms")) / 1000.0);
    json_t *m = json_object_get(g, "error_rate_margin"), *p = json_object_get(g, "p99_budget_us");
    if (json_is_number(m)) printf("%g", json_number_value(m));
    else printf("off");
    if (json_is_integer(p)) printf(", p99 budget %g ms", (double)json_integer_value(p) / 1000.0);
    printf(", %lld samples\n", (long long)json_integer_value(json_object_get(g, "min_samples")));
    json_t *w = json_object_get(st, "window");
    if (!json_is_object(w)) return;
    const char *const roles[] = {"primary", "canary"};
    for (int i = 0; i < 2; i++) {
        json_t *r = json_object_get(w, roles[i]);
        if (!json_is_object(r)) continue;
        printf("  %-9s %s: %lld requests, %lld errors, p99 %.3f ms\n", roles[i], str_or(r, "version", "-"),
               (long long)json_integer_value(json_object_get(r, "requests")),
               (long long)json_integer_value(json_object_get(r, "errors")),
               (double)json_integer_value(json_object_get(r, "p99_us")) / 1000.0);
    }
    json_t *sh = json_object_get(w, "shadow");
    if (json_is_object(sh))
        printf("  shadow    %s: %lld compared, %lld agreed, %lld failed, %lld dropped\n", str_or(sh, "version", "-"),
               (long long)json_integer_value(json_object_get(sh, "compared")),
               (long long)json_integer_value(json_object_get(sh, "agreed")),
               (long long)json_integer_value(json_object_get(sh, "failed")),
               (long long)json_integer_value(json_object_get(sh, "dropped")));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(w, "tripped"), i, t)
        printf("  stopped   %s: %s\n", str_or(t, "role", "-"), str_or(t, "reason", "-"));
}

/* mcpctl rollout status|set-weight|shadow|promote|undo NAME ... [--json] */
static int cmd_rollout(mcpctl_http *h, int argc, char **argv)
{
    const char *usage = "rollout status NAME | set-weight NAME VERSION=PERCENT... | shadow NAME VERSION --sample S "
                        "[--validator V] [--window W] | promote NAME VERSION | undo NAME  [--json]";
    bool as_json = false;
    const char *words[8];
    int n = 0;
    const char *sample = NULL, *validator = NULL, *window = NULL;
    for (int a = 0; a < argc; a++) {
        if (!strcmp(argv[a], "--json")) as_json = true;
        else if (!strcmp(argv[a], "--sample") && a + 1 < argc) sample = argv[++a];
        else if (!strcmp(argv[a], "--validator") && a + 1 < argc) validator = argv[++a];
        else if (!strcmp(argv[a], "--window") && a + 1 < argc) window = argv[++a];
        else if (argv[a][0] != '-' && n < 8) words[n++] = argv[a];
        else return usage_error("rollout", usage);
    }
    if (n < 2) return usage_error("rollout", usage);
    const char *verb = words[0], *name = words[1];
    char seg[1024], path[1200];
    mcpctl_path_segment(name, seg, sizeof seg);
    snprintf(path, sizeof path, "/v2/models/%s/rollout", seg);
    json_t *body = json_object();
    if (!body) return fail("rollout", "out of memory");
    int rc = 0;
    if (!strcmp(verb, "status") && n == 2) {
        json_decref(body);
        body = NULL;
    } else if (!strcmp(verb, "set-weight") && n >= 3 && n <= 4) {
        json_t *weights = json_object();
        json_object_set_new(body, "action", json_string("set-weight"));
        for (int i = 2; i < n && rc == 0; i++) {
            const char *eq = strchr(words[i], '=');
            char *end = NULL;
            double pct = eq ? strtod(eq + 1, &end) : 0;
            if (!eq || eq == words[i] || !end || *end || end == eq + 1) {
                rc = usage_error("rollout", "rollout set-weight NAME VERSION=PERCENT [VERSION=PERCENT]");
                break;
            }
            char version[128];
            snprintf(version, sizeof version, "%.*s", (int)(eq - words[i]), words[i]);
            json_object_set_new(weights, version, json_real(pct));
        }
        json_object_set_new(body, "weights", weights);
    } else if (!strcmp(verb, "shadow") && n == 3 && sample) {
        char *end;
        double x = strtod(sample, &end);
        if (*end || end == sample) rc = usage_error("rollout", "rollout shadow NAME VERSION --sample S (0..1; 0 = off)");
        json_object_set_new(body, "action", json_string("shadow"));
        json_object_set_new(body, "version", json_string(words[2]));
        json_object_set_new(body, "sample", json_real(x));
        if (validator) json_object_set_new(body, "validator", json_string(validator));
        if (window) json_object_set_new(body, "window", json_string(window));
    } else if (!strcmp(verb, "promote") && n == 3) {
        json_object_set_new(body, "action", json_string("promote"));
        json_object_set_new(body, "version", json_string(words[2]));
    } else if (!strcmp(verb, "undo") && n == 2) {
        json_object_set_new(body, "action", json_string("undo"));
    } else {
        rc = usage_error("rollout", usage);
    }
    char *text = rc == 0 && body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (rc) return rc;
    json_t *st = NULL;
    rc = control(h, "rollout", text ? "POST" : "GET", path, text, &st);
    free(text);
    if (rc) return rc;
    if (as_json) {
        char *line = json_dumps(st, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (line) printf("%s\n", line);
        free(line);
    } else {
        print_rollout(st);
    }
    json_decref(st);
    return 0;
}

/* ---- dispatch ---- */

const char *mcpctl_client_usage(void)
{
    return "server commands (--server URL, else $MCP_SERVER, else " DEFAULT_SERVER "; $MCP_TOKEN (an API key or\n"
           "JWT of a server with access rules), else $MCP_ADMIN_TOKEN (its --admin-token-file), is sent as the bearer token):\n"
           "  apply -f model.yaml                  validate, then load it on the server; prints its URL\n"
           "  get models                           the server's models: name, version, state, reason\n"
           "  describe model NAME                  descriptor, state, statistics, inputs and outputs\n"
           "  delete model NAME                    unload it\n"
           "  events [NAME] [--after ID] [--denied] [--follow] [--json]\n"
           "                                       the server's event log (a server with --store); --denied:\n"
           "                                       only refused calls, with who made them\n"
           "  rollout status NAME [--json]         primary, canary, shadow, previous; window figures, gates\n"
           "  rollout set-weight NAME V=PCT [V=PCT] canary weights (a primary left out takes the rest)\n"
           "  rollout shadow NAME V --sample S [--validator diff-threshold@0.02] [--window 60s]\n"
           "                                       copy a share S of requests to V and compare (0 = off)\n"
           "  rollout promote NAME V               V takes all traffic; the old primary stays warm\n"
           "  rollout undo NAME                    the previous version takes all traffic at once\n"
           "  infer NAME IN=FILE.npy ... [--out DIR] [--model-version V]\n"
           "                                       one request (binary tensors); writes DIR/<output>.npy\n"
           "                                       (without --out: a new folder under $TMPDIR, named)\n"
           "  bench NAME [--concurrency 1,8,64] [--duration 10s] [--protocol v2|v2-json|v1|grpc|grpc-stream]\n"
           "        [--grpc HOST:PORT (default: the server's host, port 8081)]\n"
           "        [--rate R] [--input IN=FILE.npy ...] [--json]\n"
           "                                       closed-loop load (or --rate R req/s, open loop): req/s,\n"
           "                                       p50/p90/p99 latency and the server's queue/compute\n"
           "                                       split from /metrics\n"
           "local:\n"
           "  validate -f FILE ...                 check descriptors (YAML, or Triton folders); every\n"
           "                                       problem as file:line:col; exit 1 if any\n";
}

int mcpctl_client_main(const char *cmd, int argc, char **argv, bool *handled)
{
    static const char *const cmds[] = {"apply", "get", "describe", "delete", "validate", "infer", "bench", "events", "rollout"};
    *handled = false;
    bool known = false;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) known |= strcmp(cmd, cmds[i]) == 0;
    if (!known) return 2;
    *handled = true;
    if (!strcmp(cmd, "validate")) return cmd_validate(argc, argv);

    /* --server may appear anywhere after the command. */
    const char *server = getenv("MCP_SERVER");
    if (!server || !*server) server = DEFAULT_SERVER;
    char **rest = mcp_calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return fail(cmd, "out of memory");
    int n = 0;
    for (int a = 0; a < argc; a++) {
        if (!strcmp(argv[a], "--server")) {
            if (a + 1 >= argc) {
                mcp_free(rest);
                return usage_error(cmd, "... --server URL");
            }
            server = argv[++a];
        } else if (!strncmp(argv[a], "--server=", 9)) {
            server = argv[a] + 9;
        } else {
            rest[n++] = argv[a];
        }
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        mcp_free(rest);
        return fail(cmd, "cannot initialise libcurl");
    }
    int rc;
    if (!strcmp(cmd, "infer")) {
        rc = mcpctl_cmd_infer(server, n, rest);
    } else if (!strcmp(cmd, "bench")) {
        bool gen = false;
        for (int i = 0; i < n; i++) gen |= !strcmp(rest[i], "--generate");
        rc = gen ? mcpctl_bench_generate(server, n, rest) : mcpctl_cmd_bench(server, n, rest);
    } else {
        char msg[512];
        mcp_err err = {msg, sizeof msg};
        mcpctl_http h;
        if (mcpctl_http_init(&h, server, CONTROL_TIMEOUT_MS, &err) != MCP_STATUS_OK) {
            rc = fail(cmd, msg);
        } else {
            if (!strcmp(cmd, "apply")) rc = cmd_apply(&h, n, rest);
            else if (!strcmp(cmd, "get")) rc = cmd_get(&h, n, rest);
            else if (!strcmp(cmd, "describe")) rc = cmd_describe(&h, n, rest);
            else if (!strcmp(cmd, "events")) rc = cmd_events(&h, n, rest);
            else if (!strcmp(cmd, "rollout")) rc = cmd_rollout(&h, n, rest);
            else rc = cmd_delete(&h, n, rest);
        }
        mcpctl_http_cleanup(&h);
    }
    curl_global_cleanup();
    mcp_free(rest);
    return rc;
}
