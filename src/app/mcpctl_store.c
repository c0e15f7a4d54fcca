/*
 * mcpctl's commands on a model store (an OCI image layout on this machine):
 *
 *   mcpctl store add FILE.yaml      load the model (as a server would), then store it
 *   mcpctl store ls | verify | gc   list versions; rehash every blob; remove unreferenced ones
 *   mcpctl store rm NAME@VERSION    forget a version
 *   mcpctl push NAME@VERSION DIR    copy a version into another OCI layout
 *   mcpctl pull DIR NAME@VERSION    copy a version from one
 *   mcpctl diff NAME@A NAME@B       files changed by digest, I/O signature changes
 *
 * Every command takes --store DIR (default $MCP_STORE, else ./mcp-store) and
 * --json. A store may be shared with a running server.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/mcpctl.h"
#include "registry/store_util.h"

typedef struct store_args {
    const char *store;
    bool json;
    const char *pos[4];
    int n_pos;
} store_args;

static int fail(const char *cmd, const char *msg)
{
    fprintf(stderr, "mcpctl: %s: %s\n", cmd, msg);
    return 1;
}

static bool parse_args(int argc, char **argv, store_args *a)
{
    memset(a, 0, sizeof *a);
    a->store = getenv("MCP_STORE") && getenv("MCP_STORE")[0] ? getenv("MCP_STORE") : "mcp-store";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) a->json = true;
        else if (!strcmp(argv[i], "--store") && i + 1 < argc) a->store = argv[++i];
        else if (argv[i][0] == '-' || a->n_pos == 4) return false;
        else a->pos[a->n_pos++] = argv[i];
    }
    return true;
}

/* NAME@VERSION (or NAME:VERSION) -> "NAME:VERSION". */
static bool to_ref(const char *arg, char *ref, size_t cap)
{
    const char *at = strrchr(arg, '@');
    int n = at ? snprintf(ref, cap, "%.*s:%s", (int)(at - arg), arg, at + 1) : snprintf(ref, cap, "%s", arg);
    return n > 0 && (size_t)n < cap && mcp__store_ref_valid(ref);
}

static void print_json(json_t *j)
{
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text) printf("%s\n", text);
    free(text);
    json_decref(j);
}

static mcp_status open_store(const char *dir, mcp_store **s, char *msg, size_t cap)
{
    mcp_err err = {msg, cap};
    return mcp_store_open(dir, s, &err);
}

/* ---- store add ---- */

static int store_add(const store_args *a)
{
    const char *file = a->pos[0];
    char msg[2048];
    mcp_err err = {msg, sizeof msg};
    mcp_descriptor_defaults dd = mcp_descriptor_defaults_default();
    mcp_diags diags = {0};
    mcp_descriptor *desc = NULL;
    mcp_status st = mcp_descriptor_load_file(file, &dd, &desc, &diags);
    if (st != MCP_STATUS_OK) {
        mcp_diags_format(&diags, file, msg, sizeof msg);
        mcp_diags_clear(&diags);
        return fail("store add", msg);
    }
    mcp_diags_clear(&diags);
    uint8_t *text = NULL;
    size_t len = 0;
    st = mcp_file_read(file, &text, &len, &err);
    mcp_model_version *v = NULL;
    if (st == MCP_STATUS_OK) st = mcp_model_version_load(desc, &dd, &v, &err);
    else mcp_descriptor_free(desc);
    mcp_store *s = NULL;
    char omsg[1024];
    if (st == MCP_STATUS_OK && open_store(a->store, &s, omsg, sizeof omsg) != MCP_STATUS_OK) {
        snprintf(msg, sizeof msg, "%s", omsg);
        st = MCP_STATUS_IO_ERROR;
    }
    mcp_store_manifest *m = NULL;
    if (st == MCP_STATUS_OK) st = mcp_store_add_version(s, v, (const char *)text, len, &m, &err);
    int rc = 0;
    if (st != MCP_STATUS_OK) {
        rc = fail("store add", msg);
    } else if (a->json) {
        json_t *files = json_array();
        for (int i = 0; i < m->n_files; i++)
            json_array_append_new(files, json_pack("{s:s, s:s, s:I}", "title", m->files[i].title, "digest", m->files[i].blob.digest,
                                                   "size", (json_int_t)m->files[i].blob.size));
        print_json(json_pack("{s:s, s:s, s:s, s:o}", "name", m->name, "version", m->version, "manifest", m->manifest.digest,
                             "files", files));
    } else {
        int64_t bytes = 0;
        for (int i = 0; i < m->n_files; i++) bytes += m->files[i].blob.size;
        printf("stored %s@%s %s (%d file%s, %lld bytes) in %s\n", m->name, m->version, m->manifest.digest, m->n_files,
               m->n_files == 1 ? "" : "s", (long long)bytes, mcp_store_root(s));
    }
    mcp_store_manifest_free(m);
    mcp_store_close(s);
    mcp_model_version_release(v);
    mcp_free(text);
    return rc;
}

/* ---- store ls / verify / gc ---- */

static int store_ls(const store_args *a)
{
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    mcp_store *s;
    if (open_store(a->store, &s, msg, sizeof msg) != MCP_STATUS_OK) return fail("store ls", msg);
    char **refs;
    int n;
    mcp_status st = mcp_store_list(s, &refs, &n, &err);
    if (st != MCP_STATUS_OK) {
        mcp_store_close(s);
        return fail("store ls", msg);
    }
    json_t *list = a->json ? json_array() : NULL;
    for (int i = 0; i < n; i++) {
        mcp_store_manifest *m = NULL;
        char mmsg[512];
        mcp_err merr = {mmsg, sizeof mmsg};
        bool ok = mcp_store_get_version(s, refs[i], &m, &merr) == MCP_STATUS_OK;
        if (list) {
            json_t *e = json_pack("{s:s}", "ref", refs[i]);
            if (ok) json_object_set_new(e, "manifest", json_string(m->manifest.digest));
            else json_object_set_new(e, "problem", json_string(mmsg));
            json_array_append_new(list, e);
        } else {
            char *colon = strchr(refs[i], ':');
            printf("%.*s@%s\t%s\n", (int)(colon - refs[i]), refs[i], colon + 1, ok ? m->manifest.digest : mmsg);
        }
        mcp_store_manifest_free(m);
    }
    if (list) print_json(list);
    mcp_store_refs_free(refs, n);
    mcp_store_close(s);
    return 0;
}

static int store_verify(const store_args *a)
{
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    mcp_store *s;
    if (open_store(a->store, &s, msg, sizeof msg) != MCP_STATUS_OK) return fail("store verify", msg);
    mcp_store_report r;
    mcp_status st = mcp_store_verify(s, &r, &err);
    mcp_store_close(s);
    if (st != MCP_STATUS_OK) return fail("store verify", msg);
    if (a->json) {
        print_json(json_pack("{s:I, s:I, s:I, s:I, s:s}", "versions", (json_int_t)r.versions, "blobs", (json_int_t)r.blobs,
                             "unreferenced", (json_int_t)r.unreferenced, "problems", (json_int_t)r.problems, "first_problem",
                             r.first_problem));
    } else {
        printf("%lld versions, %lld blobs (%lld unreferenced), %lld problem%s%s%s\n", (long long)r.versions, (long long)r.blobs,
               (long long)r.unreferenced, (long long)r.problems, r.problems == 1 ? "" : "s", r.problems ? ": " : "",
               r.first_problem);
    }
    return r.problems ? 1 : 0;
}

static int store_gc(const store_args *a)
{
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    mcp_store *s;
    if (open_store(a->store, &s, msg, sizeof msg) != MCP_STATUS_OK) return fail("store gc", msg);
    int64_t removed, bytes;
    mcp_status st = mcp_store_collect(s, &removed, &bytes, &err);
    mcp_store_close(s);
    if (st != MCP_STATUS_OK) return fail("store gc", msg);
    if (a->json) print_json(json_pack("{s:I, s:I}", "removed", (json_int_t)removed, "bytes", (json_int_t)bytes));
    else printf("removed %lld blob%s (%lld bytes)\n", (long long)removed, removed == 1 ? "" : "s", (long long)bytes);
    return 0;
}

static int store_rm(const store_args *a)
{
    char ref[512], msg[1024];
    mcp_err err = {msg, sizeof msg};
    if (!to_ref(a->pos[0], ref, sizeof ref)) return fail("store rm", "expected NAME@VERSION");
    mcp_store *s;
    if (open_store(a->store, &s, msg, sizeof msg) != MCP_STATUS_OK) return fail("store rm", msg);
    mcp_status st = mcp_store_untag(s, ref, &err);
    mcp_store_close(s);
    if (st != MCP_STATUS_OK) return fail("store rm", msg);
    if (!a->json) printf("removed %s (its blobs go at the next gc)\n", a->pos[0]);
    else print_json(json_pack("{s:s}", "removed", ref));
    return 0;
}

/* ---- push / pull ---- */

static int copy_version(const char *cmd, const char *from_dir, const char *to_dir, const char *arg, bool json)
{
    char ref[512], msg[1024];
    mcp_err err = {msg, sizeof msg};
    if (!to_ref(arg, ref, sizeof ref)) {
        snprintf(msg, sizeof msg, "'%.200s' is not NAME@VERSION", arg);
        return fail(cmd, msg);
    }
    mcp_store *from, *to;
    if (open_store(from_dir, &from, msg, sizeof msg) != MCP_STATUS_OK) return fail(cmd, msg);
    if (open_store(to_dir, &to, msg, sizeof msg) != MCP_STATUS_OK) {
        mcp_store_close(from);
        return fail(cmd, msg);
    }
    mcp_status st = mcp_store_copy(from, to, ref, &err);
    mcp_store_blob b = {{0}, 0};
    if (st == MCP_STATUS_OK) st = mcp_store_resolve(to, ref, &b, &err);
    int rc = st == MCP_STATUS_OK ? 0 : fail(cmd, msg);
    if (rc == 0 && json) print_json(json_pack("{s:s, s:s, s:s}", "ref", ref, "manifest", b.digest, "to", mcp_store_root(to)));
    else if (rc == 0) printf("%s %s -> %s\n", arg, b.digest, mcp_store_root(to));
    mcp_store_close(from);
    mcp_store_close(to);
    return rc;
}

/* ---- diff ---- */

/* name -> [datatype, shape] of one side ("inputs" or "outputs"). */
static json_t *io_map(const char *sig, const char *side)
{
    json_t *map = json_object();
    json_t *root = sig ? json_loads(sig, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *list = json_object_get(root, side);
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name) json_object_set_new(map, name, json_pack("[O, O]", json_object_get(e, "datatype"), json_object_get(e, "shape")));
    }
    json_decref(root);
    return map;
}

static char *io_text(json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

static void diff_io(const char *a_sig, const char *b_sig, json_t *changes, bool json)
{
    static const char *const sides[] = {"inputs", "outputs"};
    for (int s = 0; s < 2; s++) {
        json_t *a = io_map(a_sig, sides[s]), *b = io_map(b_sig, sides[s]);
        const char *key;
        json_t *va;
        json_object_foreach(a, key, va) {
            json_t *vb = json_object_get(b, key);
            if (vb && json_equal(va, vb)) continue;
            char *ta = io_text(va), *tb = vb ? io_text(vb) : NULL;
            if (json)
                json_array_append_new(changes, json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "side", sides[s], "name", key, "change",
                                                         vb ? "changed" : "removed", "from", ta, "to", tb));
            else printf("%s %s %s: %s%s%s\n", sides[s], vb ? "changed" : "removed", key, ta, vb ? " -> " : "", vb ? tb : "");
            free(ta);
            free(tb);
        }
        json_t *vb;
        json_object_foreach(b, key, vb) {
            if (json_object_get(a, key)) continue;
            char *tb = io_text(vb);
            if (json)
                json_array_append_new(changes, json_pack("{s:s, s:s, s:s, s:s}", "side", sides[s], "name", key, "change", "added",
                                                         "to", tb));
            else printf("%s added %s: %s\n", sides[s], key, tb);
            free(tb);
        }
        json_decref(a);
        json_decref(b);
    }
}

static const mcp_store_file *find_title(const mcp_store_manifest *m, const char *title)
{
    for (int i = 0; i < m->n_files; i++)
        if (!strcmp(m->files[i].title, title)) return &m->files[i];
    return NULL;
}

static int diff_versions(const store_args *a)
{
    char ra[512], rb[512], msg[1024];
    mcp_err err = {msg, sizeof msg};
    if (!to_ref(a->pos[0], ra, sizeof ra) || !to_ref(a->pos[1], rb, sizeof rb))
        return fail("diff", "expected NAME@VERSION NAME@VERSION");
    mcp_store *s;
    if (open_store(a->store, &s, msg, sizeof msg) != MCP_STATUS_OK) return fail("diff", msg);
    mcp_store_manifest *ma = NULL, *mb = NULL;
    mcp_status st = mcp_store_get_version(s, ra, &ma, &err);
    if (st == MCP_STATUS_OK) st = mcp_store_get_version(s, rb, &mb, &err);
    mcp_store_close(s);
    if (st != MCP_STATUS_OK) {
        mcp_store_manifest_free(ma);
        return fail("diff", msg);
    }
    json_t *files = a->json ? json_array() : NULL, *io = a->json ? json_array() : NULL;
    int changed = 0;
    bool same_config = !strcmp(ma->config.digest, mb->config.digest);
    if (!same_config) changed++;
    if (!a->json)
        printf("descriptor %s %s%s%s\n", same_config ? "same" : "changed", ma->config.digest, same_config ? "" : " -> ",
               same_config ? "" : mb->config.digest);
    for (int i = 0; i < ma->n_files; i++) {
        const mcp_store_file *fa = &ma->files[i], *fb = find_title(mb, fa->title);
        const char *what = !fb ? "removed" : strcmp(fa->blob.digest, fb->blob.digest) ? "changed" : "same";
        if (strcmp(what, "same")) changed++;
        if (files)
            json_array_append_new(files, json_pack("{s:s, s:s, s:s, s:s?}", "title", fa->title, "change", what, "from",
                                                   fa->blob.digest, "to", fb ? fb->blob.digest : NULL));
        else printf("%-8s %s %s%s%s\n", what, fa->title, fa->blob.digest, fb && strcmp(what, "same") ? " -> " : "",
                    fb && strcmp(what, "same") ? fb->blob.digest : "");
    }
    for (int i = 0; i < mb->n_files; i++) {
        if (find_title(ma, mb->files[i].title)) continue;
        changed++;
        if (files)
            json_array_append_new(files, json_pack("{s:s, s:s, s:s}", "title", mb->files[i].title, "change", "added", "to",
                                                   mb->files[i].blob.digest));
        else printf("%-8s %s %s\n", "added", mb->files[i].title, mb->files[i].blob.digest);
    }
    diff_io(ma->io_signature, mb->io_signature, io, a->json);
    /* The topology fingerprints (versions stored before they existed have none). */
    const char *fa = ma->fingerprint, *fb = mb->fingerprint;
    const char *topology = !fa || !fb ? "unknown" : strcmp(fa, fb) ? "changed" : "same";
    if (!a->json) printf("topology %s%s%s%s%s\n", topology, fa && fb ? " " : "", fa && fb ? fa : "",
                         fa && fb && strcmp(fa, fb) ? " -> " : "", fa && fb && strcmp(fa, fb) ? fb : "");
    if (a->json) {
        print_json(json_pack("{s:s, s:s, s:b, s:o, s:o, s:s}", "from", ra, "to", rb, "descriptor_changed", !same_config, "files",
                             files, "io", io, "topology", topology));
    }
    mcp_store_manifest_free(ma);
    mcp_store_manifest_free(mb);
    return 0;
}

/* ---- entry ---- */

static const char USAGE[] = "store add FILE.yaml | store ls | store verify | store gc | store rm NAME@VERSION | push NAME@VERSION DIR | "
                            "pull DIR NAME@VERSION | diff NAME@A NAME@B   [--store DIR] [--json]";

int mcpctl_store_main(const char *cmd, int argc, char **argv, bool *handled)
{
    *handled = true;
    store_args a;
    if (!strcmp(cmd, "store")) {
        const char *sub = argc > 0 ? argv[0] : "";
        if (!parse_args(argc - 1, argv + 1, &a)) goto usage;
        if (!strcmp(sub, "add") && a.n_pos == 1) return store_add(&a);
        if (!strcmp(sub, "ls") && a.n_pos == 0) return store_ls(&a);
        if (!strcmp(sub, "verify") && a.n_pos == 0) return store_verify(&a);
        if (!strcmp(sub, "gc") && a.n_pos == 0) return store_gc(&a);
        if (!strcmp(sub, "rm") && a.n_pos == 1) return store_rm(&a);
        goto usage;
    }
    if (!strcmp(cmd, "push") || !strcmp(cmd, "pull") || !strcmp(cmd, "diff")) {
        if (!parse_args(argc, argv, &a) || a.n_pos != 2) goto usage;
        if (!strcmp(cmd, "push")) return copy_version("push", a.store, a.pos[1], a.pos[0], a.json);
        if (!strcmp(cmd, "pull")) return copy_version("pull", a.pos[0], a.store, a.pos[1], a.json);
        return diff_versions(&a);
    }
    *handled = false;
    return 2;
usage:
    fprintf(stderr, "mcpctl: %s: usage: mcpctl %s\n", cmd, USAGE);
    return 2;
}

const char *mcpctl_store_usage(void)
{
    return "  store add FILE.yaml       load a model as a server would and store it (--store DIR, default ./mcp-store)\n"
           "  store ls | verify | gc    the store's versions; rehash every blob; remove unreferenced blobs\n"
           "  store rm NAME@VERSION     forget a version (its blobs go at the next gc)\n"
           "  push NAME@VERSION DIR     copy a version into another OCI image layout\n"
           "  pull DIR NAME@VERSION     copy a version from one\n"
           "  diff NAME@A NAME@B        files changed by digest, and I/O signature changes\n";
}
