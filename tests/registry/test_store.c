/*
 * The model store on a real folder: the OCI layout it creates, blobs named
 * by their SHA-256 (checked against known digests), the same bytes stored
 * once, versions as manifests round-tripped, collection of unreferenced
 * blobs, verification that finds damage, leftovers of a crash removed,
 * hostile index and manifest contents refused naming the field, copies
 * between stores (push / pull) that check every blob, and two processes
 * writing one store at once without losing a version.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "registry/store_util.h"
#include "test_util.h"

static char msg[1024];
static mcp_err err = {msg, sizeof msg};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        TU_FAIL_AT(__FILE__, __LINE__, "cannot write %s", path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    uint8_t *data;
    size_t len;
    char m[256];
    mcp_err e = {m, sizeof m};
    if (mcp_file_read(path, &data, &len, &e) != MCP_STATUS_OK) return NULL;
    char *s = mcp_malloc(len + 1);
    memcpy(s, data, len);
    s[len] = '\0';
    mcp_free(data);
    return s;
}

/* Names in dir that do not start with '.'; with_dots counts those too. */
static int count_entries(const char *dir, bool with_dots)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (with_dots || e->d_name[0] != '.')) n++;
    closedir(d);
    return n;
}


static void blobs_dir(const char *store, char *out, size_t cap) { snprintf(out, cap, "%s/blobs/sha256", store); }

static void test_layout_and_blobs(void)
{
    char dir[1024], path[2048], blobs[4096];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "store") == 0);
    mcp_store *s;
    TU_REQUIRE_OK(mcp_store_open(dir, &s, &err), msg);
    char *layout = read_text(tu_path(path, sizeof path, dir, "oci-layout"));
    TU_CHECK_STR(layout, "{\"imageLayoutVersion\":\"1.0.0\"}");
    mcp_free(layout);
    char *index = read_text(tu_path(path, sizeof path, dir, "index.json"));
    TU_CHECK_CONTAINS(index, "\"schemaVersion\":2");
    mcp_free(index);

    /* Known SHA-256 values: "hello" and the empty string. */
    mcp_store_blob b, again, empty;
    TU_REQUIRE_OK(mcp_store_put_bytes(s, "hello", 5, &b, &err), msg);
    TU_CHECK_STR(b.digest, "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    TU_CHECK_INT(b.size, 5);
    TU_REQUIRE_OK(mcp_store_put_bytes(s, "", 0, &empty, &err), msg);
    TU_CHECK_STR(empty.digest, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    TU_REQUIRE_OK(mcp_store_blob_path(s, b.digest, path, sizeof path, &err), msg);
    char *text = read_text(path);
    TU_CHECK_STR(text, "hello");
    mcp_free(text);
    struct stat sb;
    TU_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0222) == 0); /* blobs are read-only */

    /* The same bytes are stored once, from memory or from a file. */
    char src[2048];
    write_file(tu_path(src, sizeof src, dir, "hello.txt"), "hello");
    TU_REQUIRE_OK(mcp_store_put_file(s, src, &again, &err), msg);
    TU_CHECK_STR(again.digest, b.digest);
    blobs_dir(dir, blobs, sizeof blobs);
    TU_CHECK_INT(count_entries(blobs, true), 2);
    TU_CHECK(mcp_store_has_blob(s, b.digest));

    /* Digests are checked before they become paths. */
    TU_CHECK_STATUS(mcp_store_blob_path(s, "sha256:../../etc/passwd", path, sizeof path, &err), MCP_STATUS_INVALID_ARGUMENT,
                    msg);
    TU_CHECK_CONTAINS(msg, "is not a digest");
    TU_CHECK(!mcp_store_has_blob(s, "sha256:2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824"));
    TU_CHECK(!mcp_store_has_blob(s, "md5:abc"));
    /* A FIFO is never read (it would block). */
    char fifo[2048];
    tu_path(fifo, sizeof fifo, dir, "fifo");
    TU_REQUIRE(mkfifo(fifo, 0600) == 0);
    TU_CHECK_STATUS(mcp_store_put_file(s, fifo, &again, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "not a regular file");
    mcp_store_close(s);
    tu_remove_tree(dir);
}

/* A model folder with a model and a labels file in a subfolder. */
static void make_model(const char *dir, const char *model_text, char *model, char *labels, size_t cap)
{
    char sub[2048];
    snprintf(model, cap, "%s/model.onnx", dir);
    write_file(model, model_text);
    snprintf(sub, sizeof sub, "%s/meta", dir);
    mkdir(sub, 0750);
    snprintf(labels, cap, "%s/meta/labels.txt", dir);
    write_file(labels, "cat\ndog\n");
}

static mcp_status put(mcp_store *s, const char *name, const char *version, const char *model, const char *labels,
                      mcp_store_manifest **m)
{
    mcp_store_version_file files[2] = {{"model.onnx", model}, {"meta/labels.txt", labels}};
    char desc[256];
    snprintf(desc, sizeof desc, "name: %s\nversion: %s\npath: model.onnx\n", name, version);
    mcp_store_version_in in = {.name = name, .version = version, .descriptor = desc, .descriptor_len = strlen(desc),
                               .files = files, .n_files = labels ? 2 : 1,
                               .io_signature = "{\"inputs\":[[\"x\",\"FP32\",[1,4]]]}"};
    return mcp_store_put_version(s, &in, m, &err);
}

static void test_versions(void)
{
    char dir[1024], store[2048], model[2048], labels[2048], model2[2048], blobs[4096];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "store") == 0);
    tu_path(store, sizeof store, dir, "store");
    mcp_store *s;
    TU_REQUIRE_OK(mcp_store_open(store, &s, &err), msg);
    make_model(dir, "weights-one", model, labels, sizeof model);
    tu_path(model2, sizeof model2, dir, "model2.onnx");
    write_file(model2, "weights-two");

    mcp_store_manifest *a, *b, *got;
    TU_REQUIRE_OK(put(s, "digits", "v1.0.0", model, labels, &a), msg);
    TU_REQUIRE_OK(put(s, "digits", "v1.1.0", model2, labels, &b), msg);
    TU_REQUIRE_OK(mcp_store_get_version(s, "digits:v1.0.0", &got, &err), msg);
    TU_CHECK_STR(got->name, "digits");
    TU_CHECK_STR(got->version, "v1.0.0");
    TU_CHECK_STR(got->manifest.digest, a->manifest.digest);
    TU_CHECK_INT(got->n_files, 2);
    TU_CHECK_STR(got->files[0].title, "model.onnx");
    TU_CHECK_STR(got->files[1].title, "meta/labels.txt");
    TU_CHECK_INT(got->files[0].blob.size, 11);
    TU_CHECK_STR(got->io_signature, "{\"inputs\":[[\"x\",\"FP32\",[1,4]]]}");
    TU_CHECK_STR(got->config_media_type, MCP_STORE_DESCRIPTOR_TYPE);
    /* The labels are the same bytes in both versions: one blob. */
    TU_CHECK_STR(a->files[1].blob.digest, b->files[1].blob.digest);
    TU_CHECK(strcmp(a->files[0].blob.digest, b->files[0].blob.digest) != 0);
    /* Storing the same version again gives the same manifest. */
    mcp_store_manifest *a2;
    TU_REQUIRE_OK(put(s, "digits", "v1.0.0", model, labels, &a2), msg);
    TU_CHECK_STR(a2->manifest.digest, a->manifest.digest);
    mcp_store_manifest_free(a2);
    blobs_dir(store, blobs, sizeof blobs);
    /* 3 files (2 models, 1 labels) + 2 descriptors + 2 manifests. */
    TU_CHECK_INT(count_entries(blobs, true), 7);

    char **refs;
    int n;
    TU_REQUIRE_OK(mcp_store_list(s, &refs, &n, &err), msg);
    TU_CHECK_INT(n, 2);
    if (n == 2) {
        TU_CHECK_STR(refs[0], "digits:v1.0.0");
        TU_CHECK_STR(refs[1], "digits:v1.1.0");
    }
    mcp_store_refs_free(refs, n);

    mcp_store_report r;
    TU_REQUIRE_OK(mcp_store_verify(s, &r, &err), msg);
    TU_CHECK_INT(r.versions, 2);
    TU_CHECK_INT(r.blobs, 7);
    TU_CHECK_INT(r.problems, 0);
    TU_CHECK_INT(r.unreferenced, 0);

    /* Untagging v1.1.0 leaves its model, descriptor and manifest
     * unreferenced; the shared labels stay. */
    int64_t removed, bytes;
    TU_REQUIRE_OK(mcp_store_untag(s, "digits:v1.1.0", &err), msg);
    TU_CHECK_STATUS(mcp_store_untag(s, "digits:v1.1.0", &err), MCP_STATUS_NOT_FOUND, msg);
    TU_REQUIRE_OK(mcp_store_verify(s, &r, &err), msg);
    TU_CHECK_INT(r.unreferenced, 3);
    TU_REQUIRE_OK(mcp_store_collect(s, &removed, &bytes, &err), msg);
    TU_CHECK_INT(removed, 3);
    TU_CHECK(bytes > 11);
    TU_CHECK(!mcp_store_has_blob(s, b->files[0].blob.digest));
    TU_CHECK(mcp_store_has_blob(s, b->files[1].blob.digest));
    mcp_store_manifest *gone = NULL;
    TU_CHECK_STATUS(mcp_store_get_version(s, "digits:v1.1.0", &gone, &err), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK(gone == NULL);
    TU_CHECK_CONTAINS(msg, "no version named digits:v1.1.0");
    TU_REQUIRE_OK(mcp_store_verify(s, &r, &err), msg);
    TU_CHECK_INT(r.problems, 0);
    TU_CHECK_INT(r.blobs, 4);

    /* Bad names and titles are refused before anything is written. */
    mcp_store_manifest *bad = NULL;
    TU_CHECK_STATUS(put(s, "../x", "v1", model, labels, &bad), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "NAME:VERSION");
    TU_CHECK_STATUS(put(s, "x", "v1:2", model, labels, &bad), MCP_STATUS_INVALID_ARGUMENT, msg);
    mcp_store_version_file escape[1] = {{"../outside.onnx", model}};
    mcp_store_version_in in = {.name = "x", .version = "v1", .descriptor = "d", .descriptor_len = 1, .files = escape, .n_files = 1};
    TU_CHECK_STATUS(mcp_store_put_version(s, &in, &bad, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "not a relative path");
    mcp_store_version_file missing[1] = {{"model.onnx", "/nonexistent/model.onnx"}};
    in.files = missing;
    TU_CHECK_STATUS(mcp_store_put_version(s, &in, &bad, &err), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK_CONTAINS(msg, "file 'model.onnx'");
    TU_CHECK_STATUS(mcp_store_get_version(s, "x:v1", &bad, &err), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK(bad == NULL);

    mcp_store_manifest_free(a);
    mcp_store_manifest_free(b);
    mcp_store_manifest_free(got);
    mcp_store_close(s);
    tu_remove_tree(dir);
}

static void flip_first_byte(const char *path)
{
    chmod(path, 0640);
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    if (fd < 0 || pread(fd, &c, 1, 0) != 1) {
        TU_FAIL_AT(__FILE__, __LINE__, "cannot open %s", path);
        if (fd >= 0) close(fd);
        return;
    }
    c ^= 0x20;
    if (pwrite(fd, &c, 1, 0) != 1) TU_FAIL_AT(__FILE__, __LINE__, "cannot write %s", path);
    close(fd);
}

static void test_damage_and_crash_leftovers(void)
{
    char dir[1024], store[2048], model[2048], labels[2048], path[2048], blobs[4096];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "store") == 0);
    tu_path(store, sizeof store, dir, "store");
    mcp_store *s;
    TU_REQUIRE_OK(mcp_store_open(store, &s, &err), msg);
    make_model(dir, "weights", model, labels, sizeof model);
    mcp_store_manifest *m;
    TU_REQUIRE_OK(put(s, "m", "v1", model, labels, &m), msg);

    /* A damaged model file: verify names it; a copy refuses it. */
    TU_REQUIRE_OK(mcp_store_blob_path(s, m->files[0].blob.digest, path, sizeof path, &err), msg);
    flip_first_byte(path);
    mcp_store_report r;
    TU_REQUIRE_OK(mcp_store_verify(s, &r, &err), msg);
    TU_CHECK(r.problems >= 1);
    TU_CHECK_CONTAINS(r.first_problem, "do not match");
    char other_dir[2048];
    tu_path(other_dir, sizeof other_dir, dir, "other");
    mcp_store *o;
    TU_REQUIRE_OK(mcp_store_open(other_dir, &o, &err), msg);
    TU_CHECK_STATUS(mcp_store_copy(s, o, "m:v1", &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "do not match its name");
    TU_CHECK_STATUS(mcp_store_resolve(o, "m:v1", &m->config, &err), MCP_STATUS_NOT_FOUND, msg);
    flip_first_byte(path); /* repaired */
    TU_REQUIRE_OK(mcp_store_copy(s, o, "m:v1", &err), msg);
    mcp_store_manifest *copied;
    TU_REQUIRE_OK(mcp_store_get_version(o, "m:v1", &copied, &err), msg);
    TU_CHECK_STR(copied->manifest.digest, m->manifest.digest);
    mcp_store_manifest_free(copied);
    mcp_store_close(o);

    /* A damaged manifest: reading the version fails naming its digest, and
     * collection refuses to run (it cannot tell what the version uses). */
    TU_REQUIRE_OK(mcp_store_blob_path(s, m->manifest.digest, path, sizeof path, &err), msg);
    flip_first_byte(path);
    mcp_store_manifest *got = NULL;
    TU_CHECK_STATUS(mcp_store_get_version(s, "m:v1", &got, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "does not match its digest");
    int64_t removed, bytes;
    TU_CHECK_STATUS(mcp_store_collect(s, &removed, &bytes, &err), MCP_STATUS_UNAVAILABLE, msg);
    TU_CHECK_CONTAINS(msg, "not collecting");
    TU_CHECK_INT(removed, 0);
    flip_first_byte(path);

    /* What a crash leaves (temporary files) is removed at the next open,
     * and never counts as a blob. */
    mcp_store_close(s);
    blobs_dir(store, blobs, sizeof blobs);
    write_file(tu_path(path, sizeof path, blobs, ".tmp-abc123"), "partial");
    write_file(tu_path(path, sizeof path, store, ".tmp-def456"), "{\"schemaVersion\":2,\"manif");
    int before = count_entries(blobs, true);
    TU_REQUIRE_OK(mcp_store_open(store, &s, &err), msg);
    TU_CHECK_INT(count_entries(blobs, true), before - 1);
    TU_CHECK(access(tu_path(path, sizeof path, store, ".tmp-def456"), F_OK) != 0);
    TU_REQUIRE_OK(mcp_store_verify(s, &r, &err), msg);
    TU_CHECK_INT(r.problems, 0);
    TU_CHECK_INT(r.versions, 1);

    /* A stray file among the blobs is reported, not trusted. */
    write_file(tu_path(path, sizeof path, blobs, "notadigest"), "x");
    TU_REQUIRE_OK(mcp_store_verify(s, &r, &err), msg);
    TU_CHECK_INT(r.problems, 1);
    TU_CHECK_CONTAINS(r.first_problem, "not named by a digest");
    mcp_store_manifest_free(m);
    mcp_store_close(s);
    tu_remove_tree(dir);
}

static void test_hostile_index(void)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[]", "expected an object"},
        {"{\"schemaVersion\":1,\"manifests\":[]}", "schemaVersion: expected 2"},
        {"{\"schemaVersion\":2}", "manifests: expected an array"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:../../etc/passwd\",\"size\":1}]}",
         "manifests[0].digest"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":-1}]}",
         "manifests[0].size"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0,"
         "\"annotations\":{\"org.opencontainers.image.ref.name\":\"../a:1\"}}]}",
         "is not NAME:VERSION"},
        {"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0,"
         "\"annotations\":{\"org.opencontainers.image.ref.name\":\"a:1\"}},"
         "{\"mediaType\":\"x\",\"digest\":\"sha256:"
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0,"
         "\"annotations\":{\"org.opencontainers.image.ref.name\":\"a:1\"}}]}",
         "also manifests[0]"},
        {"{\"schemaVersion\":2,\"manifests\":[],\"schemaVersion\":2}", "duplicate"},
        {"{\"schemaVersion\":2,\n \"manifests\":[", "index.json:2:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *doc = NULL;
        msg[0] = '\0';
        TU_CHECK_STATUS(mcp__store_parse_index(cases[i].text, strlen(cases[i].text), &doc, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
        TU_CHECK_CONTAINS(msg, cases[i].want);
        TU_CHECK(doc == NULL);
    }
    /* Another tool's entries (no name, or a plain tag) are accepted. */
    const char *foreign = "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                          "\"digest\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0,"
                          "\"annotations\":{\"org.opencontainers.image.ref.name\":\"latest\"}}]}";
    json_t *doc;
    TU_CHECK_STATUS(mcp__store_parse_index(foreign, strlen(foreign), &doc, &err), MCP_STATUS_OK, msg);
    json_decref(doc);

    static const struct {
        const char *layers, *want;
    } mcases[] = {
        {"[{\"mediaType\":\"f\",\"digest\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\","
         "\"size\":0,\"annotations\":{\"org.opencontainers.image.title\":\"../../etc/passwd\"}}]",
         "layers[0].annotations"},
        {"[{\"mediaType\":\"f\",\"digest\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\","
         "\"size\":0,\"annotations\":{\"org.opencontainers.image.title\":\"/abs\"}}]",
         "relative path"},
        {"[{\"mediaType\":\"f\",\"digest\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\","
         "\"size\":0,\"annotations\":{\"org.opencontainers.image.title\":\"a\"}},"
         "{\"mediaType\":\"f\",\"digest\":\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\","
         "\"size\":0,\"annotations\":{\"org.opencontainers.image.title\":\"a\"}}]",
         "also layers[0]"},
        {"{}", "layers: expected an array"},
    };
    for (size_t i = 0; i < sizeof mcases / sizeof mcases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"schemaVersion\":2,\"mediaType\":\"%s\",\"artifactType\":\"%s\",\"config\":{\"mediaType\":\"c\",\"digest\":"
                 "\"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"size\":0},"
                 "\"annotations\":{\"%s\":\"m\",\"%s\":\"v1\"},\"layers\":%s}",
                 MCP_STORE_MANIFEST_TYPE, MCP_STORE_ARTIFACT_TYPE, MCP_STORE_NAME_ANNOTATION, MCP_STORE_VERSION_ANNOTATION,
                 mcases[i].layers);
        mcp_store_manifest *m = NULL;
        TU_CHECK_STATUS(mcp__store_parse_manifest(text, strlen(text), &m, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
        TU_CHECK_CONTAINS(msg, mcases[i].want);
        TU_CHECK(m == NULL);
    }
    TU_CHECK(mcp__store_ref_valid("digits:v1.2.0"));
    TU_CHECK(mcp__store_ref_valid("a.b-c_d:1+build.5"));
    TU_CHECK(!mcp__store_ref_valid("a:b:c"));
    TU_CHECK(!mcp__store_ref_valid("a:"));
    TU_CHECK(!mcp__store_ref_valid(":1"));
    TU_CHECK(!mcp__store_ref_valid("..:1"));
    TU_CHECK(!mcp__store_ref_valid("a:.."));
    TU_CHECK(mcp__store_ref_valid("t1/b:1")); /* a model in tenant t1's namespace */
    TU_CHECK(!mcp__store_ref_valid("a/b/c:1"));
    TU_CHECK(!mcp__store_ref_valid("../b:1"));
    TU_CHECK(!mcp__store_ref_valid("a/..:1"));
    TU_CHECK(!mcp__store_ref_valid("/b:1"));
    TU_CHECK(!mcp__store_ref_valid("t1/ready:1"));
    TU_CHECK(mcp__store_title_valid("weights/part-1.bin"));
    TU_CHECK(!mcp__store_title_valid("a//b"));
    TU_CHECK(!mcp__store_title_valid("a/./b"));
    TU_CHECK(!mcp__store_title_valid("a\\b"));
    TU_CHECK(!mcp__store_title_valid("a\nb"));

    /* A store whose index.json is hostile opens, and every lookup names
     * the problem. */
    char dir[1024], path[2048];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "store") == 0);
    mcp_store *s;
    TU_REQUIRE_OK(mcp_store_open(dir, &s, &err), msg);
    write_file(tu_path(path, sizeof path, dir, "index.json"), cases[3].text);
    mcp_store_blob b;
    TU_CHECK_STATUS(mcp_store_resolve(s, "a:1", &b, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "manifests[0].digest");
    TU_CHECK_CONTAINS(msg, "index.json");
    mcp_store_close(s);
    /* An image layout of another version is refused. */
    write_file(tu_path(path, sizeof path, dir, "oci-layout"), "{\"imageLayoutVersion\":\"2.0.0\"}");
    TU_CHECK_STATUS(mcp_store_open(dir, &s, &err), MCP_STATUS_UNSUPPORTED, msg);
    TU_CHECK_CONTAINS(msg, "imageLayoutVersion");
    tu_remove_tree(dir);
}

/* A version checked out: its files under their titles, the stored bytes;
 * made once; gone with the version at the next collection. */
static void test_checkout(void)
{
    char dir[1024], store[2048], model[2048], labels[2048], path[4600];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "store") == 0);
    tu_path(store, sizeof store, dir, "store");
    mcp_store *s;
    TU_REQUIRE_OK(mcp_store_open(store, &s, &err), msg);
    make_model(dir, "checked-out weights", model, labels, sizeof model);
    mcp_store_manifest *m, *again;
    TU_REQUIRE_OK(put(s, "m", "v1", model, labels, &m), msg);
    TU_REQUIRE_OK(mcp_store_read_manifest(s, m->manifest.digest, &again, &err), msg);
    TU_CHECK_INT(again->n_files, 2);
    char co[4200], co2[4200];
    TU_REQUIRE_OK(mcp_store_checkout(s, again, co, sizeof co, &err), msg);
    snprintf(path, sizeof path, "%s/model.onnx", co);
    char *text = read_text(path);
    TU_CHECK_STR(text, "checked-out weights");
    mcp_free(text);
    snprintf(path, sizeof path, "%s/meta/labels.txt", co);
    text = read_text(path);
    TU_CHECK_STR(text, "cat\ndog\n");
    mcp_free(text);
    TU_REQUIRE_OK(mcp_store_checkout(s, again, co2, sizeof co2, &err), msg);
    TU_CHECK_STR(co2, co);
    /* The original may change: the checkout holds what was stored. */
    write_file(model, "changed");
    snprintf(path, sizeof path, "%s/model.onnx", co);
    text = read_text(path);
    TU_CHECK_STR(text, "checked-out weights");
    mcp_free(text);
    mcp_store_manifest *bad = NULL;
    TU_CHECK_STATUS(mcp_store_read_manifest(s, "sha256:../x", &bad, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK(bad == NULL);
    int64_t removed, bytes;
    TU_REQUIRE_OK(mcp_store_untag(s, "m:v1", &err), msg);
    TU_REQUIRE_OK(mcp_store_collect(s, &removed, &bytes, &err), msg);
    TU_CHECK(access(co, F_OK) != 0);
    mcp_store_manifest_free(m);
    mcp_store_manifest_free(again);
    mcp_store_close(s);
    tu_remove_tree(dir);
}

/* Two processes store versions into one store at once: the lock and the
 * index read under it keep every version. */
static void test_two_processes(void)
{
    char dir[1024], store[2048], model[2048], labels[2048];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "store") == 0);
    tu_path(store, sizeof store, dir, "store");
    make_model(dir, "shared weights", model, labels, sizeof model);
    mcp_store *s;
    TU_REQUIRE_OK(mcp_store_open(store, &s, &err), msg);
    enum { EACH = 15 };
    pid_t child = fork();
    TU_REQUIRE(child >= 0);
    const char *who = child == 0 ? "child" : "parent";
    mcp_store *mine = s;
    if (child == 0 && mcp_store_open(store, &mine, &err) != MCP_STATUS_OK) _exit(2);
    int failed = 0;
    for (int i = 0; i < EACH; i++) {
        char version[32];
        snprintf(version, sizeof version, "v%d", i);
        mcp_store_manifest *m;
        if (put(mine, who, version, model, labels, &m) != MCP_STATUS_OK) failed++;
        else mcp_store_manifest_free(m);
    }
    if (child == 0) {
        mcp_store_close(mine);
        _exit(failed ? 1 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    TU_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    TU_CHECK_INT(failed, 0);
    char **refs;
    int n;
    TU_REQUIRE_OK(mcp_store_list(s, &refs, &n, &err), msg);
    TU_CHECK_INT(n, 2 * EACH);
    mcp_store_refs_free(refs, n);
    mcp_store_report r;
    TU_REQUIRE_OK(mcp_store_verify(s, &r, &err), msg);
    TU_CHECK_INT(r.problems, 0);
    TU_CHECK_INT(r.versions, 2 * EACH);
    mcp_store_close(s);
    tu_remove_tree(dir);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_layout_and_blobs);
    TU_RUN(test_versions);
    TU_RUN(test_damage_and_crash_leftovers);
    TU_RUN(test_hostile_index);
    TU_RUN(test_checkout);
    TU_RUN(test_two_processes);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("registry_store");
}
