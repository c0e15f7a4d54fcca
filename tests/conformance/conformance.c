/*
 * Runs the official ONNX backend test suite (Debian's libonnx-testdata)
 * through the engine. Each case runs in its own forked process with a time
 * limit, so a crash or hang in one kernel is reported as that case's failure.
 *
 *   mcp-conformance [--data DIR] [--filter S]... [--expected FILE] [-j N] [-v]
 *
 * Exit status: 0 when every case either passes or is listed in the expected
 * failures file; 1 when a case fails that is not listed, or a listed case
 * passes (so the list can only shrink).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define HAVE_LSAN 1
#endif

enum { R_PASS = 0, R_FAIL = 1, R_UNSUPPORTED = 2 };

static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

typedef struct case_ref {
    char suite[32];
    char name[256];
    int result;
    char msg[1024];
    int expected; /* listed in the expected-failures file */
} case_ref;

static const double tol_rel = 1e-3, tol_abs = 1e-5;

static int cmp_name(const void *a, const void *b)
{
    const case_ref *x = a, *y = b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

static int read_value_file(const char *path, const mcp_type *t, mcp_value *v, mcp_err *err)
{
    uint8_t *buf;
    size_t len;
    mcp_status st = mcp_file_read(path, &buf, &len, err);
    if (st != MCP_STATUS_OK) return st;
    if (t->is_optional) st = mcp_onnx_decode_optional(buf, len, v, err);
    else if (t->kind == MCP_VALUE_SEQUENCE) st = mcp_onnx_decode_sequence(buf, len, v, err);
    else st = mcp_onnx_decode_tensor(buf, len, v, err);
    mcp_free(buf);
    return st;
}

static bool compare_tensor(const mcp_tensor *got, const mcp_tensor *want, char *msg, size_t cap)
{
    char a[128], b[128];
    if (got->dtype != want->dtype) {
        snprintf(msg, cap, "dtype %s, expected %s", mcp_dtype_name(got->dtype), mcp_dtype_name(want->dtype));
        return false;
    }
    bool same_shape = got->rank == want->rank;
    for (int i = 0; same_shape && i < got->rank; i++) same_shape = got->dims[i] == want->dims[i];
    if (!same_shape) {
        snprintf(msg, cap, "shape %s, expected %s", mcp_shape_str(got->rank, got->dims, a, sizeof a),
                 mcp_shape_str(want->rank, want->dims, b, sizeof b));
        return false;
    }
    int64_t n = mcp_tensor_numel(want);
    for (int64_t i = 0; i < n; i++) {
        if (want->dtype == MCP_DTYPE_STRING) {
            const char *x = ((char **)got->data)[i], *y = ((char **)want->data)[i];
            if (strcmp(x, y) != 0) {
                snprintf(msg, cap, "element %lld is \"%.100s\", expected \"%.100s\"", (long long)i, x, y);
                return false;
            }
        } else if (mcp_dtype_is_narrow(want->dtype)) {
            /* float8, float4, int4, int2...: the codes, bit for bit (NaN's
             * sign and -0 included; the packed types' padding excluded). */
            bool packed = mcp_dtype_is_packed(want->dtype);
            int bits = mcp_dtype_bits(want->dtype);
            unsigned x = packed ? mcp_packed_get(got->data, bits, i) : ((const uint8_t *)got->data)[i];
            unsigned y = packed ? mcp_packed_get(want->data, bits, i) : ((const uint8_t *)want->data)[i];
            if (x != y) {
                snprintf(msg, cap, "element %lld is code 0x%02x (%.9g), expected 0x%02x (%.9g) in %s", (long long)i, x,
                         mcp_narrow_to_f64(want->dtype, (uint8_t)x), y, mcp_narrow_to_f64(want->dtype, (uint8_t)y),
                         mcp_dtype_name(want->dtype));
                return false;
            }
        } else if (mcp_dtype_is_float(want->dtype) || want->dtype == MCP_DTYPE_COMPLEX64 || want->dtype == MCP_DTYPE_COMPLEX128) {
            int64_t scal = (want->dtype == MCP_DTYPE_COMPLEX64 || want->dtype == MCP_DTYPE_COMPLEX128) ? 2 : 1;
            for (int64_t k = 0; k < scal; k++) {
                double x, y;
                if (want->dtype == MCP_DTYPE_COMPLEX64) {
                    x = ((float *)got->data)[2 * i + k];
                    y = ((float *)want->data)[2 * i + k];
                } else if (want->dtype == MCP_DTYPE_COMPLEX128) {
                    x = ((double *)got->data)[2 * i + k];
                    y = ((double *)want->data)[2 * i + k];
                } else {
                    x = mcp_tensor_get_f64(got, i);
                    y = mcp_tensor_get_f64(want, i);
                }
                if (isnan(x) && isnan(y)) continue;
                if (x == y) continue;
                if (!(fabs(x - y) <= tol_abs + tol_rel * fabs(y))) {
                    snprintf(msg, cap, "element %lld is %.9g, expected %.9g", (long long)i, x, y);
                    return false;
                }
            }
        } else {
            int64_t x = mcp_tensor_get_i64(got, i), y = mcp_tensor_get_i64(want, i);
            if (x != y) {
                snprintf(msg, cap, "element %lld is %lld, expected %lld", (long long)i, (long long)x, (long long)y);
                return false;
            }
        }
    }
    return true;
}

static bool compare_value(const mcp_value *got, const mcp_value *want, char *msg, size_t cap)
{
    static const char *const kinds[] = {"tensor", "sequence", "empty optional"};
    if (got->kind != want->kind) {
        snprintf(msg, cap, "got a %s, expected a %s", kinds[got->kind], kinds[want->kind]);
        return false;
    }
    if (want->kind == MCP_VALUE_TENSOR) return compare_tensor(&got->tensor, &want->tensor, msg, cap);
    if (want->kind == MCP_VALUE_SEQUENCE) {
        if (got->seq_len != want->seq_len) {
            snprintf(msg, cap, "sequence length %lld, expected %lld", (long long)got->seq_len, (long long)want->seq_len);
            return false;
        }
        for (int64_t i = 0; i < want->seq_len; i++) {
            char inner[900];
            if (!compare_tensor(&got->seq[i], &want->seq[i], inner, sizeof inner)) {
                snprintf(msg, cap, "sequence element %lld: %.700s", (long long)i, inner);
                return false;
            }
        }
    }
    return true;
}

/* The suite's data files store bfloat16 tensors as uint16 bit patterns (the
 * writer of onnx 1.12 had no bfloat16 path); read them back as bfloat16
 * where the model declares or produces bfloat16. */
static void bf16_from_uint16(mcp_value *v, mcp_dtype declared)
{
    if (declared == MCP_DTYPE_BFLOAT16 && v->kind == MCP_VALUE_TENSOR && v->tensor.dtype == MCP_DTYPE_UINT16)
        v->tensor.dtype = MCP_DTYPE_BFLOAT16;
}

/* --compare-backend: a second backend every case also runs on; its outputs
 * must agree with the first backend's (within the suite's tolerance). */
static const char *g_other_backend;

/* Runs s2 on the inputs and compares with outs; false with msg on a
 * difference or a failed run. */
static bool cross_check(mcp_session *s2, mcp_value **ins, mcp_value **outs, int set, char *msg, size_t cap)
{
    const mcp_graph *g = s2->graph;
    mcp_value **outs2 = mcp_calloc((size_t)g->n_outputs + 1, sizeof *outs2);
    bool ok = outs2 != NULL;
    for (int i = 0; ok && i < g->n_outputs; i++) ok = (outs2[i] = mcp_value_new()) != NULL;
    char m[900] = "";
    mcp_err err = {m, sizeof m};
    if (ok && mcp__session_run(s2, ins, outs2, &err) != MCP_STATUS_OK) {
        snprintf(msg, cap, "backend '%s' failed where the other ran (set %d): %.800s", g_other_backend, set, m);
        ok = false;
    }
    for (int i = 0; ok && i < g->n_outputs; i++)
        if (!compare_value(outs[i], outs2[i], m, sizeof m)) {
            snprintf(msg, cap, "backends disagree on output '%.100s' (set %d, %s vs the other): %.700s",
                     g->values[g->outputs[i]].name, set, g_other_backend, m);
            ok = false;
        }
    for (int i = 0; outs2 && i < g->n_outputs; i++) mcp_value_free(outs2[i]);
    mcp_free(outs2);
    return ok;
}

/* Runs one case in the current process; returns R_* and fills msg. */
static int run_case(const char *dir, const char *backend, char *msg, size_t cap)
{
    char path[8400];
    mcp_err err = {msg, cap};
    msg[0] = '\0';
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    uint8_t *buf;
    size_t len;
    if (mcp_file_read(path, &buf, &len, &err) != MCP_STATUS_OK) return R_FAIL;
    mcp_session_options o = mcp_session_options_default();
    o.backend = backend;
    mcp_session *s = NULL;
    mcp_status st = mcp__session_create(buf, len, dir, &o, &s, &err);
    mcp_free(buf);
    if (st == MCP_STATUS_UNSUPPORTED) return R_UNSUPPORTED;
    if (st != MCP_STATUS_OK) return R_FAIL;
    const mcp_graph *g = s->graph;
    mcp_session *s2 = NULL;
    if (g_other_backend) {
        o.backend = g_other_backend;
        if (mcp_file_read(path, &buf, &len, &err) != MCP_STATUS_OK) {
            mcp_session_destroy(s);
            return R_FAIL;
        }
        st = mcp__session_create(buf, len, dir, &o, &s2, &err);
        mcp_free(buf);
        if (st != MCP_STATUS_OK) {
            mcp_err_prefix(&err, "backend '%s'", g_other_backend);
            mcp_session_destroy(s);
            return R_FAIL;
        }
    }
    int result = R_PASS;
    /* Every data set runs twice: the first run of an input shape records
     * sizes, the second follows the memory plan made from them. */
    for (int pass = 0; pass < 2 && result == R_PASS; pass++)
    for (int set = 0; result == R_PASS; set++) {
        char sdir[4200];
        snprintf(sdir, sizeof sdir, "%s/test_data_set_%d", dir, set);
        struct stat sb;
        if (stat(sdir, &sb) != 0) break;
        mcp_value **ins = mcp_calloc((size_t)g->n_inputs + 1, sizeof *ins);
        mcp_value **outs = mcp_calloc((size_t)g->n_outputs + 1, sizeof *outs);
        for (int i = 0; i < g->n_inputs && result == R_PASS; i++) {
            snprintf(path, sizeof path, "%s/input_%d.pb", sdir, i);
            if (stat(path, &sb) != 0) continue; /* an optional input left out */
            ins[i] = mcp_value_new();
            if (read_value_file(path, &g->values[g->inputs[i]].type, ins[i], &err) != MCP_STATUS_OK) result = R_FAIL;
            else bf16_from_uint16(ins[i], g->values[g->inputs[i]].type.dtype);
        }
        for (int i = 0; i < g->n_outputs; i++) outs[i] = mcp_value_new();
        if (result == R_PASS) {
            st = mcp__session_run(s, ins, outs, &err);
            if (st == MCP_STATUS_UNSUPPORTED) result = R_UNSUPPORTED;
            else if (st != MCP_STATUS_OK) result = R_FAIL;
            else if (s2 && !cross_check(s2, ins, outs, set, msg, cap)) result = R_FAIL;
        }
        for (int i = 0; i < g->n_outputs && result == R_PASS; i++) {
            snprintf(path, sizeof path, "%s/output_%d.pb", sdir, i);
            mcp_value want;
            memset(&want, 0, sizeof want);
            if (read_value_file(path, &g->values[g->outputs[i]].type, &want, &err) != MCP_STATUS_OK) {
                result = R_FAIL;
                break;
            }
            if (outs[i]->kind == MCP_VALUE_TENSOR) bf16_from_uint16(&want, outs[i]->tensor.dtype);
            char m[900];
            if (!compare_value(outs[i], &want, m, sizeof m)) {
                snprintf(msg, cap, "output '%.100s' (set %d%s): %.800s", g->values[g->outputs[i]].name, set,
                         pass ? ", planned run" : "", m);
                result = R_FAIL;
            }
            mcp_value_clear(&want);
        }
        for (int i = 0; i < g->n_inputs; i++) mcp_value_free(ins[i]);
        for (int i = 0; i < g->n_outputs; i++) mcp_value_free(outs[i]);
        mcp_free(ins);
        mcp_free(outs);
    }
    mcp_session_destroy(s);
    mcp_session_destroy(s2);
    return result;
}

/* Runs a case in a child process with a time limit. */
static int run_case_isolated(const char *dir, const char *backend, int timeout_s, char *msg, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(msg, cap, "pipe: %s", strerror(errno));
        return R_FAIL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm((unsigned)timeout_s);
        char m[1024];
        int r = run_case(dir, backend, m, sizeof m);
#ifdef HAVE_LSAN
        /* _exit skips LeakSanitizer's exit-time check: run it here. */
        if (__lsan_do_recoverable_leak_check()) {
            snprintf(m, sizeof m, "memory leak (LeakSanitizer report on stderr)");
            r = R_FAIL;
        }
#endif
        size_t ml = strlen(m);
        if (write(fd[1], m, ml) < 0) _exit(3);
        close(fd[1]);
        _exit(r);
    }
    close(fd[1]);
    size_t off = 0;
    ssize_t got;
    while (off + 1 < cap && (got = read(fd[0], msg + off, cap - 1 - off)) > 0) off += (size_t)got;
    msg[off] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(msg, cap, sig == SIGALRM ? "timed out after %d s" : "crashed (signal %d)", sig == SIGALRM ? timeout_s : sig);
        return R_FAIL;
    }
    int code = WEXITSTATUS(status);
    return code == R_PASS || code == R_UNSUPPORTED ? code : R_FAIL;
}

static int load_expected(const char *path, case_ref *cases, int n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "mcp-conformance: cannot open expected-failures file '%s'\n", path);
        return -1;
    }
    char line[2048];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == '\0') continue;
        char name[256];
        if (sscanf(p, "%255s", name) != 1) continue;
        const char *reason = p + strlen(name);
        while (*reason == ' ' || *reason == '\t') reason++;
        if (*reason == '\n' || *reason == '\0') {
            fprintf(stderr, "%s:%d: '%s' has no reason\n", path, lineno, name);
            fclose(f);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (strcmp(cases[i].name, name) == 0) cases[i].expected = 1;
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    const char *data = "/usr/share/libonnx-testdata/data";
    const char *expected = NULL, *backend = NULL;
    const char *filters[64];
    int n_filters = 0, verbose = 0, jobs = 1, timeout_s = 120;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc && n_filters < 64) filters[n_filters++] = argv[++i];
        else if (!strcmp(argv[i], "--expected") && i + 1 < argc) expected = argv[++i];
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--compare-backend") && i + 1 < argc) g_other_backend = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout_s = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-j") && i + 1 < argc) jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else {
            fprintf(stderr, "usage: %s [--data DIR] [--filter S]... [--expected FILE] [--backend auto|ref|dnnl] [--compare-backend B] [--timeout S] [-j N] [-v]\n", argv[0]);
            return 2;
        }
    }
    if (jobs < 1) jobs = 1;
    int cap = 2048, n = 0;
    case_ref *cases = calloc((size_t)cap, sizeof *cases);
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++) {
        char dpath[4096];
        snprintf(dpath, sizeof dpath, "%s/%s", data, suites[s]);
        DIR *d = opendir(dpath);
        if (!d) {
            fprintf(stderr, "mcp-conformance: cannot open '%s' (is libonnx-testdata installed?)\n", dpath);
            return 2;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            bool keep = n_filters == 0;
            for (int f = 0; f < n_filters && !keep; f++) keep = strstr(e->d_name, filters[f]) != NULL;
            if (!keep) continue;
            if (n == cap) cases = realloc(cases, (size_t)(cap *= 2) * sizeof *cases);
            memset(&cases[n], 0, sizeof cases[n]);
            snprintf(cases[n].suite, sizeof cases[n].suite, "%s", suites[s]);
            snprintf(cases[n].name, sizeof cases[n].name, "%s", e->d_name);
            n++;
        }
        closedir(d);
    }
    qsort(cases, (size_t)n, sizeof *cases, cmp_name);
    if (expected && load_expected(expected, cases, n) != 0) return 2;

    /* Workers take every jobs-th case and report "index result msg" lines. */
    int fd[2];
    if (pipe(fd) != 0) return 2;
    fflush(NULL);
    for (int w = 0; w < jobs; w++) {
        if (fork() == 0) {
            close(fd[0]);
            FILE *out = fdopen(fd[1], "w");
            for (int i = w; i < n; i += jobs) {
                char dir[4096], msg[1024];
                snprintf(dir, sizeof dir, "%s/%s/%s", data, cases[i].suite, cases[i].name);
                int r = run_case_isolated(dir, backend, timeout_s, msg, sizeof msg);
                for (char *p = msg; *p; p++)
                    if (*p == '\n') *p = ' ';
                fprintf(out, "%d %d %s\n", i, r, msg);
                fflush(out);
            }
            fclose(out);
            _exit(0);
        }
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    char line[2048];
    while (fgets(line, sizeof line, in)) {
        int idx, r, off = 0;
        if (sscanf(line, "%d %d %n", &idx, &r, &off) < 2 || idx < 0 || idx >= n) continue;
        cases[idx].result = r;
        char *m = line + off;
        m[strcspn(m, "\n")] = '\0';
        snprintf(cases[idx].msg, sizeof cases[idx].msg, "%s", m);
    }
    fclose(in);
    while (wait(NULL) > 0) {}

    int passed = 0, failed = 0, unsupported = 0, regressions = 0, fixed = 0;
    static const char *const tags[] = {"PASS", "FAIL", "UNSUPPORTED"};
    for (int i = 0; i < n; i++) {
        case_ref *c = &cases[i];
        if (c->result == R_PASS) passed++;
        else if (c->result == R_FAIL) failed++;
        else unsupported++;
        bool bad = false;
        if (expected && c->result != R_PASS && !c->expected) {
            regressions++;
            bad = true;
        }
        if (expected && c->result == R_PASS && c->expected) {
            fixed++;
            printf("XPASS %s/%s: passes now; remove it from the expected-failures list\n", c->suite, c->name);
        }
        if (verbose || bad || (!expected && c->result != R_PASS))
            printf("%s%s %s/%s%s%s\n", bad ? "UNEXPECTED " : "", tags[c->result], c->suite, c->name, c->msg[0] ? ": " : "", c->msg);
    }
    printf("conformance: %d passed, %d failed, %d unsupported\n", passed, failed, unsupported);
    if (expected) printf("expected failures: %d unexpected failures, %d unexpected passes\n", regressions, fixed);
    free(cases);
    return (regressions || fixed) ? 1 : 0;
}
