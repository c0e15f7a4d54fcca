/*
 * The model store: an OCI image layout (oci-layout, index.json,
 * blobs/sha256/<hex>) holding model files and descriptors by digest.
 *
 * A model version is an OCI image manifest: its config is the descriptor,
 * its layers are the model's files, each titled with its path relative to
 * the model's folder (org.opencontainers.image.title). index.json lists the
 * manifests, each named "name:version" (org.opencontainers.image.ref.name).
 *
 * Crash safety: a blob is written to a temporary file in blobs/sha256,
 * fsynced, renamed to its digest and the folder fsynced, so a name under
 * blobs/ only ever holds complete bytes; index.json is replaced the same
 * way. A crash leaves at most temporary files, removed at the next open.
 * Identical bytes have one name, so they are stored once.
 *
 * Concurrency: one mutex per handle, and flock() on <store>/.lock across
 * processes (the server and mcpctl may share a store); the index is read
 * from disk under the lock for every operation, so each sees the others'
 * changes. Everything read from the store (index, manifests: a store may
 * have been pulled from elsewhere) is checked before use.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/registry.h"
#include "registry/store_util.h"

#define LAYOUT_TEXT "{\"imageLayoutVersion\":\"1.0.0\"}"
#define MAX_INDEX_BYTES (64u << 20)
#define MAX_MANIFEST_BYTES (4u << 20)
#define MAX_MANIFEST_LAYERS 4096

/* Room below PATH_MAX for the names inside the store. */
#define ROOT_MAX 3072

struct mcp_store {
    char root[ROOT_MAX];       /* realpath of the store folder */
    char blobs[ROOT_MAX + 16]; /* root/blobs/sha256 */
    int lock_fd;
    pthread_mutex_t mu;
};

/* ---- small file helpers ---- */

static mcp_status fsync_dir(const char *dir, mcp_err *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot open folder '%s': %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot sync folder '%s': %s", dir, strerror(e));
    return MCP_STATUS_OK;
}

static mcp_status make_dir(const char *path, mcp_err *err)
{
    if (mkdir(path, 0750) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return MCP_STATUS_OK;
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: '%s' exists and is not a folder", path);
    }
    return mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot create folder '%s': %s", path, strerror(errno));
}

static bool write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* Writes bytes to dir/name: a temporary file, fsync, rename, fsync dir. */
static mcp_status write_atomic(const char *dir, const char *name, const void *data, size_t len, mcp_err *err)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir) >= (int)sizeof tmp ||
        snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: path too long in '%s'", dir);
    int fd = mkstemp(tmp);
    if (fd < 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot create a file in '%s': %s", dir, strerror(errno));
    bool ok = write_all(fd, data, len) && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0) ok = false;
    if (!ok || rename(tmp, dst) != 0) {
        if (ok) e = errno;
        unlink(tmp);
        return mcp_err_set(err, e == ENOSPC ? MCP_STATUS_RESOURCE_EXHAUSTED : MCP_STATUS_IO_ERROR, "store: cannot write '%s': %s",
                           dst, strerror(e));
    }
    return fsync_dir(dir, err);
}

/* Reads a regular file of at most max bytes (NUL-terminated). */
static mcp_status read_bounded(const char *path, size_t max, char **out, size_t *len, mcp_err *err)
{
    *out = NULL;
    *len = 0;
    FILE *f;
    mcp_status st = mcp_file_open_regular(path, &f, err);
    if (st != MCP_STATUS_OK) return st;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 0 || (uint64_t)sb.st_size > max) {
        fclose(f);
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: '%s' is larger than %zu bytes", path, max);
    }
    char *buf = mcp_malloc((size_t)sb.st_size + 1);
    if (!buf) {
        fclose(f);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    }
    size_t got = fread(buf, 1, (size_t)sb.st_size, f);
    fclose(f);
    if (got != (size_t)sb.st_size) {
        mcp_free(buf);
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: short read of '%s'", path);
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return MCP_STATUS_OK;
}

/* ---- names ---- */

bool mcp__store_ref_valid(const char *ref)
{
    const char *colon = ref ? strchr(ref, ':') : NULL;
    if (!colon || colon == ref || strchr(colon + 1, ':')) return false;
    size_t nn = (size_t)(colon - ref), vn = strlen(colon + 1);
    if (nn > 256 || vn == 0 || vn > 128) return false;
    char name[257];
    memcpy(name, ref, nn);
    name[nn] = '\0';
    if (!mcp__desc_name_valid(name)) return false;
    for (const char *p = colon + 1; *p; p++) {
        char c = *p;
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                  c == '-' || c == '+';
        if (!ok) return false;
    }
    return strcmp(colon + 1, ".") != 0 && strcmp(colon + 1, "..") != 0;
}

bool mcp__store_title_valid(const char *t)
{
    size_t n = t ? strlen(t) : 0;
    if (n == 0 || n > 1024 || t[0] == '/' || t[n - 1] == '/') return false;
    const char *seg = t;
    for (const char *p = t;; p++) {
        if (*p == '/' || *p == '\0') {
            size_t len = (size_t)(p - seg);
            if (len == 0 || len > 255 || (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
                return false;
            if (*p == '\0') break;
            seg = p + 1;
        } else if ((unsigned char)*p < 0x20 || *p == '\\' || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

/* ---- parsing what the store holds (also the fuzz targets' entry points) ---- */

static const char *str_member(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A content descriptor {mediaType, digest, size}; where names the field. */
static mcp_status parse_content(json_t *o, const char *where, mcp_store_blob *b, const char **media, mcp_err *err)
{
    if (!json_is_object(o)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: expected an object", where);
    const char *mt = str_member(o, "mediaType"), *dg = str_member(o, "digest");
    json_t *size = json_object_get(o, "size");
    if (!mt) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s.mediaType: expected a string", where);
    if (!dg || !mcp_digest_valid(dg))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s.digest: expected \"sha256:\" and 64 lowercase hex digits", where);
    if (!json_is_integer(size) || json_integer_value(size) < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s.size: expected a non-negative integer", where);
    snprintf(b->digest, sizeof b->digest, "%s", dg);
    b->size = (int64_t)json_integer_value(size);
    if (media) *media = mt;
    return MCP_STATUS_OK;
}

static json_t *parse_json(const char *text, size_t len, const char *what, mcp_err *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s:%d:%d: %s", what, je.line, je.column, je.text);
    return root;
}

mcp_status mcp__store_parse_index(const char *text, size_t len, json_t **out, mcp_err *err)
{
    *out = NULL;
    json_t *root = parse_json(text, len, "index.json", err);
    if (!root) return MCP_STATUS_INVALID_ARGUMENT;
    mcp_status st = MCP_STATUS_OK;
    json_t *sv = json_object_get(root, "schemaVersion"), *m = json_object_get(root, "manifests");
    if (!json_is_object(root)) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "index.json: expected an object");
    else if (!json_is_integer(sv) || json_integer_value(sv) != 2)
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "index.json: schemaVersion: expected 2");
    else if (!json_is_array(m)) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "index.json: manifests: expected an array");
    for (size_t i = 0; st == MCP_STATUS_OK && i < json_array_size(m); i++) {
        char where[64];
        snprintf(where, sizeof where, "index.json: manifests[%zu]", i);
        mcp_store_blob b;
        json_t *e = json_array_get(m, i);
        st = parse_content(e, where, &b, NULL, err);
        json_t *ann = st == MCP_STATUS_OK ? json_object_get(e, "annotations") : NULL;
        if (st == MCP_STATUS_OK && ann && !json_is_object(ann))
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s.annotations: expected an object", where);
        const char *ref = ann ? str_member(ann, MCP_STORE_REF_ANNOTATION) : NULL;
        /* Entries without our kind of name are another tool's: kept as they are. */
        if (st == MCP_STATUS_OK && ref && strchr(ref, ':') && !mcp__store_ref_valid(ref))
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: name '%.200s' is not NAME:VERSION", where, ref);
        for (size_t k = 0; st == MCP_STATUS_OK && ref && k < i; k++) {
            json_t *ka = json_object_get(json_array_get(m, k), "annotations");
            const char *other = ka ? str_member(ka, MCP_STORE_REF_ANNOTATION) : NULL;
            if (other && !strcmp(other, ref))
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: name '%.200s' is also manifests[%zu]", where, ref, k);
        }
    }
    if (st != MCP_STATUS_OK) {
        json_decref(root);
        return st;
    }
    *out = root;
    return MCP_STATUS_OK;
}

void mcp_store_manifest_free(mcp_store_manifest *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_files; i++) mcp_free(m->files[i].title);
    mcp_free(m->files);
    mcp_free(m->name);
    mcp_free(m->version);
    mcp_free(m->io_signature);
    mcp_free(m->fingerprint);
    mcp_free(m);
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s) return NULL;
    char *d = mcp_strdup(s);
    if (!d) *oom = true;
    return d;
}

mcp_status mcp__store_parse_manifest(const char *text, size_t len, mcp_store_manifest **out, mcp_err *err)
{
    *out = NULL;
    json_t *root = parse_json(text, len, "manifest", err);
    if (!root) return MCP_STATUS_INVALID_ARGUMENT;
    mcp_store_manifest *m = mcp_calloc(1, sizeof *m);
    mcp_status st = m ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    json_t *sv = json_object_get(root, "schemaVersion"), *layers = json_object_get(root, "layers");
    json_t *ann = json_object_get(root, "annotations");
    const char *mt = str_member(root, "mediaType"), *at = str_member(root, "artifactType");
    if (st == MCP_STATUS_OK && !json_is_object(root)) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest: expected an object");
    else if (st == MCP_STATUS_OK && (!json_is_integer(sv) || json_integer_value(sv) != 2))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest: schemaVersion: expected 2");
    else if (st == MCP_STATUS_OK && (!mt || strcmp(mt, MCP_STORE_MANIFEST_TYPE)))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest: mediaType: expected %s", MCP_STORE_MANIFEST_TYPE);
    else if (st == MCP_STATUS_OK && (!at || strcmp(at, MCP_STORE_ARTIFACT_TYPE)))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest: artifactType: expected %s (not a model of this server)",
                         MCP_STORE_ARTIFACT_TYPE);
    const char *cmt = NULL;
    if (st == MCP_STATUS_OK) st = parse_content(json_object_get(root, "config"), "manifest: config", &m->config, &cmt, err);
    if (st == MCP_STATUS_OK) snprintf(m->config_media_type, sizeof m->config_media_type, "%s", cmt);
    if (st == MCP_STATUS_OK && !json_is_object(ann))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest: annotations: expected an object");
    bool oom = false;
    if (st == MCP_STATUS_OK) {
        const char *name = str_member(ann, MCP_STORE_NAME_ANNOTATION), *version = str_member(ann, MCP_STORE_VERSION_ANNOTATION);
        char ref[512];
        snprintf(ref, sizeof ref, "%s:%s", name ? name : "", version ? version : "");
        if (!name || !version || !mcp__store_ref_valid(ref))
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest: annotations %s and %s: expected a model name and version",
                             MCP_STORE_NAME_ANNOTATION, MCP_STORE_VERSION_ANNOTATION);
        m->name = dup_or_null(name, &oom);
        m->version = dup_or_null(version, &oom);
        m->io_signature = dup_or_null(str_member(ann, MCP_STORE_IO_ANNOTATION), &oom);
        m->fingerprint = dup_or_null(str_member(ann, MCP_STORE_FINGERPRINT_ANNOTATION), &oom);
    }
    if (st == MCP_STATUS_OK && (!json_is_array(layers) || json_array_size(layers) > MAX_MANIFEST_LAYERS))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest: layers: expected an array of at most %d", MAX_MANIFEST_LAYERS);
    if (st == MCP_STATUS_OK) {
        m->files = mcp_calloc(json_array_size(layers) + 1, sizeof *m->files);
        if (!m->files) oom = true;
    }
    for (size_t i = 0; st == MCP_STATUS_OK && !oom && i < json_array_size(layers); i++) {
        char where[64];
        snprintf(where, sizeof where, "manifest: layers[%zu]", i);
        json_t *l = json_array_get(layers, i);
        mcp_store_file *f = &m->files[m->n_files];
        st = parse_content(l, where, &f->blob, NULL, err);
        json_t *la = st == MCP_STATUS_OK ? json_object_get(l, "annotations") : NULL;
        const char *title = json_is_object(la) ? str_member(la, MCP_STORE_TITLE_ANNOTATION) : NULL;
        if (st == MCP_STATUS_OK && !mcp__store_title_valid(title))
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                             "%s.annotations.%s: expected a relative path without '.' or '..' segments", where,
                             MCP_STORE_TITLE_ANNOTATION);
        for (int k = 0; st == MCP_STATUS_OK && k < m->n_files; k++)
            if (!strcmp(m->files[k].title, title))
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: file '%.200s' is also layers[%d]", where, title, k);
        if (st == MCP_STATUS_OK) {
            f->title = dup_or_null(title, &oom);
            m->n_files++;
        }
    }
    if (st == MCP_STATUS_OK && oom) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    json_decref(root);
    if (st != MCP_STATUS_OK) {
        mcp_store_manifest_free(m);
        return st;
    }
    *out = m;
    return MCP_STATUS_OK;
}

/* ---- open, lock ---- */

static void lock_store(mcp_store *s, bool exclusive)
{
    pthread_mutex_lock(&s->mu);
    while (flock(s->lock_fd, exclusive ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {
    }
}

static void unlock_store(mcp_store *s)
{
    flock(s->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&s->mu);
}

/* Temporary files a crash left behind (lock held exclusively). */
static void remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, ".tmp-", 5)) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

mcp_status mcp_store_open(const char *dir, mcp_store **out, mcp_err *err)
{
    *out = NULL;
    mcp_status st = make_dir(dir, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_store *s = mcp_calloc(1, sizeof *s);
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    s->lock_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    char path[PATH_MAX + 32];
    char real[PATH_MAX];
    if (!realpath(dir, real)) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot resolve '%s': %s", dir, strerror(errno));
    else if (strlen(real) >= ROOT_MAX) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: path '%.200s...' is too long", real);
    else memcpy(s->root, real, strlen(real) + 1);
    if (st == MCP_STATUS_OK) {
        snprintf(path, sizeof path, "%s/.lock", s->root);
        s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (s->lock_fd < 0) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot open '%s': %s", path, strerror(errno));
    }
    if (st != MCP_STATUS_OK) {
        mcp_store_close(s);
        return st;
    }
    lock_store(s, true);
    snprintf(path, sizeof path, "%s/blobs", s->root);
    st = make_dir(path, err);
    snprintf(s->blobs, sizeof s->blobs, "%s/blobs/sha256", s->root);
    if (st == MCP_STATUS_OK) st = make_dir(s->blobs, err);
    char *text = NULL;
    size_t len = 0;
    if (st == MCP_STATUS_OK) {
        snprintf(path, sizeof path, "%s/oci-layout", s->root);
        mcp_status r = read_bounded(path, 4096, &text, &len, err);
        if (r == MCP_STATUS_NOT_FOUND) {
            st = write_atomic(s->root, "oci-layout", LAYOUT_TEXT, strlen(LAYOUT_TEXT), err);
        } else if (r != MCP_STATUS_OK) {
            st = r;
        } else {
            json_t *lay = parse_json(text, len, "oci-layout", err);
            const char *v = lay ? str_member(lay, "imageLayoutVersion") : NULL;
            if (!lay) st = MCP_STATUS_INVALID_ARGUMENT;
            else if (!v || strcmp(v, "1.0.0"))
                st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "store: %s: imageLayoutVersion is not 1.0.0", path);
            json_decref(lay);
        }
        mcp_free(text);
    }
    if (st == MCP_STATUS_OK) {
        snprintf(path, sizeof path, "%s/index.json", s->root);
        struct stat sb;
        if (lstat(path, &sb) != 0 && errno == ENOENT) {
            const char *empty = "{\"schemaVersion\":2,\"manifests\":[]}";
            st = write_atomic(s->root, "index.json", empty, strlen(empty), err);
        }
    }
    if (st == MCP_STATUS_OK) {
        remove_stale_temps(s->root);
        remove_stale_temps(s->blobs);
        st = fsync_dir(s->blobs, err);
    }
    unlock_store(s);
    if (st != MCP_STATUS_OK) {
        mcp_store_close(s);
        return st;
    }
    *out = s;
    return MCP_STATUS_OK;
}

void mcp_store_close(mcp_store *s)
{
    if (!s) return;
    if (s->lock_fd >= 0) close(s->lock_fd);
    pthread_mutex_destroy(&s->mu);
    mcp_free(s);
}

const char *mcp_store_root(const mcp_store *s) { return s->root; }

/* ---- blobs ---- */

mcp_status mcp_store_blob_path(const mcp_store *s, const char *digest, char *path, size_t cap, mcp_err *err)
{
    if (!mcp_digest_valid(digest))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%.80s' is not a digest (\"sha256:\" and 64 lowercase hex digits)",
                           digest ? digest : "");
    if (snprintf(path, cap, "%s/%s", s->blobs, digest + 7) >= (int)cap)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: path too long");
    return MCP_STATUS_OK;
}

bool mcp_store_has_blob(const mcp_store *s, const char *digest)
{
    char path[PATH_MAX];
    char msg[64];
    mcp_err err = {msg, sizeof msg};
    struct stat sb;
    return mcp_store_blob_path(s, digest, path, sizeof path, &err) == MCP_STATUS_OK && lstat(path, &sb) == 0 &&
           S_ISREG(sb.st_mode);
}

/* A blob from a reader: into a temporary file while hashing, then named by
 * its digest (or dropped when that name exists: the same bytes). Lock held. */
typedef size_t (*read_fn)(void *src, uint8_t *buf, size_t cap, bool *failed);

static mcp_status put_blob(mcp_store *s, read_fn rd, void *src, const char *what, mcp_store_blob *out, mcp_err *err)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", s->blobs);
    int fd = mkstemp(tmp);
    if (fd < 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot create a file in '%s': %s", s->blobs, strerror(errno));
    fchmod(fd, 0440);
    mcp_sha256 h;
    mcp_status st = mcp_sha256_begin(&h, err);
    uint8_t *buf = mcp_malloc(1 << 20);
    if (st == MCP_STATUS_OK && !buf) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    int64_t total = 0;
    bool failed = false;
    int e = 0;
    while (st == MCP_STATUS_OK) {
        size_t n = rd(src, buf, 1 << 20, &failed);
        if (failed) {
            st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot read %s", what);
            break;
        }
        if (n == 0) break;
        mcp_sha256_update(&h, buf, n);
        total += (int64_t)n;
        if (!write_all(fd, buf, n)) {
            e = errno;
            st = mcp_err_set(err, e == ENOSPC ? MCP_STATUS_RESOURCE_EXHAUSTED : MCP_STATUS_IO_ERROR,
                             "store: cannot write a blob of %s: %s", what, strerror(e));
        }
    }
    mcp_free(buf);
    if (st == MCP_STATUS_OK && fsync(fd) != 0)
        st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot sync a blob of %s: %s", what, strerror(errno));
    if (close(fd) != 0 && st == MCP_STATUS_OK) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot close a blob of %s", what);
    if (st != MCP_STATUS_OK) {
        if (h.ctx) mcp_sha256_end(&h, out->digest);
        unlink(tmp);
        return st;
    }
    mcp_sha256_end(&h, out->digest);
    out->size = total;
    if (!out->digest[0]) st = mcp_err_set(err, MCP_STATUS_INTERNAL, "SHA-256 failed");
    if (st == MCP_STATUS_OK) st = mcp_store_blob_path(s, out->digest, dst, sizeof dst, err);
    struct stat sb;
    if (st == MCP_STATUS_OK && lstat(dst, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == total) {
        unlink(tmp); /* already stored: the same bytes have one name */
        return MCP_STATUS_OK;
    }
    if (st == MCP_STATUS_OK && rename(tmp, dst) != 0)
        st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot name blob %s: %s", out->digest, strerror(errno));
    if (st != MCP_STATUS_OK) {
        unlink(tmp);
        return st;
    }
    return fsync_dir(s->blobs, err);
}

typedef struct mem_src {
    const uint8_t *p;
    size_t left;
} mem_src;

static size_t read_mem(void *src, uint8_t *buf, size_t cap, bool *failed)
{
    mem_src *m = src;
    size_t n = m->left < cap ? m->left : cap;
    if (n) memcpy(buf, m->p, n);
    m->p += n;
    m->left -= n;
    return n;
}

static size_t read_file(void *src, uint8_t *buf, size_t cap, bool *failed)
{
    FILE *f = src;
    size_t n = fread(buf, 1, cap, f);
    if (n == 0 && ferror(f)) *failed = true;
    return n;
}

mcp_status mcp_store_put_bytes(mcp_store *s, const void *data, size_t len, mcp_store_blob *out, mcp_err *err)
{
    mem_src m = {data, len};
    lock_store(s, true);
    mcp_status st = put_blob(s, read_mem, &m, "bytes", out, err);
    unlock_store(s);
    return st;
}

mcp_status mcp_store_put_file(mcp_store *s, const char *path, mcp_store_blob *out, mcp_err *err)
{
    /* Stored already (the same model applied again): reading it once to
     * hash is cheaper than writing a copy that would be dropped. */
    char known[MCP_DIGEST_LEN + 1];
    int64_t size = 0;
    char blob[PATH_MAX];
    struct stat sb;
    if (mcp_sha256_file(path, known, &size, err) == MCP_STATUS_OK &&
        mcp_store_blob_path(s, known, blob, sizeof blob, err) == MCP_STATUS_OK && lstat(blob, &sb) == 0 &&
        S_ISREG(sb.st_mode) && sb.st_size == size) {
        snprintf(out->digest, sizeof out->digest, "%s", known);
        out->size = size;
        return MCP_STATUS_OK;
    }
    FILE *f;
    mcp_status st = mcp_file_open_regular(path, &f, err);
    if (st != MCP_STATUS_OK) return st;
    char what[PATH_MAX + 8];
    snprintf(what, sizeof what, "'%s'", path);
    lock_store(s, true);
    st = put_blob(s, read_file, f, what, out, err);
    unlock_store(s);
    fclose(f);
    return st;
}

/* ---- the index ---- */

static mcp_status load_index(mcp_store *s, json_t **out, mcp_err *err)
{
    char path[PATH_MAX + 16], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/index.json", s->root);
    mcp_status st = read_bounded(path, MAX_INDEX_BYTES, &text, &len, err);
    if (st != MCP_STATUS_OK) return st;
    st = mcp__store_parse_index(text, len, out, err);
    mcp_free(text);
    if (st != MCP_STATUS_OK) mcp_err_prefix(err, "store %s", s->root);
    return st;
}

static mcp_status save_index(mcp_store *s, json_t *index, mcp_err *err)
{
    char *text = json_dumps(index, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = write_atomic(s->root, "index.json", text, strlen(text), err);
    free(text);
    return st;
}

static int index_find(json_t *index, const char *ref)
{
    json_t *m = json_object_get(index, "manifests");
    for (size_t i = 0; i < json_array_size(m); i++) {
        json_t *ann = json_object_get(json_array_get(m, i), "annotations");
        const char *r = ann ? str_member(ann, MCP_STORE_REF_ANNOTATION) : NULL;
        if (r && !strcmp(r, ref)) return (int)i;
    }
    return -1;
}

static mcp_status check_ref(const char *ref, mcp_err *err)
{
    if (mcp__store_ref_valid(ref)) return MCP_STATUS_OK;
    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                       "'%.200s' is not NAME:VERSION (a model name, then letters, digits, '_', '.', '+' or '-')", ref ? ref : "");
}

static mcp_status tag_locked(mcp_store *s, const char *ref, const mcp_store_blob *manifest, mcp_err *err)
{
    json_t *index;
    mcp_status st = load_index(s, &index, err);
    if (st != MCP_STATUS_OK) return st;
    json_t *e = json_pack("{s:s, s:s, s:I, s:{s:s}}", "mediaType", MCP_STORE_MANIFEST_TYPE, "digest", manifest->digest, "size",
                          (json_int_t)manifest->size, "annotations", MCP_STORE_REF_ANNOTATION, ref);
    json_t *list = json_object_get(index, "manifests");
    int at = index_find(index, ref);
    if (!e) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    else if (at >= 0) json_array_set_new(list, (size_t)at, e);
    else json_array_append_new(list, e);
    if (st == MCP_STATUS_OK) st = save_index(s, index, err);
    json_decref(index);
    return st;
}

mcp_status mcp_store_tag(mcp_store *s, const char *ref, const mcp_store_blob *manifest, mcp_err *err)
{
    mcp_status st = check_ref(ref, err);
    if (st != MCP_STATUS_OK) return st;
    lock_store(s, true);
    if (!mcp_store_has_blob(s, manifest->digest))
        st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "store: no blob %s to name %s", manifest->digest, ref);
    else st = tag_locked(s, ref, manifest, err);
    unlock_store(s);
    return st;
}

mcp_status mcp_store_untag(mcp_store *s, const char *ref, mcp_err *err)
{
    mcp_status st = check_ref(ref, err);
    if (st != MCP_STATUS_OK) return st;
    lock_store(s, true);
    json_t *index;
    st = load_index(s, &index, err);
    if (st == MCP_STATUS_OK) {
        int at = index_find(index, ref);
        if (at < 0) st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "store: no version named %s", ref);
        else {
            json_array_remove(json_object_get(index, "manifests"), (size_t)at);
            st = save_index(s, index, err);
        }
        json_decref(index);
    }
    unlock_store(s);
    return st;
}

static mcp_status resolve_locked(mcp_store *s, const char *ref, mcp_store_blob *manifest, mcp_err *err)
{
    json_t *index;
    mcp_status st = load_index(s, &index, err);
    if (st != MCP_STATUS_OK) return st;
    int at = index_find(index, ref);
    if (at < 0) st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "store: no version named %s", ref);
    else st = parse_content(json_array_get(json_object_get(index, "manifests"), (size_t)at), "index.json", manifest, NULL, err);
    json_decref(index);
    return st;
}

mcp_status mcp_store_resolve(mcp_store *s, const char *ref, mcp_store_blob *manifest, mcp_err *err)
{
    mcp_status st = check_ref(ref, err);
    if (st != MCP_STATUS_OK) return st;
    lock_store(s, false);
    st = resolve_locked(s, ref, manifest, err);
    unlock_store(s);
    return st;
}

mcp_status mcp_store_list(mcp_store *s, char ***refs, int *n, mcp_err *err)
{
    *refs = NULL;
    *n = 0;
    lock_store(s, false);
    json_t *index;
    mcp_status st = load_index(s, &index, err);
    unlock_store(s);
    if (st != MCP_STATUS_OK) return st;
    json_t *m = json_object_get(index, "manifests");
    char **out = mcp_calloc(json_array_size(m) + 1, sizeof *out);
    if (!out) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    int count = 0;
    for (size_t i = 0; st == MCP_STATUS_OK && i < json_array_size(m); i++) {
        json_t *ann = json_object_get(json_array_get(m, i), "annotations");
        const char *r = ann ? str_member(ann, MCP_STORE_REF_ANNOTATION) : NULL;
        if (!r || !mcp__store_ref_valid(r)) continue;
        if (!(out[count] = mcp_strdup(r))) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        else count++;
    }
    json_decref(index);
    if (st != MCP_STATUS_OK) {
        mcp_store_refs_free(out, count);
        return st;
    }
    *refs = out;
    *n = count;
    return MCP_STATUS_OK;
}

void mcp_store_refs_free(char **refs, int n)
{
    for (int i = 0; refs && i < n; i++) mcp_free(refs[i]);
    mcp_free(refs);
}

/* ---- versions ---- */

static mcp_status read_manifest_blob(const mcp_store *s, const mcp_store_blob *b, mcp_store_manifest **out, mcp_err *err)
{
    char path[PATH_MAX], *text;
    size_t len;
    mcp_status st = mcp_store_blob_path(s, b->digest, path, sizeof path, err);
    if (st == MCP_STATUS_OK) st = read_bounded(path, MAX_MANIFEST_BYTES, &text, &len, err);
    if (st == MCP_STATUS_NOT_FOUND) return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "store: manifest %s is missing", b->digest);
    if (st != MCP_STATUS_OK) return st;
    /* What the name promises, the bytes must be. */
    char got[MCP_DIGEST_LEN + 1];
    st = mcp_sha256_bytes(text, len, got, err);
    if (st == MCP_STATUS_OK && strcmp(got, b->digest))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: manifest %s does not match its digest (it is %s)", b->digest, got);
    if (st == MCP_STATUS_OK) st = mcp__store_parse_manifest(text, len, out, err);
    if (st == MCP_STATUS_OK) (*out)->manifest = *b;
    mcp_free(text);
    return st;
}

mcp_status mcp_store_get_version(mcp_store *s, const char *ref, mcp_store_manifest **out, mcp_err *err)
{
    *out = NULL;
    mcp_status st = check_ref(ref, err);
    if (st != MCP_STATUS_OK) return st;
    lock_store(s, false);
    mcp_store_blob b;
    st = resolve_locked(s, ref, &b, err);
    if (st == MCP_STATUS_OK) st = read_manifest_blob(s, &b, out, err);
    unlock_store(s);
    return st;
}

mcp_status mcp_store_put_version(mcp_store *s, const mcp_store_version_in *in, mcp_store_manifest **out, mcp_err *err)
{
    *out = NULL;
    char ref[512];
    snprintf(ref, sizeof ref, "%s:%s", in->name ? in->name : "", in->version ? in->version : "");
    mcp_status st = check_ref(ref, err);
    if (st != MCP_STATUS_OK) return st;
    if (in->n_files < 0 || in->n_files > MAX_MANIFEST_LAYERS)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a version has at most %d files", MAX_MANIFEST_LAYERS);
    for (int i = 0; i < in->n_files; i++) {
        if (!mcp__store_title_valid(in->files[i].title))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "file '%.200s': not a relative path inside the model's folder",
                               in->files[i].title ? in->files[i].title : "");
        for (int k = 0; k < i; k++)
            if (!strcmp(in->files[k].title, in->files[i].title))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "file '%.200s' is given twice", in->files[i].title);
    }
    /* Blobs first, the manifest next, its name last: a crash at any point
     * leaves the index naming only complete versions. */
    mcp_store_blob config;
    st = mcp_store_put_bytes(s, in->descriptor, in->descriptor_len, &config, err);
    if (st != MCP_STATUS_OK) return st;
    json_t *layers = json_array();
    for (int i = 0; st == MCP_STATUS_OK && i < in->n_files; i++) {
        mcp_store_blob b;
        st = mcp_store_put_file(s, in->files[i].path, &b, err);
        if (st != MCP_STATUS_OK) {
            mcp_err_prefix(err, "file '%s'", in->files[i].title);
            break;
        }
        json_t *l = json_pack("{s:s, s:s, s:I, s:{s:s}}", "mediaType", MCP_STORE_FILE_TYPE, "digest", b.digest, "size",
                              (json_int_t)b.size, "annotations", MCP_STORE_TITLE_ANNOTATION, in->files[i].title);
        if (!l || json_array_append_new(layers, l) != 0) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    json_t *ann = json_pack("{s:s, s:s}", MCP_STORE_NAME_ANNOTATION, in->name, MCP_STORE_VERSION_ANNOTATION, in->version);
    if (ann && in->io_signature) json_object_set_new(ann, MCP_STORE_IO_ANNOTATION, json_string(in->io_signature));
    if (ann && in->fingerprint) json_object_set_new(ann, MCP_STORE_FINGERPRINT_ANNOTATION, json_string(in->fingerprint));
    json_t *man = NULL;
    if (st == MCP_STATUS_OK && layers && ann) {
        man = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:I}, s:O, s:O}", "schemaVersion", 2, "mediaType", MCP_STORE_MANIFEST_TYPE,
                        "artifactType", MCP_STORE_ARTIFACT_TYPE, "config", "mediaType",
                        in->descriptor_media_type ? in->descriptor_media_type : MCP_STORE_DESCRIPTOR_TYPE, "digest",
                        config.digest, "size", (json_int_t)config.size, "layers", layers, "annotations", ann);
        if (!man) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else if (st == MCP_STATUS_OK) {
        st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    json_decref(layers);
    json_decref(ann);
    /* Sorted keys: the same version gives the same manifest bytes. */
    char *text = man ? json_dumps(man, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(man);
    if (st == MCP_STATUS_OK && !text) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_store_blob mb;
    if (st == MCP_STATUS_OK) {
        lock_store(s, true);
        mem_src m = {(const uint8_t *)text, strlen(text)};
        st = put_blob(s, read_mem, &m, "a manifest", &mb, err);
        if (st == MCP_STATUS_OK) st = tag_locked(s, ref, &mb, err);
        if (st == MCP_STATUS_OK) st = read_manifest_blob(s, &mb, out, err);
        unlock_store(s);
    }
    free(text);
    return st;
}

mcp_status mcp_store_read_manifest(mcp_store *s, const char *digest, mcp_store_manifest **out, mcp_err *err)
{
    *out = NULL;
    mcp_store_blob b = {{0}, 0};
    if (!mcp_digest_valid(digest)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%.80s' is not a digest", digest);
    snprintf(b.digest, sizeof b.digest, "%s", digest);
    lock_store(s, false);
    mcp_status st = read_manifest_blob(s, &b, out, err);
    unlock_store(s);
    return st;
}

/* mkdir -p of the folders above path (inside a folder we made). */
static bool make_parents(char *path)
{
    for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        bool ok = mkdir(path, 0750) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return true;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[PATH_MAX];
            if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) remove_tree(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

mcp_status mcp_store_checkout(mcp_store *s, const mcp_store_manifest *m, char *dir, size_t cap, mcp_err *err)
{
    char top[ROOT_MAX + 32];
    snprintf(top, sizeof top, "%s/checkouts", s->root);
    if (snprintf(dir, cap, "%s/%s", top, m->manifest.digest + 7) >= (int)cap)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: path too long");
    lock_store(s, true);
    mcp_status st = make_dir(top, err);
    struct stat sb;
    if (st == MCP_STATUS_OK && lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        unlock_store(s);
        return MCP_STATUS_OK; /* checked out before: the same bytes */
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", top);
    if (st == MCP_STATUS_OK && !mkdtemp(tmp)) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot create a folder in %s", top);
    for (int i = 0; st == MCP_STATUS_OK && i < m->n_files; i++) {
        /* Titles were checked when the manifest was read: relative, no '..'. */
        char blob[PATH_MAX], dst[PATH_MAX];
        st = mcp_store_blob_path(s, m->files[i].blob.digest, blob, sizeof blob, err);
        if (st == MCP_STATUS_OK && snprintf(dst, sizeof dst, "%s/%s", tmp, m->files[i].title) >= (int)sizeof dst)
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "store: path too long for '%s'", m->files[i].title);
        if (st == MCP_STATUS_OK && (!make_parents(dst) || link(blob, dst) != 0))
            st = mcp_err_set(err, errno == ENOENT ? MCP_STATUS_NOT_FOUND : MCP_STATUS_IO_ERROR,
                             "store: cannot check out '%s' (blob %s): %s", m->files[i].title, m->files[i].blob.digest,
                             strerror(errno));
    }
    if (st == MCP_STATUS_OK && rename(tmp, dir) != 0) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot name %s: %s", dir, strerror(errno));
    if (st != MCP_STATUS_OK) remove_tree(tmp);
    unlock_store(s);
    return st;
}

/* ---- verify and collect ---- */

/* Every manifest the index names (lock held): their digests into marks. */
typedef struct digest_set {
    char (*d)[MCP_DIGEST_LEN + 1];
    int n, cap;
} digest_set;

static bool set_add(digest_set *set, const char *digest)
{
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->d[i], digest)) return true;
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 64;
        void *p = mcp_realloc(set->d, (size_t)cap * sizeof *set->d);
        if (!p) return false;
        set->d = p;
        set->cap = cap;
    }
    snprintf(set->d[set->n++], MCP_DIGEST_LEN + 1, "%s", digest);
    return true;
}

static bool set_has(const digest_set *set, const char *digest)
{
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->d[i], digest)) return true;
    return false;
}

/* Marks the index's manifests and, for ours, their config and layers.
 * Problems (a missing or damaged manifest, a missing blob) go to report. */
static mcp_status mark_live(mcp_store *s, digest_set *live, mcp_store_report *report, mcp_err *err)
{
    json_t *index;
    mcp_status st = load_index(s, &index, err);
    if (st != MCP_STATUS_OK) return st;
    json_t *list = json_object_get(index, "manifests");
    for (size_t i = 0; st == MCP_STATUS_OK && i < json_array_size(list); i++) {
        mcp_store_blob b;
        st = parse_content(json_array_get(list, i), "index.json", &b, NULL, err);
        if (st != MCP_STATUS_OK) break;
        if (!set_add(live, b.digest)) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        mcp_store_manifest *m = NULL;
        char msg[512];
        mcp_err merr = {msg, sizeof msg};
        if (st == MCP_STATUS_OK && read_manifest_blob(s, &b, &m, &merr) != MCP_STATUS_OK) {
            if (report) {
                report->problems++;
                if (!report->first_problem[0]) snprintf(report->first_problem, sizeof report->first_problem, "%s", msg);
            }
            continue;
        }
        if (st == MCP_STATUS_OK && !set_add(live, m->config.digest)) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (int k = 0; st == MCP_STATUS_OK && k < m->n_files; k++)
            if (!set_add(live, m->files[k].blob.digest)) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (report && m) report->versions++;
        mcp_store_manifest_free(m);
    }
    json_decref(index);
    return st;
}

mcp_status mcp_store_verify(mcp_store *s, mcp_store_report *report, mcp_err *err)
{
    memset(report, 0, sizeof *report);
    lock_store(s, false);
    digest_set live = {0};
    mcp_status st = mark_live(s, &live, report, err);
    DIR *d = st == MCP_STATUS_OK ? opendir(s->blobs) : NULL;
    if (st == MCP_STATUS_OK && !d) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot list '%s': %s", s->blobs, strerror(errno));
    digest_set present = {0};
    struct dirent *e;
    while (st == MCP_STATUS_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char digest[MCP_DIGEST_LEN + 8], path[PATH_MAX], got[MCP_DIGEST_LEN + 1];
        snprintf(digest, sizeof digest, "sha256:%.70s", e->d_name);
        bool named = strlen(e->d_name) == 64 && mcp_digest_valid(digest);
        snprintf(path, sizeof path, "%s/%.255s", s->blobs, e->d_name);
        char msg[256];
        mcp_err ferr = {msg, sizeof msg};
        if (!named || mcp_sha256_file(path, got, NULL, &ferr) != MCP_STATUS_OK || strcmp(got, digest)) {
            report->problems++;
            if (!report->first_problem[0])
                snprintf(report->first_problem, sizeof report->first_problem, "blob %.80s: %s", e->d_name,
                         !named ? "not named by a digest" : got[0] ? "its bytes do not match its name" : msg);
            continue;
        }
        report->blobs++;
        if (!set_add(&present, digest)) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (d) closedir(d);
    for (int i = 0; st == MCP_STATUS_OK && i < live.n; i++)
        if (!set_has(&present, live.d[i])) {
            report->problems++;
            if (!report->first_problem[0])
                snprintf(report->first_problem, sizeof report->first_problem, "blob %s is referenced but missing or damaged", live.d[i]);
        }
    for (int i = 0; st == MCP_STATUS_OK && i < present.n; i++)
        if (!set_has(&live, present.d[i])) report->unreferenced++;
    unlock_store(s);
    mcp_free(live.d);
    mcp_free(present.d);
    return st;
}

mcp_status mcp_store_collect(mcp_store *s, int64_t *removed, int64_t *bytes, mcp_err *err)
{
    *removed = 0;
    *bytes = 0;
    lock_store(s, true);
    digest_set live = {0};
    mcp_store_report report = {0};
    mcp_status st = mark_live(s, &live, &report, err);
    /* A manifest that cannot be read hides what it references: nothing is
     * removed rather than something still in use. */
    if (st == MCP_STATUS_OK && report.problems)
        st = mcp_err_set(err, MCP_STATUS_UNAVAILABLE, "store: not collecting while the store has problems: %s",
                         report.first_problem);
    DIR *d = st == MCP_STATUS_OK ? opendir(s->blobs) : NULL;
    if (st == MCP_STATUS_OK && !d) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "store: cannot list '%s': %s", s->blobs, strerror(errno));
    struct dirent *e;
    while (st == MCP_STATUS_OK && (e = readdir(d))) {
        char digest[MCP_DIGEST_LEN + 8];
        snprintf(digest, sizeof digest, "sha256:%.70s", e->d_name);
        if (strlen(e->d_name) != 64 || !mcp_digest_valid(digest) || set_has(&live, digest)) continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && unlinkat(dirfd(d), e->d_name, 0) == 0) {
            (*removed)++;
            *bytes += sb.st_size;
        }
    }
    if (d) closedir(d);
    if (st == MCP_STATUS_OK && *removed) st = fsync_dir(s->blobs, err);
    /* Checkouts of versions no longer named go too (their hard links
     * would keep the collected bytes on disk). */
    char top[ROOT_MAX + 32];
    snprintf(top, sizeof top, "%s/checkouts", s->root);
    DIR *c = st == MCP_STATUS_OK ? opendir(top) : NULL;
    while (c && (e = readdir(c))) {
        char digest[MCP_DIGEST_LEN + 8], path[PATH_MAX];
        snprintf(digest, sizeof digest, "sha256:%.70s", e->d_name);
        bool stale_temp = !strncmp(e->d_name, ".tmp-", 5);
        if (!stale_temp && (strlen(e->d_name) != 64 || !mcp_digest_valid(digest) || set_has(&live, digest))) continue;
        if (snprintf(path, sizeof path, "%s/%s", top, e->d_name) >= (int)sizeof path) continue;
        remove_tree(path);
    }
    if (c) closedir(c);
    unlock_store(s);
    mcp_free(live.d);
    return st;
}

/* ---- copying versions between stores (push / pull) ---- */

static mcp_status copy_blob(mcp_store *from, mcp_store *to, const mcp_store_blob *b, mcp_err *err)
{
    if (mcp_store_has_blob(to, b->digest)) return MCP_STATUS_OK;
    char path[PATH_MAX];
    mcp_status st = mcp_store_blob_path(from, b->digest, path, sizeof path, err);
    mcp_store_blob got;
    if (st == MCP_STATUS_OK) st = mcp_store_put_file(to, path, &got, err);
    if (st == MCP_STATUS_NOT_FOUND) return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "blob %s is missing", b->digest);
    if (st != MCP_STATUS_OK) return st;
    /* The copy is stored by its own digest: a damaged source is caught here. */
    if (strcmp(got.digest, b->digest) || got.size != b->size)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "blob %s: its bytes do not match its name (they are %s, %lld bytes)",
                           b->digest, got.digest, (long long)got.size);
    return MCP_STATUS_OK;
}

mcp_status mcp_store_copy(mcp_store *from, mcp_store *to, const char *ref, mcp_err *err)
{
    mcp_store_manifest *m;
    mcp_status st = mcp_store_get_version(from, ref, &m, err);
    if (st != MCP_STATUS_OK) return st;
    char want[512];
    snprintf(want, sizeof want, "%s:%s", m->name, m->version);
    if (strcmp(want, ref))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s names a manifest of %s", ref, want);
    if (st == MCP_STATUS_OK) st = copy_blob(from, to, &m->config, err);
    for (int i = 0; st == MCP_STATUS_OK && i < m->n_files; i++) st = copy_blob(from, to, &m->files[i].blob, err);
    if (st == MCP_STATUS_OK) st = copy_blob(from, to, &m->manifest, err);
    if (st == MCP_STATUS_OK) st = mcp_store_tag(to, ref, &m->manifest, err);
    mcp_store_manifest_free(m);
    return st;
}
