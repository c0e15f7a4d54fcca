/* The GGUF reader: a well-formed file reads back exactly; every malformed
 * variant (each truncation, wrong offsets, absurd sizes, wrong types) is an
 * error that says what and where, never a crash; real files from llama.cpp
 * open by mmap. Usage: test_gguf LLAMA_CPP_MODELS_DIR */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "../unit/test_util.h"
#include "gguf_build.h"

static char msg[512];
static mcp_err err = {msg, sizeof msg};

/* A small valid file: metadata of each kind and two tensors. */
static void build_valid(mcp_buf *b, uint32_t version)
{
    mcp_buf_reset(b);
    gb_header(b, version, 2, 6);
    gb_kv_str(b, "general.architecture", "llama");
    gb_kv_u32(b, "llama.context_length", 2048);
    gb_kv_f32(b, "llama.rope.freq_base", 10000.0f);
    gb_kv_bool(b, "tokenizer.ggml.add_bos_token", 1);
    static const char *const toks[] = {"<s>", "</s>", "hello", ""};
    gb_kv_strs(b, "tokenizer.ggml.tokens", toks, 4);
    static const int32_t types[] = {3, 3, 1, 1};
    gb_kv_i32s(b, "tokenizer.ggml.token_type", types, 4);
    uint64_t ne_a[2] = {32, 3}, ne_b[1] = {5};
    gb_tensor(b, "blk.0.attn_q.weight", 2, ne_a, MCP_GGML_Q8_0, 0);      /* 3 blocks of 34 = 102 bytes */
    gb_tensor(b, "output_norm.weight", 1, ne_b, MCP_GGML_F32, 128);      /* 20 bytes */
    gb_pad(b, 32);
    uint8_t data[148];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;
    mcp_buf_append(b, data, sizeof data);
}

static void test_valid_reads_back(void)
{
    mcp_buf b = {0};
    for (uint32_t version = 2; version <= 3; version++) {
        build_valid(&b, version);
        mcp_gguf *g = NULL;
        TU_REQUIRE_OK(mcp_gguf_parse(b.data, b.len, &g, &err), msg);
        TU_CHECK_INT(g->version, version);
        TU_CHECK_INT(g->n_kv, 6);
        TU_CHECK_INT(g->n_tensors, 2);
        TU_CHECK_INT(g->alignment, 32);
        TU_CHECK_INT(g->data_offset % 32, 0);
        mcp_gguf_str s;
        bool found = false;
        TU_CHECK_STATUS(mcp_gguf_get_str(g, "general.architecture", &s, &found, &err), MCP_STATUS_OK, msg);
        TU_CHECK(found && mcp_gguf_str_eq(s, "llama"));
        uint32_t ctx = 0;
        TU_CHECK_STATUS(mcp_gguf_get_u32(g, "llama.context_length", &ctx, &found, &err), MCP_STATUS_OK, msg);
        TU_CHECK_INT(ctx, 2048);
        float base = 0;
        TU_CHECK_STATUS(mcp_gguf_get_f32(g, "llama.rope.freq_base", &base, &found, &err), MCP_STATUS_OK, msg);
        TU_CHECK_NEAR(base, 10000.0, 0);
        bool bos = false;
        TU_CHECK_STATUS(mcp_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &bos, &found, &err), MCP_STATUS_OK, msg);
        TU_CHECK(bos);
        TU_CHECK_STATUS(mcp_gguf_get_u32(g, "no.such.key", &ctx, &found, &err), MCP_STATUS_OK, msg);
        TU_CHECK(!found);
        const mcp_gguf_kv *arr = NULL;
        TU_CHECK_STATUS(mcp_gguf_get_array(g, "tokenizer.ggml.tokens", MCP_GGUF_STRING, &arr, &err), MCP_STATUS_OK, msg);
        TU_REQUIRE(arr && arr->n == 4);
        TU_CHECK(mcp_gguf_str_eq(arr->strs[2], "hello"));
        TU_CHECK(arr->strs[3].len == 0);
        TU_CHECK_STATUS(mcp_gguf_get_array(g, "tokenizer.ggml.token_type", MCP_GGUF_INT32, &arr, &err), MCP_STATUS_OK, msg);
        TU_REQUIRE(arr && arr->n == 4);
        TU_CHECK_INT(mcp_gguf_arr_i32(arr, 0), 3);
        /* Wrong types name the key and both types. */
        TU_CHECK_STATUS(mcp_gguf_get_u32(g, "general.architecture", &ctx, &found, &err), MCP_STATUS_INVALID_MODEL, msg);
        TU_CHECK_CONTAINS(msg, "'general.architecture' is string, expected an integer");
        TU_CHECK_STATUS(mcp_gguf_get_array(g, "tokenizer.ggml.tokens", MCP_GGUF_FLOAT32, &arr, &err),
                        MCP_STATUS_INVALID_MODEL, msg);
        TU_CHECK_CONTAINS(msg, "is an array of string, expected an array of float32");
        const mcp_gguf_tensor *t = mcp_gguf_tensor_find(g, "blk.0.attn_q.weight");
        TU_REQUIRE(t);
        TU_CHECK_INT(t->n_dims, 2);
        TU_CHECK_INT(t->ne[0], 32);
        TU_CHECK_INT(t->ne[1], 3);
        TU_CHECK_INT(t->ne[2], 1);
        TU_CHECK_INT(t->n_elems, 96);
        TU_CHECK_INT(t->nbytes, 102);
        TU_CHECK(t->data == b.data + g->data_offset);
        t = mcp_gguf_tensor_find(g, "output_norm.weight");
        TU_REQUIRE(t);
        TU_CHECK_INT(t->nbytes, 20);
        TU_CHECK_INT(t->data[0], 128); /* the data bytes count up from 0 */
        TU_CHECK(mcp_gguf_tensor_find(g, "output.weight") == NULL);
        mcp_gguf_close(g);
    }
    mcp_buf_free(&b);
}

/* Every prefix of a valid file is refused with a message, and reading never
 * touches a byte past the prefix (ASan checks that: each prefix is copied
 * into a buffer of exactly its length). */
static void test_every_truncation_refused(void)
{
    mcp_buf b = {0};
    build_valid(&b, 3);
    int refused = 0;
    for (size_t n = 0; n < b.len; n++) {
        uint8_t *copy = mcp_malloc(n ? n : 1);
        TU_REQUIRE(copy);
        memcpy(copy, b.data, n);
        mcp_gguf *g = NULL;
        msg[0] = 0;
        mcp_status st = mcp_gguf_parse(copy, n, &g, &err);
        if (st != MCP_STATUS_OK) {
            refused++;
            TU_CHECK(msg[0] != 0);
        }
        TU_CHECK((st == MCP_STATUS_OK) == (g != NULL));
        mcp_gguf_close(g);
        mcp_free(copy);
    }
    /* Only the last tensor's bytes can be cut without the file being short
     * of something; every cut before the data section is an error. */
    TU_CHECK(refused >= (int)(b.len - 20));
    mcp_buf_free(&b);
}

static void expect_refused(const mcp_buf *b, const char *needle)
{
    mcp_gguf *g = NULL;
    msg[0] = 0;
    mcp_status st = mcp_gguf_parse(b->data, b->len, &g, &err);
    TU_CHECK(st != MCP_STATUS_OK);
    TU_CHECK(g == NULL);
    TU_CHECK_CONTAINS(msg, needle);
    mcp_gguf_close(g);
}

static void test_malformed_named(void)
{
    mcp_buf b = {0};
    uint64_t ne[2] = {32, 4};

    gb_header(&b, 3, 0, 0);
    memcpy(b.data, "GGML", 4);
    expect_refused(&b, "no GGUF magic");

    mcp_buf_reset(&b);
    gb_header(&b, 1, 0, 0);
    expect_refused(&b, "GGUF version 1 is not supported");

    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, UINT64_MAX / 2);
    expect_refused(&b, "metadata entries cannot fit");

    mcp_buf_reset(&b);
    gb_header(&b, 3, UINT64_MAX, 0);
    expect_refused(&b, "tensors cannot fit");

    /* A string longer than the file. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 1);
    gb_u64(&b, 1000);
    mcp_buf_append(&b, "abcdefghijklmnop", 16);
    expect_refused(&b, "says 1000 bytes, but only 16 are left");

    /* An array of strings claiming more elements than bytes. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "tokenizer.ggml.tokens");
    gb_u32(&b, MCP_GGUF_ARRAY);
    gb_u32(&b, MCP_GGUF_STRING);
    gb_u64(&b, (uint64_t)1 << 60);
    expect_refused(&b, "'tokenizer.ggml.tokens' is an array of 1152921504606846976 strings, more than the file can hold");

    /* An array of arrays, an unknown value type. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "x");
    gb_u32(&b, MCP_GGUF_ARRAY);
    gb_u32(&b, MCP_GGUF_ARRAY);
    gb_u64(&b, 1);
    expect_refused(&b, "key 'x' is an array of array");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "y");
    gb_u32(&b, 77);
    gb_u32(&b, 0);
    expect_refused(&b, "key 'y' has unknown value type 77");

    /* Duplicate keys. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 2);
    gb_kv_u32(&b, "a.b", 1);
    gb_kv_u32(&b, "a.b", 2);
    expect_refused(&b, "metadata key 'a.b' appears twice");

    /* Alignment that is not a power of two. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 1);
    gb_kv_u32(&b, "general.alignment", 24);
    expect_refused(&b, "general.alignment is 24");

    /* Tensors: rank, dimensions, type, block multiple, offset, extent. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 5, (const uint64_t[]){1, 1, 1, 1, 1}, MCP_GGML_F32, 0);
    expect_refused(&b, "tensor 't' has 5 dimensions");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 2, (const uint64_t[]){(uint64_t)1 << 40, (uint64_t)1 << 40}, MCP_GGML_F32, 0);
    expect_refused(&b, "tensor 't' dimension 1 is 1099511627776 (absurd size)");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 2, (const uint64_t[]){4, 0}, MCP_GGML_F32, 0);
    expect_refused(&b, "tensor 't' dimension 1 is 0");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 2, ne, 4, 0);
    expect_refused(&b, "tensor 't' has unknown type 4");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 2, (const uint64_t[]){31, 2}, MCP_GGML_Q4_0, 0);
    expect_refused(&b, "rows of 31 elements, not a multiple of its block of 32");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 2, ne, MCP_GGML_F32, 7);
    gb_pad(&b, 32);
    mcp_buf_append(&b, msg, 512);
    expect_refused(&b, "tensor 't' offset 7 is not a multiple of the alignment 32");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 2, ne, MCP_GGML_F32, 0); /* 512 bytes */
    gb_pad(&b, 32);
    mcp_buf_append(&b, msg, 500);
    expect_refused(&b, "tensor 't' (512 bytes at offset 0) runs past the end");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 0);
    gb_tensor(&b, "t", 2, ne, MCP_GGML_F32, UINT64_MAX - 31);
    gb_pad(&b, 32);
    expect_refused(&b, "runs past the end");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 2, 0);
    gb_tensor(&b, "t", 1, ne, MCP_GGML_F32, 0);
    gb_tensor(&b, "t", 1, ne, MCP_GGML_F32, 128);
    gb_pad(&b, 32);
    mcp_buf_append(&b, msg, 256);
    expect_refused(&b, "tensor 't' appears twice");

    /* A negative count where a count belongs. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "llama.block_count");
    gb_u32(&b, MCP_GGUF_INT32);
    gb_u32(&b, (uint32_t)-3);
    mcp_gguf *g = NULL;
    TU_REQUIRE_OK(mcp_gguf_parse(b.data, b.len, &g, &err), msg);
    uint32_t v;
    bool found;
    TU_CHECK_STATUS(mcp_gguf_get_u32(g, "llama.block_count", &v, &found, &err), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "'llama.block_count' is -3, expected a count");
    mcp_gguf_close(g);
    mcp_buf_free(&b);
}

static void test_open_refuses_non_files(void)
{
    mcp_gguf *g = NULL;
    TU_CHECK_STATUS(mcp_gguf_open("/nonexistent/model.gguf", &g, &err), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK_CONTAINS(msg, "/nonexistent/model.gguf");
    TU_CHECK_STATUS(mcp_gguf_open("/tmp", &g, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "not a regular file");
    char dir[256], path[300];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "gguf") == 0);
    tu_path(path, sizeof path, dir, "empty.gguf");
    FILE *f = fopen(path, "wb");
    TU_REQUIRE(f);
    fclose(f);
    TU_CHECK_STATUS(mcp_gguf_open(path, &g, &err), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "empty.gguf: not a GGUF file: 0 bytes");
    unlink(path);
    rmdir(dir);
}

/* The real vocab-only files llama.cpp ships open by mmap, and their token
 * lists are complete. */
static void test_real_files(const char *models)
{
    DIR *d = opendir(models);
    if (!d) {
        TU_FAIL_AT(__FILE__, __LINE__, "%s: missing; run tools/fetch-llama-cpp.sh", models);
        return;
    }
    int opened = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".gguf") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", models, e->d_name);
        mcp_gguf *g = NULL;
        mcp_status st = mcp_gguf_open(path, &g, &err);
        TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
        if (st != MCP_STATUS_OK) continue;
        const mcp_gguf_kv *toks = NULL;
        TU_CHECK_STATUS(mcp_gguf_get_array(g, "tokenizer.ggml.tokens", MCP_GGUF_STRING, &toks, &err), MCP_STATUS_OK, msg);
        TU_CHECK(toks && toks->n > 1000);
        TU_CHECK(g->map != NULL);
        opened++;
        mcp_gguf_close(g);
    }
    closedir(d);
    TU_CHECK(opened >= 5);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_gguf LLAMA_CPP_MODELS_DIR\n");
        return 2;
    }
    TU_RUN(test_valid_reads_back);
    TU_RUN(test_every_truncation_refused);
    TU_RUN(test_malformed_named);
    TU_RUN(test_open_refuses_non_files);
    test_real_files(argv[1]);
    return tu_finish("llm_gguf");
}
