/*
 * The sandbox (src/serve/sandbox.c) in one process: a thread that enters
 * the inference filter gets EPERM for socket, open, execve and a fork
 * (clone without CLONE_THREAD), ENOSYS for clone3, and still starts
 * threads, allocates, runs OpenMP regions and a model (the digits demo,
 * loaded outside); the threads it starts are filtered too; threads that
 * did not enter are not. Switched off, nothing is filtered. A loader
 * thread under Landlock reads beneath the model folders only, writes
 * beneath the store only, and passes that on to its threads. The report
 * says what is on.
 *
 * Filters and Landlock domains cannot be lifted, so every case confines a
 * thread of its own and the main thread never enters.
 */
#define _GNU_SOURCE /* syscall, SYS_clone3 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcp/mcp.h"
#include "serve/sandbox.h"
#include "test_util.h"

#define PROBE_FILE "/etc/hostname"

/* What a confined thread saw: errno of each call (0 = it succeeded). */
typedef struct probe_result {
    mcp_status entered;
    char message[512];
    int socket_errno, open_errno, exec_errno, fork_errno, clone3_errno;
    bool forked; /* a fork went through: the filter is broken */
    int child_socket_errno;
    bool child_malloc_ok;
    bool omp_ok;
    bool model_ok;
    char model_message[512];
} probe_result;

static int errno_of(long rc) { return rc < 0 ? errno : 0; }

static int try_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int e = errno_of(fd);
    if (fd >= 0) close(fd);
    return e;
}

static int try_open(void)
{
    int fd = open(PROBE_FILE, O_RDONLY | O_CLOEXEC);
    int e = errno_of(fd);
    if (fd >= 0) close(fd);
    return e;
}

static int try_exec(void)
{
    char *const argv[] = {"/nonexistent/mcp-sandbox-test", NULL};
    char *const envp[] = {NULL};
    return errno_of(execve(argv[0], argv, envp));
}

/* A fork by raw clone (no CLONE_THREAD). Should it go through, the child
 * leaves at once and the parent reaps it. */
static int try_fork(bool *forked)
{
    long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
    if (pid == 0) _exit(0);
    if (pid > 0) {
        *forked = true;
        waitpid((pid_t)pid, NULL, 0);
        return 0;
    }
    return errno;
}

/* clone3 with no arguments: the filter answers ENOSYS before the kernel
 * would refuse the empty request (EINVAL). */
static int try_clone3(void)
{
#ifdef SYS_clone3
    return errno_of(syscall(SYS_clone3, NULL, 0UL));
#else
    return ENOSYS;
#endif
}

static void *child_main(void *arg)
{
    probe_result *r = arg;
    r->child_socket_errno = try_socket();
    char *p = malloc(1 << 20);
    r->child_malloc_ok = p != NULL;
    if (p) memset(p, 1, 1 << 20);
    free(p);
    return NULL;
}

static bool omp_sum_ok(void)
{
    long sum = 0;
#pragma omp parallel for num_threads(4) reduction(+ : sum)
    for (int i = 0; i < 100000; i++) sum += i % 7;
    long want = 0;
    for (int i = 0; i < 100000; i++) want += i % 7;
    return sum == want;
}

static const mcp_session *digits;

/* One run of the digits demo on a zero input: the label is there. */
static bool run_digits(char *msg, size_t cap)
{
    float x[64] = {0};
    int64_t dims[2] = {1, 64};
    mcp_value *in = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, dims, x, msg, cap);
    if (!in) return false;
    const char *names[] = {"input"};
    mcp_value *outs[2] = {NULL, NULL};
    mcp_status st = mcp_session_run(digits, 1, names, &in, 0, NULL, outs, msg, cap);
    mcp_value_destroy(in);
    for (int i = 0; i < 2; i++) mcp_value_destroy(outs[i]);
    return st == MCP_STATUS_OK;
}

static void probe_all(probe_result *r)
{
    r->socket_errno = try_socket();
    r->open_errno = try_open();
    r->exec_errno = try_exec();
    r->fork_errno = try_fork(&r->forked);
    r->clone3_errno = try_clone3();
    pthread_t t;
    if (pthread_create(&t, NULL, child_main, r) == 0) pthread_join(t, NULL);
    r->omp_ok = omp_sum_ok();
    r->model_ok = digits && run_digits(r->model_message, sizeof r->model_message);
}

static void *inference_main(void *arg)
{
    probe_result *r = arg;
    mcp_err err = {r->message, sizeof r->message};
    r->entered = mcp_sandbox_enter_inference(&err);
    probe_all(r);
    return NULL;
}

static void *plain_main(void *arg)
{
    probe_all(arg);
    return NULL;
}

static probe_result run_thread(void *(*fn)(void *))
{
    probe_result r;
    memset(&r, 0, sizeof r);
    r.child_socket_errno = -1;
    pthread_t t;
    if (pthread_create(&t, NULL, fn, &r) != 0) {
        fprintf(stderr, "cannot start a test thread\n");
        abort();
    }
    pthread_join(t, NULL);
    return r;
}

static void check_unconfined(const probe_result *r)
{
    TU_CHECK_INT(r->socket_errno, 0);
    TU_CHECK_INT(r->open_errno, 0);
    TU_CHECK_INT(r->exec_errno, ENOENT);
    TU_CHECK(r->forked);
    TU_CHECK(r->clone3_errno != ENOSYS && r->clone3_errno != EPERM);
    TU_CHECK_INT(r->child_socket_errno, 0);
    TU_CHECK(r->child_malloc_ok);
    TU_CHECK(r->omp_ok);
    TU_CHECK(r->model_ok);
}

static void test_inference_filter(void)
{
    mcp_sandbox_configure(true, NULL, 0, NULL, NULL, NULL);
    TU_CHECK(mcp_sandbox_enabled());
    probe_result r = run_thread(inference_main);
    TU_CHECK_STATUS(r.entered, MCP_STATUS_OK, r.message);
    TU_REQUIRE(r.entered == MCP_STATUS_OK);
    TU_CHECK_INT(r.socket_errno, EPERM);
    TU_CHECK_INT(r.open_errno, EPERM);
    TU_CHECK_INT(r.exec_errno, EPERM);
    TU_CHECK_INT(r.fork_errno, EPERM);
    TU_CHECK(!r.forked);
    TU_CHECK_INT(r.clone3_errno, ENOSYS);
    TU_CHECK_INT(r.child_socket_errno, EPERM); /* inherited */
    TU_CHECK(r.child_malloc_ok);
    TU_CHECK(r.omp_ok);
    if (!r.model_ok) fprintf(stderr, "digits in the sandbox: %s\n", r.model_message);
    TU_CHECK(r.model_ok);
}

static void test_other_threads_unaffected(void)
{
    mcp_sandbox_configure(true, NULL, 0, NULL, NULL, NULL);
    probe_result filtered = run_thread(inference_main);
    TU_CHECK_INT(filtered.socket_errno, EPERM);
    probe_result plain = run_thread(plain_main);
    check_unconfined(&plain);
    TU_CHECK_INT(try_socket(), 0);
    TU_CHECK_INT(try_open(), 0);
}

static void test_disabled(void)
{
    mcp_sandbox_configure(false, NULL, 0, NULL, NULL, NULL);
    TU_CHECK(!mcp_sandbox_enabled());
    probe_result r = run_thread(inference_main);
    TU_CHECK_STATUS(r.entered, MCP_STATUS_OK, r.message);
    check_unconfined(&r);
}

/* ---- Landlock on loaders ---- */

typedef struct loader_result {
    mcp_status entered;
    char message[512];
    int read_model, write_model, make_in_models, read_outside, make_in_store, link_in_store, rename_in_store,
        remove_in_store, mkdir_in_store;
    int child_read_outside, child_read_model;
} loader_result;

static char models_dir[512], store_dir[512];

static int open_errno(const char *dir, const char *name, int flags)
{
    char p[1024];
    int fd = open(tu_path(p, sizeof p, dir, name), flags | O_CLOEXEC, 0644);
    int e = errno_of(fd);
    if (fd >= 0) close(fd);
    return e;
}

static void *loader_child_main(void *arg)
{
    loader_result *r = arg;
    r->child_read_outside = try_open();
    r->child_read_model = open_errno(models_dir, "model.onnx", O_RDONLY);
    return NULL;
}

static void *loader_main(void *arg)
{
    loader_result *r = arg;
    mcp_err err = {r->message, sizeof r->message};
    r->entered = mcp_sandbox_enter_loader(&err);
    if (r->entered != MCP_STATUS_OK) return NULL;
    char a[1024], b[1024], c[1024];
    r->read_model = open_errno(models_dir, "model.onnx", O_RDONLY);
    r->write_model = open_errno(models_dir, "model.onnx", O_WRONLY);
    r->make_in_models = open_errno(models_dir, "new.onnx", O_WRONLY | O_CREAT);
    r->read_outside = try_open();
    r->make_in_store = open_errno(store_dir, "blob.tmp", O_WRONLY | O_CREAT | O_TRUNC);
    r->mkdir_in_store = errno_of(mkdir(tu_path(a, sizeof a, store_dir, "sub"), 0755));
    r->link_in_store = errno_of(link(tu_path(a, sizeof a, store_dir, "blob.tmp"), tu_path(b, sizeof b, store_dir, "sub/linked")));
    r->rename_in_store = errno_of(rename(tu_path(a, sizeof a, store_dir, "blob.tmp"), tu_path(c, sizeof c, store_dir, "blob")));
    r->remove_in_store = errno_of(unlink(tu_path(b, sizeof b, store_dir, "sub/linked")));
    pthread_t t;
    if (pthread_create(&t, NULL, loader_child_main, r) == 0) pthread_join(t, NULL);
    return NULL;
}

static void test_loader_landlock(void)
{
    char p[1024];
    TU_REQUIRE(tu_make_temp_dir(models_dir, sizeof models_dir, "sandbox-models") == 0);
    TU_REQUIRE(tu_make_temp_dir(store_dir, sizeof store_dir, "sandbox-store") == 0);
    FILE *f = fopen(tu_path(p, sizeof p, models_dir, "model.onnx"), "w");
    TU_REQUIRE(f != NULL);
    fputs("not really a model", f);
    fclose(f);
    const char *reads[] = {models_dir};
    mcp_sandbox_configure(true, reads, 1, store_dir, NULL, NULL);
    loader_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    TU_REQUIRE(pthread_create(&t, NULL, loader_main, &r) == 0);
    pthread_join(t, NULL);
    if (r.entered == MCP_STATUS_UNSUPPORTED) {
        fprintf(stderr, "skipped: %s\n", r.message);
    } else {
        TU_CHECK_STATUS(r.entered, MCP_STATUS_OK, r.message);
        TU_CHECK_INT(r.read_model, 0);
        TU_CHECK_INT(r.write_model, EACCES);
        TU_CHECK_INT(r.make_in_models, EACCES);
        TU_CHECK_INT(r.read_outside, EACCES);
        TU_CHECK_INT(r.make_in_store, 0);
        TU_CHECK_INT(r.mkdir_in_store, 0);
        TU_CHECK_INT(r.link_in_store, 0);
        TU_CHECK_INT(r.rename_in_store, 0);
        TU_CHECK_INT(r.remove_in_store, 0);
        TU_CHECK_INT(r.child_read_outside, EACCES);
        TU_CHECK_INT(r.child_read_model, 0);
    }
    TU_CHECK_INT(try_open(), 0); /* the main thread is not confined */
    tu_remove_tree(models_dir);
    tu_remove_tree(store_dir);
}

static void test_loader_off(void)
{
    mcp_sandbox_configure(false, NULL, 0, NULL, NULL, NULL);
    loader_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    snprintf(models_dir, sizeof models_dir, "/nonexistent");
    snprintf(store_dir, sizeof store_dir, "/nonexistent");
    TU_REQUIRE(pthread_create(&t, NULL, loader_main, &r) == 0);
    pthread_join(t, NULL);
    TU_CHECK_STATUS(r.entered, MCP_STATUS_OK, r.message);
    TU_CHECK_INT(r.read_outside, 0);
    TU_CHECK_INT(r.child_read_outside, 0);
}

/* ---- the report ---- */

typedef struct said {
    char text[2048];
    int lines, warnings;
} said;

static void say(void *user, bool warning, const char *msg)
{
    said *s = user;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "%s\n", msg);
    s->lines++;
    s->warnings += warning;
}

static void test_report(void)
{
    said on = {0}, off = {0};
    const char *reads[] = {"/nonexistent/models"};
    mcp_sandbox_configure(true, reads, 1, NULL, NULL, NULL);
    mcp_sandbox_report(say, &on);
    TU_CHECK_INT(on.lines, 2);
    TU_CHECK_CONTAINS(on.text, "sandbox: ");
    TU_CHECK_CONTAINS(on.text, "seccomp");
    TU_CHECK_CONTAINS(on.text, "cgroup v2");
    mcp_sandbox_configure(false, NULL, 0, NULL, NULL, NULL);
    mcp_sandbox_report(say, &off);
    TU_CHECK_CONTAINS(off.text, "sandbox: off (--no-sandbox)");
    mcp_sandbox_report(NULL, NULL);
}

/* A thread that cannot enter warns once through the callback: seen here
 * only where the kernel has no seccomp; elsewhere nothing is said. */
static void *enter_or_warn_main(void *arg)
{
    (void)arg;
    mcp_sandbox_enter_inference_or_warn();
    return NULL;
}

static void test_enter_or_warn(void)
{
    said s = {0};
    mcp_sandbox_configure(true, NULL, 0, NULL, say, &s);
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        TU_REQUIRE(pthread_create(&t, NULL, enter_or_warn_main, NULL) == 0);
        pthread_join(t, NULL);
    }
    TU_CHECK(s.lines <= 1);
}

int main(void)
{
    mcp_session_options o = mcp_session_options_default();
    o.threads = 2;
    mcp_session *s = NULL;
    char msg[512];
    if (mcp_session_create_from_file(MCP_DIGITS_MODEL, &o, &s, msg, sizeof msg) != MCP_STATUS_OK)
        fprintf(stderr, "%s: %s\n", MCP_DIGITS_MODEL, msg);
    digits = s;
    TU_RUN(test_inference_filter);
    TU_RUN(test_other_threads_unaffected);
    TU_RUN(test_disabled);
    TU_RUN(test_loader_landlock);
    TU_RUN(test_loader_off);
    TU_RUN(test_report);
    TU_RUN(test_enter_or_warn);
    mcp_session_destroy(s);
    mcp_sandbox_configure(true, NULL, 0, NULL, NULL, NULL);
    return tu_finish("sandbox");
}
