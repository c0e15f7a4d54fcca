/*
 * The sandbox: a seccomp filter on the threads that run models, Landlock
 * on the threads that load them, and the start-up report (see sandbox.h).
 */
#define _GNU_SOURCE /* CLONE_THREAD */
#include "serve/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Rights newer than the oldest <linux/landlock.h> we build with; the
 * values are the kernel's ABI. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

typedef struct sandbox_settings {
    bool enabled;
    bool configured; /* loaders are confined only once the folders are known */
    char **read_paths;
    int n_read;
    char *write_dir;
    mcp_sandbox_say_fn say;
    void *say_user;
} sandbox_settings;

static sandbox_settings settings = {.enabled = true};

static void settings_clear(void)
{
    for (int i = 0; i < settings.n_read; i++) free(settings.read_paths[i]);
    free(settings.read_paths);
    free(settings.write_dir);
    settings.read_paths = NULL;
    settings.n_read = 0;
    settings.write_dir = NULL;
}

void mcp_sandbox_configure(bool enabled, const char *const *read_paths, int n_read, const char *write_dir,
                           mcp_sandbox_say_fn say, void *say_user)
{
    settings_clear();
    settings.enabled = enabled;
    settings.configured = true;
    settings.say = say;
    settings.say_user = say_user;
    settings.read_paths = n_read > 0 ? calloc((size_t)n_read, sizeof *settings.read_paths) : NULL;
    for (int i = 0; settings.read_paths && i < n_read; i++)
        if (read_paths[i] && (settings.read_paths[settings.n_read] = strdup(read_paths[i]))) settings.n_read++;
    settings.write_dir = write_dir ? strdup(write_dir) : NULL;
}

bool mcp_sandbox_enabled(void) { return settings.enabled; }

/* ---- the inference filter ---- */

/*
 * What a thread that runs models may call. Everything here works on memory
 * the process has, on the thread itself, or on descriptors the server
 * already holds; nothing opens a file or a socket, runs a program or
 * reaches another process. Names the running kernel or libseccomp do not
 * know are skipped.
 */
static const char *const inference_calls[] = {
    /* Memory: malloc's arenas, the memory plans, oneDNN's JIT code. */
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise",
    /* Locks, condition variables, OpenMP's barriers. */
    "futex", "futex_waitv", "sched_yield", "membarrier",
    /* Clocks (the vDSO answers most without a system call). */
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    /* OpenMP asks for the cores it may use and may pin its workers;
     * gRPC's locks (absl::Mutex) read a waiting thread's priority, and
     * log an error each time they cannot. */
    "sched_getaffinity", "sched_setaffinity", "getcpu", "sched_getparam", "sched_getscheduler",
    /* Thread start-up and exit (pthread_create in OpenMP and oneDNN, whose
     * pools start on the first parallel region of this thread). */
    "set_robust_list", "rseq", "exit", "exit_group", "getpid", "gettid",
    "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    "getrandom",
    /* The log's lines and the transports' wake-ups are writes to
     * descriptors opened before; the worker closes what it is handed. */
    "write", "writev", "close",
    /* A worker answers the calls it finishes itself: gRPC core then
     * writes the response to the client's connection, reads what the
     * client has sent on it since (a read gRPC finishes on the thread
     * that flushes its work), and shuts down one whose client went away,
     * on the calling thread. */
    "sendmsg", "recvmsg", "shutdown",
    /* CPU time of a run and the machine's size. */
    "getrusage", "sysinfo",
};

static int allow_listed(scmp_filter_ctx ctx, const char **failed)
{
    for (size_t i = 0; i < sizeof inference_calls / sizeof inference_calls[0]; i++) {
        int nr = seccomp_syscall_resolve_name(inference_calls[i]);
        if (nr == __NR_SCMP_ERROR) continue;
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        if (rc != 0) {
            *failed = inference_calls[i];
            return rc;
        }
    }
    return 0;
}

/*
 * Threads yes, processes no: clone is allowed only with CLONE_THREAD (a
 * fork has no such flag), and clone3, whose flags sit in memory a filter
 * cannot read, answers ENOSYS so glibc falls back to clone. tgkill reaches
 * this process's own threads only (abort() and the sanitizers' reports
 * signal the calling thread).
 */
static int allow_threads(scmp_filter_ctx ctx, const char **failed)
{
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, (scmp_datum_t)CLONE_THREAD, (scmp_datum_t)CLONE_THREAD));
    if (rc != 0) {
        *failed = "clone";
        return rc;
    }
    int clone3 = seccomp_syscall_resolve_name("clone3");
    if (clone3 != __NR_SCMP_ERROR && (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), clone3, 0)) != 0) {
        *failed = "clone3";
        return rc;
    }
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
    if (rc != 0) *failed = "tgkill";
    return rc;
}

static mcp_status seccomp_missing(mcp_err *err)
{
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0) return MCP_STATUS_OK;
    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "the kernel has no seccomp (prctl(PR_GET_SECCOMP): %s)",
                       strerror(errno));
}

static mcp_status load_filter(scmp_filter_ctx ctx, mcp_err *err)
{
    const char *failed = NULL;
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
    if (rc != 0) failed = "the action for other architectures";
    if (rc == 0) rc = allow_listed(ctx, &failed);
    if (rc == 0) rc = allow_threads(ctx, &failed);
    if (rc != 0)
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot build the system call filter: %s: %s", failed, strerror(-rc));
    rc = seccomp_load(ctx);
    if (rc != 0)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "cannot load the system call filter: seccomp_load: %s", strerror(-rc));
    return MCP_STATUS_OK;
}

mcp_status mcp_sandbox_enter_inference(mcp_err *err)
{
    if (!settings.enabled) return MCP_STATUS_OK;
    mcp_status st = seccomp_missing(err);
    if (st != MCP_STATUS_OK) return st;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for the system call filter");
    st = load_filter(ctx, err);
    seccomp_release(ctx);
    return st;
}

/* ---- Landlock on loaders ---- */

#define FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* The store writes blobs through temporary files renamed into place, links
 * checkouts to blobs across folders, and SQLite makes, truncates and
 * removes its journal beside catalog.db. */
#define FS_STORE                                                                                          \
    (FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE | \
     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)
/* The rights a rule on a single file may hold. */
#define FS_FILE                                                                                              \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* The Landlock ABI version, or -errno. */
static int landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? -errno : (int)v;
}

/* Every file right the kernel's ABI knows: all of them are refused unless
 * a rule grants them. */
static uint64_t handled_rights(int abi)
{
    uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
    if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5) r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return r;
}

static mcp_status landlock_unavailable(int abi, mcp_err *err)
{
    if (abi < 0)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "Landlock is not available (landlock_create_ruleset: %s)",
                           strerror(-abi));
    if (abi < 2 && settings.write_dir)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                           "Landlock ABI %d cannot allow the store's links between its folders (ABI 2 can)", abi);
    return MCP_STATUS_OK;
}

/* Grants `rights` beneath path (only the file rights when it is a file).
 * A path that is gone grants nothing. */
static mcp_status allow_beneath(int ruleset, const char *path, uint64_t rights, uint64_t handled, mcp_err *err)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return MCP_STATUS_OK;
    struct stat sb;
    struct landlock_path_beneath_attr rule = {.parent_fd = fd};
    rule.allowed_access = rights & handled;
    if (fstat(fd, &sb) == 0 && !S_ISDIR(sb.st_mode)) rule.allowed_access &= FS_FILE;
    long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int e = errno;
    close(fd);
    if (rc != 0) return mcp_err_set(err, MCP_STATUS_INTERNAL, "Landlock: cannot add a rule for %s: %s", path, strerror(e));
    return MCP_STATUS_OK;
}

static mcp_status add_rules(int ruleset, uint64_t handled, mcp_err *err)
{
    mcp_status st = MCP_STATUS_OK;
    for (int i = 0; st == MCP_STATUS_OK && i < settings.n_read; i++)
        st = allow_beneath(ruleset, settings.read_paths[i], FS_READ, handled, err);
    if (st == MCP_STATUS_OK && settings.write_dir) st = allow_beneath(ruleset, settings.write_dir, FS_STORE, handled, err);
    return st;
}

mcp_status mcp_sandbox_enter_loader(mcp_err *err)
{
    if (!settings.enabled || !settings.configured) return MCP_STATUS_OK;
    int abi = landlock_abi();
    mcp_status st = landlock_unavailable(abi, err);
    if (st != MCP_STATUS_OK) return st;
    uint64_t handled = handled_rights(abi);
    struct landlock_ruleset_attr attr = {.handled_access_fs = handled};
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0) return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "Landlock: landlock_create_ruleset: %s", strerror(errno));
    st = add_rules(ruleset, handled, err);
    if (st == MCP_STATUS_OK && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    if (st == MCP_STATUS_OK && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
        st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "Landlock: landlock_restrict_self: %s", strerror(errno));
    close(ruleset);
    return st;
}

/* ---- for the serving threads ---- */

static void warn_once(atomic_bool *said, const char *what, const char *msg)
{
    if (atomic_exchange(said, true) || !settings.say) return;
    char line[768];
    snprintf(line, sizeof line, "sandbox: %s: %s", what, msg);
    settings.say(settings.say_user, true, line);
}

void mcp_sandbox_enter_inference_or_warn(void)
{
    static atomic_bool said;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    if (mcp_sandbox_enter_inference(&err) != MCP_STATUS_OK)
        warn_once(&said, "inference threads run without a system call filter", msg);
}

void mcp_sandbox_enter_loader_or_warn(void)
{
    static atomic_bool said;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    if (mcp_sandbox_enter_loader(&err) != MCP_STATUS_OK)
        warn_once(&said, "model loaders run without file limits", msg);
}

/* ---- the start-up report ---- */

static void report_sandbox(mcp_sandbox_say_fn say, void *user)
{
    char line[768], why[512] = "";
    mcp_err err = {why, sizeof why};
    if (!settings.enabled) {
        say(user, false, "sandbox: off (--no-sandbox): inference threads may make any system call and model loaders "
                         "may open any file");
        return;
    }
    if (seccomp_missing(&err) != MCP_STATUS_OK) {
        snprintf(line, sizeof line, "sandbox: inference threads run without a system call filter: %s", why);
        say(user, true, line);
        return;
    }
    int abi = landlock_abi();
    if (landlock_unavailable(abi, &err) != MCP_STATUS_OK)
        snprintf(line, sizeof line, "sandbox: a seccomp filter on inference threads (other calls fail with EPERM); "
                                    "model loaders run without file limits: %s", why);
    else
        snprintf(line, sizeof line, "sandbox: a seccomp filter on inference threads (other calls fail with EPERM); "
                                    "Landlock ABI %d limits model loaders to reading %d model path%s%s",
                 abi, settings.n_read, settings.n_read == 1 ? "" : "s",
                 settings.write_dir ? " and writing the store" : "");
    say(user, abi < 0, line);
}

/* The cgroup v2 folder of this process ("/sys/fs/cgroup/..."), from the
 * "0::" line of /proc/self/cgroup; false when there is none. */
static bool own_cgroup(char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) != 0) continue;
        line[strcspn(line, "\n")] = '\0';
        found = (size_t)snprintf(out, cap, "/sys/fs/cgroup%s", line + 3) < cap;
    }
    fclose(f);
    return found;
}

static void report_cgroup(mcp_sandbox_say_fn say, void *user)
{
    char dir[4200], control[4300];
    bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 && own_cgroup(dir, sizeof dir);
    bool delegated = v2 && snprintf(control, sizeof control, "%s/cgroup.subtree_control", dir) < (int)sizeof control &&
                     access(dir, W_OK) == 0 && access(control, W_OK) == 0;
    if (delegated)
        say(user, false, "per-model limits: a descriptor's resources.cpus caps its threads and resources.memory its "
                         "allocations; the delegated cgroup v2 folder is not used for them");
    else
        say(user, true, "cgroup v2 is not delegated to the server: no cgroup holds a model; a descriptor's "
                        "resources.cpus caps its threads and resources.memory its allocations");
}

void mcp_sandbox_report(mcp_sandbox_say_fn say, void *user)
{
    if (!say) return;
    report_sandbox(say, user);
    report_cgroup(say, user);
}
