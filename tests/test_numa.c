/*
 * test_numa.c - NUMA-aware placement (cpuset, numa_node, pci_bus_id,
 * reserve_cores, bind, topology) and page-locked memory (cache_pin, pin).
 *
 * The contract:
 *   - precedence: cpuset > numa_node > pci_bus_id > default (every PU the
 *     process may use; with cfg.topology set, every PU of that topology);
 *   - order within the chosen set: cores in topology order, physical cores
 *     before hyper-threads (the first PU of each core, then the second PUs,
 *     ...); reserve_cores = N leaves the first N cores (all their PUs in the
 *     set) to the trainer (reserved_cpus); threads = 0 means one worker per
 *     remaining core; worker i gets the i-th PU of that order, wrapping;
 *   - stats: worker_cpu[i] is worker i's planned PU whether or not it is
 *     bound; placement_cpus is the hwloc list ("0,2,4-6") of the PUs the
 *     workers got; placement_node is the node of the chosen set, -1 when it
 *     spans several; placement_nodes counts them;
 *   - this machine with bind = 1: every worker thread ("coordl-w<i>") has an
 *     affinity of exactly its PU and the cache and ring are bound to the
 *     node(s); bind = 0 or a cfg.topology: nothing is bound;
 *   - bad settings: COORDL_ERR_INVALID, and coordl_errmsg(NULL) names the
 *     field;
 *   - pinning: the cache slab and the ring are page-locked when allowed
 *     (pinned_bytes), with a fallback to pageable memory (logged once) or a
 *     COORDL_ERR_NOMEM failure (COORDL_PIN_REQUIRED); the pin callback sees
 *     every arena at open and again at close.
 *
 * Synthetic topologies (hwloc builds), 16 PUs each:
 *   T2  "package:2 numa:1 core:4 pu:2": node 0 = PUs 0-7, node 1 = 8-15;
 *       core k = PUs 2k, 2k+1 (hyper-thread siblings adjacent).
 *   T2L the same with Linux-style numbering: core k = PUs k and k+8.
 *   T4  "package:2 group:2 numa:1 core:2 pu:2": node n = PUs 4n..4n+3.
 * and an hwloc v2 XML file written by the test: T2's shape with GPUs
 * 0000:17:00.0 under package 0, 0000:3b:00.0 under package 1 and
 * 0000:01:00.0 under a host bridge of the whole machine.
 *
 * Built with -DCOORDL_NO_HWLOC (as the library then is), numa_node,
 * pci_bus_id and topology must fail with COORDL_ERR_UNSUPPORTED, and the
 * tests on this machine (cpuset, reserve_cores, binding, pinning) run the
 * same with every PU counting as a core.
 *
 * Worker threads are found by name in /proc/self/task/<tid>/comm and their
 * affinity read with sched_getaffinity(tid). Set COORDL_TEST_VERBOSE=1 to
 * print each placement.
 */
#include "test_util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/mempolicy.h>

#ifndef COORDL_NO_HWLOC
#include <hwloc.h>
#endif

/* AddressSanitizer intercepts mlock()/munlock() and makes them no-ops that
 * return 0 (mlock2 is not intercepted): under ASan the kernel's VmLck
 * cannot confirm pinned_bytes, and locking cannot be made to fail. */
#if defined(__SANITIZE_ADDRESS__)
#define TN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TN_ASAN 1
#endif
#endif
#ifndef TN_ASAN
#define TN_ASAN 0
#endif

#if TN_ASAN
/* hwloc's PCI discovery plugin (loaded when pci_bus_id is set on this
 * machine; libpciaccess underneath) leaks about 1 KB per topology load, from
 * a plugin that is unloaded before the leak check: not coordl's. Its frames
 * have no frame pointers, so the full (slow) unwinder is needed for the
 * suppression to see hwloc_topology_load on the stack. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:hwloc_topology_load\n";
}
#endif

#define N_ITEMS 24 /* 2 classes x 12 */
#define MAX_W 64   /* worker_cpu[] entries */

static char *g_dir;
static char *g_root;
static char *g_xml; /* hwloc XML with PCI devices (hwloc builds) */
static cpu_set_t g_proc_mask; /* the process's affinity at start */
static int g_verbose;

static const tu_folder_spec g_spec = {2, 12, 16, 16, 0, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 5};

#define T2 "synthetic:package:2 numa:1 core:4 pu:2"
#define T2L "synthetic:package:2 numa:1 core:4 pu:2(indexes=0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15)"
#define T4 "synthetic:package:2 group:2 numa:1 core:2 pu:2"

/* ===================================================================== */
/* helpers                                                               */
/* ===================================================================== */

static coordl_config base_config(void)
{
    coordl_config cfg = tu_config(g_root);
    cfg.out_w = cfg.out_h = 8; /* placement is the subject: keep prep cheap */
    cfg.cache_pin = COORDL_PIN_OFF;
    return cfg;
}

/* Runs one whole epoch: the loader must work whatever the placement. */
static void run_one_epoch(coordl *L, const char *what)
{
    tu_run run = {0};
    coordl_status rc = tu_run_epochs(L, 1, &run);
    if (rc != COORDL_OK)
        fail_msg("%s: epoch failed: %s: %s", what, coordl_strerror(rc), coordl_errmsg(L));
    if (run.nrows != N_ITEMS)
        fail_msg("%s: epoch gave %zu rows, expected %d", what, run.nrows, N_ITEMS);
    tu_run_free(&run);
}

/* hwloc list syntax of a set of PUs given as a list (any order, repeats). */
static void list_string(const int *pus, int n, char *out, size_t cap)
{
    static unsigned char in[CPU_SETSIZE];
    memset(in, 0, sizeof in);
    for (int i = 0; i < n; i++)
        if (pus[i] >= 0 && pus[i] < CPU_SETSIZE)
            in[pus[i]] = 1;
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < CPU_SETSIZE; i++) {
        if (!in[i])
            continue;
        int j = i;
        while (j + 1 < CPU_SETSIZE && in[j + 1])
            j++;
        int k = j > i ? snprintf(out + len, cap - len, "%s%d-%d", len ? "," : "", i, j)
                      : snprintf(out + len, cap - len, "%s%d", len ? "," : "", i);
        assert_true(k > 0 && (size_t)k < cap - len);
        len += (size_t)k;
        i = j;
    }
}

static void mask_string(const cpu_set_t *m, char *out, size_t cap)
{
    int pus[CPU_SETSIZE], n = 0;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, m))
            pus[n++] = i;
    list_string(pus, n, out, cap);
}

/* ---- worker threads --------------------------------------------------- */

/* Thread ids of coordl-w threads that existed before the handle under test
 * was opened (left by a test that failed before coordl_close): ignored. */
static pid_t g_old[4096];
static int g_nold;

static int is_old(pid_t t)
{
    for (int i = 0; i < g_nold; i++)
        if (g_old[i] == t)
            return 1;
    return 0;
}

/* Fills tids[i] with the thread id of "coordl-w<i>" (0 if absent) for
 * i < max; returns the number of coordl-w threads found. With
 * snapshot = 1, records every coordl-w thread as old instead. */
static int scan_workers(pid_t *tids, int max, int snapshot)
{
    for (int i = 0; i < max; i++)
        tids[i] = 0;
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread just exited */
        if (!fgets(comm, sizeof comm, f))
            comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        int idx = -1, end = 0;
        if (sscanf(comm, "coordl-w%d%n", &idx, &end) == 1 && comm[end] == '\0' && idx >= 0) {
            pid_t t = (pid_t)atoi(e->d_name);
            if (snapshot) {
                if (g_nold < 4096)
                    g_old[g_nold++] = t;
                continue;
            }
            if (is_old(t))
                continue;
            found++;
            if (idx < max)
                tids[idx] = t;
        }
    }
    closedir(d);
    return found;
}

static int find_workers(pid_t *tids, int max)
{
    return scan_workers(tids, max, 0);
}

/* Call before opening the handle whose workers are to be checked. */
static void snapshot_old_workers(void)
{
    g_nold = 0;
    scan_workers(NULL, 0, 1);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Checks the affinity of every worker thread: bound = 1: exactly
 * {worker_cpu[i]}; bound = 0: the process's mask `proc`. Waits (up to 5 s)
 * for the threads to name and bind themselves, so a library that does that
 * from inside the thread is not failed by a race. */
static void check_worker_affinity(const char *what, const coordl_stats *st, int bound,
                                  const cpu_set_t *proc)
{
    int n = (int)st->threads;
    assert_true(n > 0 && n <= MAX_W);
    pid_t tids[MAX_W];
    int ok = 0;
    char detail[1024] = "";
    for (int tries = 0; tries < 500 && !ok; tries++) {
        if (tries)
            sleep_ms(10);
        int found = find_workers(tids, MAX_W);
        if (found != n) {
            snprintf(detail, sizeof detail, "%d threads named coordl-w<i>, expected %d", found, n);
            continue;
        }
        ok = 1;
        for (int i = 0; i < n && ok; i++) {
            if (!tids[i]) {
                snprintf(detail, sizeof detail, "no thread named coordl-w%d", i);
                ok = 0;
                break;
            }
            cpu_set_t m, want;
            CPU_ZERO(&m);
            if (sched_getaffinity(tids[i], sizeof m, &m) != 0) {
                snprintf(detail, sizeof detail, "sched_getaffinity(coordl-w%d): %s", i,
                         strerror(errno));
                ok = 0;
                break;
            }
            if (bound) {
                CPU_ZERO(&want);
                if (st->worker_cpu[i] >= 0 && st->worker_cpu[i] < CPU_SETSIZE)
                    CPU_SET(st->worker_cpu[i], &want);
            } else {
                want = *proc;
            }
            if (!CPU_EQUAL(&m, &want)) {
                char a[256], b[256];
                mask_string(&m, a, sizeof a);
                mask_string(&want, b, sizeof b);
                snprintf(detail, sizeof detail, "coordl-w%d (tid %d) may run on \"%s\", expected \"%s\"",
                         i, (int)tids[i], a, b);
                ok = 0;
            }
        }
    }
    if (!ok)
        fail_msg("%s: worker affinity: %s", what, detail);
}

/* ---- expected placements ---------------------------------------------- */

typedef struct {
    int threads;          /* expected stats.threads */
    int worker[MAX_W];    /* expected worker_cpu[0..threads) */
    const char *cpus;     /* expected placement_cpus */
    const char *reserved; /* expected reserved_cpus */
    int node;             /* expected placement_node; INT32_MIN: do not check */
    unsigned nodes;       /* expected placement_nodes; 0: do not check */
} expect_t;

static void print_stats(const char *what, const coordl_stats *st)
{
    if (!g_verbose)
        return;
    char w[1024];
    size_t len = 0;
    w[0] = '\0';
    for (uint32_t i = 0; i < st->threads && i < MAX_W; i++)
        len += (size_t)snprintf(w + len, sizeof w - len, "%s%d", i ? "," : "", (int)st->worker_cpu[i]);
    print_message("  [placement] %-44s cpus=\"%s\" reserved=\"%s\" node=%d nodes=%u threads=%u "
                  "workers=[%s] bound=%u mem=%d\n",
                  what, st->placement_cpus, st->reserved_cpus, (int)st->placement_node,
                  (unsigned)st->placement_nodes, (unsigned)st->threads, w,
                  (unsigned)st->threads_bound, (int)st->memory_bound);
}

static void check_expect(const char *what, const coordl_stats *st, const expect_t *e)
{
    print_stats(what, st);
    if ((int)st->threads != e->threads)
        fail_msg("%s: %u threads, expected %d", what, (unsigned)st->threads, e->threads);
    for (int i = 0; i < e->threads && i < MAX_W; i++)
        if (st->worker_cpu[i] != e->worker[i])
            fail_msg("%s: worker_cpu[%d] = %d, expected %d", what, i, (int)st->worker_cpu[i],
                     e->worker[i]);
    if (strcmp(st->placement_cpus, e->cpus) != 0)
        fail_msg("%s: placement_cpus \"%s\", expected \"%s\"", what, st->placement_cpus, e->cpus);
    if (strcmp(st->reserved_cpus, e->reserved) != 0)
        fail_msg("%s: reserved_cpus \"%s\", expected \"%s\"", what, st->reserved_cpus, e->reserved);
    if (e->node != INT32_MIN && st->placement_node != e->node)
        fail_msg("%s: placement_node %d, expected %d", what, (int)st->placement_node, e->node);
    if (e->nodes && st->placement_nodes != e->nodes)
        fail_msg("%s: placement_nodes %u, expected %u", what, (unsigned)st->placement_nodes, e->nodes);
}

/* Opens cfg on a simulated topology (or this machine with bind = 0) and
 * checks the plan: nothing bound, workers' affinity unchanged, the loader
 * runs an epoch. */
static void check_plan_unbound(const char *what, const coordl_config *cfg, const expect_t *e)
{
    cpu_set_t proc;
    assert_int_equal(sched_getaffinity(0, sizeof proc, &proc), 0);
    snapshot_old_workers();
    coordl *L = tu_open(cfg);
    run_one_epoch(L, what);
    coordl_stats st;
    coordl_get_stats(L, &st);
    check_expect(what, &st, e);
    if (st.threads_bound != 0)
        fail_msg("%s: threads_bound %u, expected 0 (nothing is bound)", what, (unsigned)st.threads_bound);
    if (st.memory_bound != 0)
        fail_msg("%s: memory_bound %d, expected 0 (nothing is bound)", what, (int)st.memory_bound);
    check_worker_affinity(what, &st, 0, &proc);
    coordl_close(L);
}

/* Opens and expects failure with `want` and coordl_errmsg(NULL) naming
 * `field`. */
static void expect_open_fails(const char *what, const coordl_config *cfg, coordl_status want,
                              const char *field)
{
    static char not_null;
    coordl *L = (coordl *)(void *)&not_null; /* the open must set it to NULL */
    coordl_status rc = coordl_open(cfg, &L);
    if (rc == COORDL_OK) {
        coordl_stats st;
        coordl_get_stats(L, &st);
        coordl_close(L);
        fail_msg("%s: coordl_open succeeded (placement_cpus \"%s\"), expected %s", what,
                 st.placement_cpus, coordl_strerror(want));
    }
    if (rc != want)
        fail_msg("%s: coordl_open = %d (%s): %s; expected %s", what, (int)rc, coordl_strerror(rc),
                 coordl_errmsg(NULL), coordl_strerror(want));
    assert_null(L);
    const char *msg = coordl_errmsg(NULL);
    if (!msg || !strstr(msg, field))
        fail_msg("%s: error message \"%s\" does not name %s", what, msg ? msg : "(null)", field);
    if (g_verbose)
        print_message("  [error] %-40s %s: %s\n", what, coordl_strerror(rc), msg);
}

/* ---- this machine ----------------------------------------------------- */

/* The PUs of `set` core by core (cores in topology order) and in coordl's
 * worker order (first PUs of every core, then second PUs, ...): the test's
 * oracle for this machine. Without hwloc each PU is a core, in increasing
 * order. */
typedef struct {
    int ncores;
    int npus;
    int core_start[CPU_SETSIZE + 1]; /* PUs of core c: pus[core_start[c]..core_start[c+1]) */
    int pus[CPU_SETSIZE];            /* PUs core by core, topology order */
    int order[CPU_SETSIZE];          /* worker order: first PUs, then seconds, ... */
} machine_plan;

static void plan_machine(const cpu_set_t *set, machine_plan *mp)
{
    memset(mp, 0, sizeof *mp);
#ifndef COORDL_NO_HWLOC
    hwloc_topology_t topo;
    assert_int_equal(hwloc_topology_init(&topo), 0);
    assert_int_equal(hwloc_topology_load(topo), 0);
    static unsigned char seen[CPU_SETSIZE];
    memset(seen, 0, sizeof seen);
    for (hwloc_obj_t core = NULL; (core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core));) {
        int first = mp->npus;
        for (int i = hwloc_bitmap_first(core->cpuset); i >= 0; i = hwloc_bitmap_next(core->cpuset, i))
            if (i < CPU_SETSIZE && CPU_ISSET(i, set) && !seen[i]) {
                seen[i] = 1;
                mp->pus[mp->npus++] = i;
            }
        if (mp->npus > first)
            mp->core_start[mp->ncores++] = first;
    }
    for (int i = 0; i < CPU_SETSIZE; i++) /* PUs under no core: a core each */
        if (CPU_ISSET(i, set) && !seen[i]) {
            mp->core_start[mp->ncores++] = mp->npus;
            mp->pus[mp->npus++] = i;
        }
    hwloc_topology_destroy(topo);
#else
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, set)) {
            mp->core_start[mp->ncores++] = mp->npus;
            mp->pus[mp->npus++] = i;
        }
#endif
    mp->core_start[mp->ncores] = mp->npus;
    int n = 0;
    for (int r = 0;; r++) {
        int added = 0;
        for (int c = 0; c < mp->ncores; c++)
            if (mp->core_start[c] + r < mp->core_start[c + 1]) {
                mp->order[n++] = mp->pus[mp->core_start[c] + r];
                added = 1;
            }
        if (!added)
            break;
    }
    assert_int_equal(n, mp->npus);
}

/* Worker order after reserving the first `reserve` cores. */
static int plan_order_reserved(const machine_plan *mp, int reserve, int *order)
{
    int n = 0;
    for (int r = 0;; r++) {
        int added = 0;
        for (int c = reserve; c < mp->ncores; c++)
            if (mp->core_start[c] + r < mp->core_start[c + 1]) {
                order[n++] = mp->pus[mp->core_start[c] + r];
                added = 1;
            }
        if (!added)
            break;
    }
    return n;
}

#ifndef COORDL_NO_HWLOC
static int count_numa_nodes(void)
{
    DIR *d = opendir("/sys/devices/system/node");
    if (!d)
        return 1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int k, end = 0;
        if (sscanf(e->d_name, "node%d%n", &k, &end) == 1 && e->d_name[end] == '\0')
            n++;
    }
    closedir(d);
    return n ? n : 1;
}
#endif

/* Builds the expectation for this machine from the oracle: reserve the
 * first `reserve` cores of `set`, `threads` workers (0: one per remaining
 * core). */
static void expect_machine(const cpu_set_t *set, int reserve, int threads, expect_t *e)
{
    static machine_plan mp;
    static int order[CPU_SETSIZE];
    static char cpus[1024], reserved[1024];
    plan_machine(set, &mp);
    assert_true(reserve < mp.ncores);
    int n = plan_order_reserved(&mp, reserve, order);
    memset(e, 0, sizeof *e);
    e->threads = threads ? threads : mp.ncores - reserve;
    assert_true(e->threads <= MAX_W);
    int got[MAX_W];
    for (int i = 0; i < e->threads; i++)
        e->worker[i] = got[i] = order[i % n];
    list_string(got, e->threads, cpus, sizeof cpus);
    list_string(mp.pus, mp.core_start[reserve], reserved, sizeof reserved);
    e->cpus = cpus;
    e->reserved = reserved;
#ifndef COORDL_NO_HWLOC
    if (count_numa_nodes() == 1) {
        e->node = 0;
        e->nodes = 1;
    } else { /* not this project's CI machine: do not guess */
        e->node = INT32_MIN;
        e->nodes = 0;
    }
#else
    e->node = INT32_MIN; /* not known without hwloc */
    e->nodes = 0;
#endif
}

/* The memory policy of the page at addr (get_mempolicy MPOL_F_ADDR). */
static int area_policy(void *addr, unsigned long *mask, unsigned long maxnode)
{
    int mode = -1;
    memset(mask, 0, maxnode / 8);
    if (syscall(SYS_get_mempolicy, &mode, mask, maxnode, addr, (unsigned long)MPOL_F_ADDR) != 0)
        fail_msg("get_mempolicy: %s", strerror(errno));
    return mode;
}

/* ---- pin callback recorder ------------------------------------------- */

typedef struct {
    int n;
    struct {
        void *addr;
        size_t bytes;
        int reg;
    } ev[16];
    int ret; /* what the callback returns */
} pin_rec;

static int pin_record(void *user, void *addr, size_t bytes, int register_it)
{
    pin_rec *r = user;
    if (r->n < 16) {
        r->ev[r->n].addr = addr;
        r->ev[r->n].bytes = bytes;
        r->ev[r->n].reg = register_it;
    }
    r->n++;
    return r->ret;
}

/* VmLck of this process in bytes. */
static uint64_t vm_locked(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    unsigned long long kb = 0;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmLck: %llu kB", &kb) == 1) {
            found = 1;
            break;
        }
    fclose(f);
    assert_true(found);
    return (uint64_t)kb * 1024;
}

/* ---- log recorder: messages about page-locking ------------------------ */

typedef struct {
    int lock_msgs; /* messages that mention locking */
    int total;
    char msg[4][512]; /* the first 4 of them */
} log_rec;

/* 1 if msg is about page-locking: "lock" at the start of a word, or in
 * "mlock", "memlock" (RLIMIT_MEMLOCK), "unlock", "page-locked",
 * "CAP_IPC_LOCK"; not in "block" or "clock". */
static int mentions_locking(const char *msg)
{
    char low[1024];
    size_t n = strlen(msg);
    if (n >= sizeof low)
        n = sizeof low - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)msg[i]);
    low[n] = '\0';
    for (const char *p = low; (p = strstr(p, "lock")) != NULL; p += 4) {
        char prev = p > low ? p[-1] : ' ';
        if (!isalpha((unsigned char)prev) || prev == 'm' || prev == 'n')
            return 1;
    }
    return 0;
}

/* Counts the warnings (and errors) about page-locking; informational
 * lines (a placement summary that says "0 bytes page-locked") are not
 * counted. Called from any thread. */
static void log_lock_fn(void *user, coordl_log_level level, const char *msg)
{
    log_rec *r = user;
    __atomic_fetch_add(&r->total, 1, __ATOMIC_SEQ_CST);
    if (msg && level <= COORDL_LOG_WARN && mentions_locking(msg)) {
        int k = __atomic_fetch_add(&r->lock_msgs, 1, __ATOMIC_SEQ_CST);
        if (k < 4)
            snprintf(r->msg[k], sizeof r->msg[k], "%s", msg);
    }
}

/* ===================================================================== */
/* setup                                                                 */
/* ===================================================================== */

#ifndef COORDL_NO_HWLOC
/* hwloc v2 XML: 2 packages, each a NUMA node with 4 cores x 2 PUs (T2's
 * shape), a GPU 0000:17:00.0 behind a host bridge in package 0, a GPU
 * 0000:3b:00.0 in package 1, and 0000:01:00.0 behind a host bridge of the
 * whole machine. */
static void write_pci_xml(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    int gp = 1;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
               "<topology version=\"2.0\">\n");
    fprintf(f, "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x0000ffff\" "
               "complete_cpuset=\"0x0000ffff\" allowed_cpuset=\"0x0000ffff\" nodeset=\"0x00000003\" "
               "complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\" gp_index=\"%d\">\n",
            gp++);
    static const unsigned bus[2] = {0x17, 0x3b};
    for (unsigned p = 0; p < 2; p++) {
        unsigned pkg = 0xffu << (8 * p), ns = 1u << p;
        fprintf(f, "    <object type=\"Package\" os_index=\"%u\" cpuset=\"0x%08x\" "
                   "complete_cpuset=\"0x%08x\" nodeset=\"0x%08x\" complete_nodeset=\"0x%08x\" "
                   "gp_index=\"%d\">\n", p, pkg, pkg, ns, ns, gp++);
        fprintf(f, "      <object type=\"NUMANode\" os_index=\"%u\" cpuset=\"0x%08x\" "
                   "complete_cpuset=\"0x%08x\" nodeset=\"0x%08x\" complete_nodeset=\"0x%08x\" "
                   "gp_index=\"%d\" local_memory=\"1073741824\"/>\n", p, pkg, pkg, ns, ns, gp++);
        for (unsigned c = 0; c < 4; c++) {
            unsigned core = p * 4 + c, cm = 3u << (2 * core);
            fprintf(f, "      <object type=\"Core\" os_index=\"%u\" cpuset=\"0x%08x\" "
                       "complete_cpuset=\"0x%08x\" nodeset=\"0x%08x\" complete_nodeset=\"0x%08x\" "
                       "gp_index=\"%d\">\n", core, cm, cm, ns, ns, gp++);
            for (unsigned t = 0; t < 2; t++) {
                unsigned pu = 2 * core + t, pm = 1u << pu;
                fprintf(f, "        <object type=\"PU\" os_index=\"%u\" cpuset=\"0x%08x\" "
                           "complete_cpuset=\"0x%08x\" nodeset=\"0x%08x\" "
                           "complete_nodeset=\"0x%08x\" gp_index=\"%d\"/>\n",
                        pu, pm, pm, ns, ns, gp++);
            }
            fprintf(f, "      </object>\n");
        }
        fprintf(f, "      <object type=\"Bridge\" gp_index=\"%d\" bridge_type=\"0-1\" depth=\"0\" "
                   "bridge_pci=\"0000:[%02x-%02x]\">\n", gp++, bus[p], bus[p]);
        fprintf(f, "        <object type=\"PCIDev\" gp_index=\"%d\" pci_busid=\"0000:%02x:00.0\" "
                   "pci_type=\"0302 [10de:20b0] [10de:1450] a1\" pci_link_speed=\"0.000000\"/>\n",
                gp++, bus[p]);
        fprintf(f, "      </object>\n    </object>\n");
    }
    fprintf(f, "    <object type=\"Bridge\" gp_index=\"%d\" bridge_type=\"0-1\" depth=\"0\" "
               "bridge_pci=\"0000:[01-01]\">\n", gp++);
    fprintf(f, "      <object type=\"PCIDev\" gp_index=\"%d\" pci_busid=\"0000:01:00.0\" "
               "pci_type=\"0302 [10de:20b0] [10de:1450] a1\" pci_link_speed=\"0.000000\"/>\n",
            gp++);
    fprintf(f, "    </object>\n  </object>\n</topology>\n");
    assert_int_equal(fclose(f), 0);
    tu_write_file(path, text, len);
    free(text);
}

/* The test's own data must be right: the XML loads in hwloc and each GPU's
 * first non-I/O ancestor has the cpuset the tests expect. */
static void verify_pci_xml(const char *path)
{
    hwloc_topology_t topo;
    assert_int_equal(hwloc_topology_init(&topo), 0);
    assert_int_equal(hwloc_topology_set_xml(topo, path), 0);
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    assert_int_equal(hwloc_topology_load(topo), 0);
    assert_int_equal(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU), 16);
    assert_int_equal(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE), 2);
    static const struct {
        const char *id, *cpus;
    } dev[3] = {{"0000:17:00.0", "0-7"}, {"0000:3b:00.0", "8-15"}, {"0000:01:00.0", "0-15"}};
    for (int i = 0; i < 3; i++) {
        hwloc_obj_t o = hwloc_get_pcidev_by_busidstring(topo, dev[i].id);
        if (!o)
            fail_msg("test XML: hwloc does not see PCI device %s", dev[i].id);
        hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(topo, o);
        assert_non_null(a);
        char buf[64];
        hwloc_bitmap_list_snprintf(buf, sizeof buf, a->cpuset);
        if (strcmp(buf, dev[i].cpus) != 0)
            fail_msg("test XML: %s is local to \"%s\", meant \"%s\"", dev[i].id, buf, dev[i].cpus);
    }
    hwloc_topology_destroy(topo);
}
#endif

static int group_setup(void **state)
{
    (void)state;
    g_verbose = getenv("COORDL_TEST_VERBOSE") && *getenv("COORDL_TEST_VERBOSE");
    g_dir = tu_mkdtemp();
    g_root = tu_join(g_dir, "data");
    tu_make_image_folder(g_root, &g_spec);
    g_xml = tu_join(g_dir, "topo-pci.xml");
#ifndef COORDL_NO_HWLOC
    write_pci_xml(g_xml);
    verify_pci_xml(g_xml);
#endif
    assert_int_equal(sched_getaffinity(0, sizeof g_proc_mask, &g_proc_mask), 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_root);
    free(g_xml);
    return 0;
}

/* Per-test teardown: whatever a test did to the affinity is undone. */
static int restore_affinity(void **state)
{
    (void)state;
    sched_setaffinity(0, sizeof g_proc_mask, &g_proc_mask);
    return 0;
}

/* ===================================================================== */
/* defaults                                                              */
/* ===================================================================== */

/* The new fields default to "unset": no cpuset, no node, no device, no
 * reserve, bind on, this machine. */
static void test_config_defaults(void **state)
{
    (void)state;
    coordl_config cfg = coordl_config_default();
    assert_null(cfg.cpuset);
    assert_int_equal(cfg.numa_node, -1);
    assert_null(cfg.pci_bus_id);
    assert_int_equal(cfg.reserve_cores, 0);
    assert_int_equal(cfg.bind, 1);
    assert_null(cfg.topology);
    assert_int_equal(cfg.cache_pin, COORDL_PIN_TRY);
    assert_null(cfg.pin);
}

/* ===================================================================== */
/* this machine                                                          */
/* ===================================================================== */

/* Opens cfg on this machine with bind = 1 and checks the plan against the
 * expectation, that every worker is bound to exactly its PU, and that the
 * stats say so as soon as coordl_open returns (the header files these
 * fields under "placement chosen at open"). */
static void check_machine_bound(const char *what, const coordl_config *cfg, const expect_t *e)
{
    snapshot_old_workers();
    coordl *L = tu_open(cfg);
    coordl_stats st0, st;
    coordl_get_stats(L, &st0); /* right after open */
    run_one_epoch(L, what);
    coordl_get_stats(L, &st);
    check_expect(what, &st, e);
#ifndef COORDL_NO_HWLOC
    if (st.memory_bound != 1)
        fail_msg("%s: memory_bound %d, expected 1", what, (int)st.memory_bound);
#endif
    check_worker_affinity(what, &st, 1, NULL);
    if ((int)st0.threads_bound != e->threads)
        fail_msg("%s: threads_bound %u right after coordl_open (%u after an epoch), expected %d",
                 what, (unsigned)st0.threads_bound, (unsigned)st.threads_bound, e->threads);
    coordl_close(L);
}

/* threads = 0: one worker per core of the process's PUs, worker i on the
 * i-th PU of the order, each thread's affinity exactly that PU. */
static void test_machine_default_binds_each_worker(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.threads = 0;
    expect_t e;
    expect_machine(&g_proc_mask, 0, 0, &e);
    check_machine_bound("this machine, default", &cfg, &e);
    /* explicit threads = the number of cores: the same plan */
    cfg.threads = e.threads;
    check_machine_bound("this machine, threads = cores", &cfg, &e);
}

/* More threads than PUs: the order wraps, every worker still bound to one
 * PU. */
static void test_machine_threads_wrap(void **state)
{
    (void)state;
    machine_plan *mp = malloc(sizeof *mp);
    assert_non_null(mp);
    plan_machine(&g_proc_mask, mp);
    int threads = 2 * mp->npus + 1;
    free(mp);
    if (threads > MAX_W)
        threads = MAX_W;
    coordl_config cfg = base_config();
    cfg.threads = threads;
    expect_t e;
    expect_machine(&g_proc_mask, 0, threads, &e);
    check_machine_bound("this machine, threads = 2 x PUs + 1", &cfg, &e);
}

/* cpuset of one PU (the last one the process may use): all workers on it,
 * threads = 0 gives one worker. */
static void test_machine_cpuset_one_pu(void **state)
{
    (void)state;
    int last = -1;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &g_proc_mask))
            last = i;
    assert_true(last >= 0);
    char s[16];
    snprintf(s, sizeof s, "%d", last);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    coordl_config cfg = base_config();
    cfg.cpuset = s;
    cfg.threads = 0;
    expect_t e;
    expect_machine(&one, 0, 0, &e);
    assert_int_equal(e.threads, 1);
    assert_string_equal(e.cpus, s);
    check_machine_bound("this machine, cpuset = last PU", &cfg, &e);
    cfg.threads = 3;
    expect_machine(&one, 0, 3, &e);
    check_machine_bound("this machine, cpuset = last PU, 3 threads", &cfg, &e);
}

/* reserve_cores = 1: the first core's PUs are reported reserved and no
 * worker runs there; threads = 0 gives one worker per remaining core. */
static void test_machine_reserve_cores(void **state)
{
    (void)state;
    machine_plan *mp = malloc(sizeof *mp);
    assert_non_null(mp);
    plan_machine(&g_proc_mask, mp);
    int ncores = mp->ncores;
    free(mp);
    if (ncores < 2)
        skip(); /* visible in the output: a 1-core machine cannot reserve */
    coordl_config cfg = base_config();
    cfg.threads = 0;
    cfg.reserve_cores = 1;
    expect_t e;
    expect_machine(&g_proc_mask, 1, 0, &e);
    check_machine_bound("this machine, reserve_cores = 1", &cfg, &e);
    cfg.threads = 3;
    expect_machine(&g_proc_mask, 1, 3, &e);
    check_machine_bound("this machine, reserve_cores = 1, 3 threads", &cfg, &e);
    /* with a cpuset: the reserve counts cores of the chosen set */
    char s[256];
    expect_t all;
    expect_machine(&g_proc_mask, 0, 0, &all);
    snprintf(s, sizeof s, "%s", all.cpus); /* every PU, spelled as a list */
    cfg.cpuset = s;
    cfg.threads = 0;
    expect_machine(&g_proc_mask, 1, 0, &e);
    check_machine_bound("this machine, cpuset = all PUs, reserve 1", &cfg, &e);
}

/* bind = 0: the same plan is reported (worker_cpu = planned PUs), nothing
 * is bound, every worker keeps the process's affinity. */
static void test_machine_bind_off(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.threads = 0;
    cfg.bind = 0;
    expect_t e;
    expect_machine(&g_proc_mask, 0, 0, &e);
    check_plan_unbound("this machine, bind = 0", &cfg, &e);
}

/* The default set is the PUs the process may use: with the affinity
 * narrowed to one PU, the workers go there only, and a cpuset naming
 * another PU is refused. (The teardown restores the affinity.) */
static void test_machine_follows_process_affinity(void **state)
{
    (void)state;
    int first = -1, last = -1;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &g_proc_mask)) {
            if (first < 0)
                first = i;
            last = i;
        }
    if (first == last)
        skip(); /* visible: a 1-PU machine cannot narrow */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    coordl_config cfg = base_config();
    cfg.threads = 0;
    expect_t e;
    expect_machine(&one, 0, 0, &e);
    check_machine_bound("this machine, process narrowed to last PU", &cfg, &e);
    char s[16];
    snprintf(s, sizeof s, "%d", first);
    cfg.cpuset = s;
    expect_open_fails("cpuset outside a narrowed process mask", &cfg, COORDL_ERR_INVALID, "cpuset");
#ifndef COORDL_NO_HWLOC
    /* a topology's default is every PU of that topology, whatever this
     * process's mask */
    cfg.cpuset = NULL;
    cfg.topology = T2;
    expect_t t = {8, {0, 2, 4, 6, 8, 10, 12, 14}, "0,2,4,6,8,10,12,14", "", -1, 2};
    cfg.threads = 0;
    coordl *L = tu_open(&cfg);
    coordl_stats st;
    coordl_get_stats(L, &st);
    check_expect("T2 default from a narrowed process", &st, &t);
    coordl_close(L);
#endif
    assert_int_equal(sched_setaffinity(0, sizeof g_proc_mask, &g_proc_mask), 0);
}

/* The cache slab and the ring carry the memory policy of the placement:
 * bound to the node (bind = 1 on a 1-node machine), default with bind = 0.
 * The arenas are found through the pin callback. */
static void test_machine_memory_policy(void **state)
{
    (void)state;
    for (int bind = 1; bind >= 0; bind--) {
        pin_rec pr;
        memset(&pr, 0, sizeof pr);
        coordl_config cfg = base_config();
        cfg.threads = 0;
        cfg.bind = bind;
        cfg.cache_bytes = 1 << 20;
        cfg.pin = pin_record;
        cfg.pin_user = &pr;
        coordl *L = tu_open(&cfg);
        run_one_epoch(L, "memory policy");
        coordl_stats st;
        coordl_get_stats(L, &st);
        print_stats(bind ? "this machine, memory, bind = 1" : "this machine, memory, bind = 0", &st);
        assert_int_equal(pr.n, 2); /* cache and ring */
#ifndef COORDL_NO_HWLOC
        assert_int_equal(st.memory_bound, bind);
#endif
        static unsigned long mask[1024 / (8 * sizeof(unsigned long))];
        for (int r = 0; r < 2; r++) {
            int mode = area_policy(pr.ev[r].addr, mask, 1024);
            if (!st.memory_bound) {
                if (mode != MPOL_DEFAULT)
                    fail_msg("bind = %d, memory_bound 0: arena %d has policy %d, expected "
                             "MPOL_DEFAULT", bind, r, mode);
                continue;
            }
            if (st.placement_nodes > 1) {
                if (mode != MPOL_INTERLEAVE)
                    fail_msg("arena %d: policy %d, expected MPOL_INTERLEAVE over %u nodes", r, mode,
                             (unsigned)st.placement_nodes);
            } else {
                /* hwloc's BIND is MPOL_BIND, or MPOL_PREFERRED_MANY on
                 * recent kernels (hwloc >= 2.8 without STRICT) */
                if (mode != MPOL_BIND && mode != MPOL_PREFERRED && mode != MPOL_PREFERRED_MANY)
                    fail_msg("arena %d: policy %d, expected a bind to node %d", r, mode,
                             (int)st.placement_node);
                assert_true(st.placement_node >= 0);
                unsigned nd = (unsigned)st.placement_node;
                if (!(mask[nd / (8 * sizeof(unsigned long))] >> (nd % (8 * sizeof(unsigned long))) & 1))
                    fail_msg("arena %d: policy nodemask lacks node %u", r, nd);
            }
        }
        coordl_close(L);
    }
}

/* ===================================================================== */
/* bad settings (this machine; both builds)                              */
/* ===================================================================== */

static void test_bad_cpuset(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    static const char *malformed[] = {"0-", "a", "3-1", "1,,2", "", "-1", "0-1x", ",0", "0,",
                                      " ", "0x1", "1-2-3"};
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
        char what[64];
        snprintf(what, sizeof what, "malformed cpuset \"%s\"", malformed[i]);
        cfg.cpuset = malformed[i];
        expect_open_fails(what, &cfg, COORDL_ERR_INVALID, "cpuset");
    }
    /* PUs this process may not use */
    int absent = -1;
    for (int i = 0; i < CPU_SETSIZE && absent < 0; i++)
        if (!CPU_ISSET(i, &g_proc_mask))
            absent = i;
    assert_true(absent >= 0);
    char s[32];
    snprintf(s, sizeof s, "%d", absent);
    cfg.cpuset = s;
    expect_open_fails("cpuset of the first PU not allowed", &cfg, COORDL_ERR_INVALID, "cpuset");
    if (!CPU_ISSET(5, &g_proc_mask)) {
        cfg.cpuset = "5";
        expect_open_fails("cpuset \"5\"", &cfg, COORDL_ERR_INVALID, "cpuset");
    }
    snprintf(s, sizeof s, "0-%d", absent);
    cfg.cpuset = s;
    expect_open_fails("cpuset reaching past the allowed PUs", &cfg, COORDL_ERR_INVALID, "cpuset");
    cfg.cpuset = "100000";
    expect_open_fails("cpuset \"100000\"", &cfg, COORDL_ERR_INVALID, "cpuset");
    cfg.cpuset = "99999999999999999999";
    expect_open_fails("cpuset overflowing an int", &cfg, COORDL_ERR_INVALID, "cpuset");
}

static void test_bad_reserve_cores(void **state)
{
    (void)state;
    machine_plan *mp = malloc(sizeof *mp);
    assert_non_null(mp);
    plan_machine(&g_proc_mask, mp);
    int ncores = mp->ncores, last = mp->pus[mp->npus - 1];
    free(mp);
    coordl_config cfg = base_config();
    cfg.reserve_cores = ncores;
    expect_open_fails("reserve_cores = cores", &cfg, COORDL_ERR_INVALID, "reserve_cores");
    cfg.reserve_cores = ncores + 5;
    expect_open_fails("reserve_cores > cores", &cfg, COORDL_ERR_INVALID, "reserve_cores");
    cfg.reserve_cores = -1;
    expect_open_fails("reserve_cores = -1", &cfg, COORDL_ERR_INVALID, "reserve_cores");
    /* the reserve counts the cores of the chosen set, not the machine */
    char s[16];
    snprintf(s, sizeof s, "%d", last);
    cfg.cpuset = s;
    cfg.reserve_cores = 1;
    expect_open_fails("reserve_cores = 1 on a 1-PU cpuset", &cfg, COORDL_ERR_INVALID,
                      "reserve_cores");
}

/* ===================================================================== */
/* hwloc-only settings                                                   */
/* ===================================================================== */

#ifdef COORDL_NO_HWLOC

/* Without hwloc, numa_node, pci_bus_id and topology cannot be honoured:
 * COORDL_ERR_UNSUPPORTED naming the field (never silently ignored). */
static void test_no_hwloc_unsupported(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.numa_node = 0;
    expect_open_fails("numa_node = 0 without hwloc", &cfg, COORDL_ERR_UNSUPPORTED, "numa_node");
    cfg = base_config();
    cfg.pci_bus_id = "0000:3b:00.0";
    expect_open_fails("pci_bus_id without hwloc", &cfg, COORDL_ERR_UNSUPPORTED, "pci_bus_id");
    cfg = base_config();
    cfg.topology = T2;
    expect_open_fails("synthetic topology without hwloc", &cfg, COORDL_ERR_UNSUPPORTED, "topology");
    cfg.topology = g_xml;
    expect_open_fails("XML topology without hwloc", &cfg, COORDL_ERR_UNSUPPORTED, "topology");
}

#else

static void test_bad_numa_node(void **state)
{
    (void)state;
    int nodes = count_numa_nodes();
    coordl_config cfg = base_config();
    cfg.numa_node = nodes; /* OS indices 0..nodes-1 on an ordinary machine */
    expect_open_fails("numa_node past this machine's nodes", &cfg, COORDL_ERR_INVALID, "numa_node");
    cfg.numa_node = 12345;
    expect_open_fails("numa_node 12345", &cfg, COORDL_ERR_INVALID, "numa_node");
    cfg.numa_node = -2;
    expect_open_fails("numa_node -2", &cfg, COORDL_ERR_INVALID, "numa_node");
    cfg.topology = T2;
    cfg.numa_node = 2;
    expect_open_fails("numa_node 2 on T2", &cfg, COORDL_ERR_INVALID, "numa_node");
    cfg.topology = T4;
    cfg.numa_node = 4;
    expect_open_fails("numa_node 4 on T4", &cfg, COORDL_ERR_INVALID, "numa_node");
    /* node 0 of this machine is fine and bound */
    cfg = base_config();
    cfg.numa_node = 0;
    cfg.threads = 0;
    if (nodes == 1) {
        expect_t e;
        expect_machine(&g_proc_mask, 0, 0, &e);
        check_machine_bound("this machine, numa_node = 0", &cfg, &e);
    }
}

static void test_bad_pci_bus_id(void **state)
{
    (void)state;
    /* well-formed, absent from this machine (checked) */
    const char *absent = "0000:ff:1f.7";
    char sys[128];
    snprintf(sys, sizeof sys, "/sys/bus/pci/devices/%s", absent);
    assert_int_not_equal(access(sys, F_OK), 0);
    coordl_config cfg = base_config();
    cfg.pci_bus_id = absent;
    expect_open_fails("pci_bus_id absent from this machine", &cfg, COORDL_ERR_INVALID, "pci_bus_id");
    static const char *malformed[] = {"", "zz", "0000:3b:00", "0000:3b:00.0.1", "3b",
                                      "0000:3b:00.0 ", "gpu0", "0000:3g:00.0"};
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
        char what[64];
        snprintf(what, sizeof what, "malformed pci_bus_id \"%s\"", malformed[i]);
        cfg.pci_bus_id = malformed[i];
        expect_open_fails(what, &cfg, COORDL_ERR_INVALID, "pci_bus_id");
    }
    /* absent from the XML topology, and any id on a topology without PCI */
    cfg.topology = g_xml;
    cfg.pci_bus_id = "0000:99:00.0";
    expect_open_fails("pci_bus_id absent from the XML", &cfg, COORDL_ERR_INVALID, "pci_bus_id");
    cfg.topology = T2;
    cfg.pci_bus_id = "0000:3b:00.0";
    expect_open_fails("pci_bus_id on a synthetic topology", &cfg, COORDL_ERR_INVALID, "pci_bus_id");
}

static void test_bad_topology(void **state)
{
    (void)state;
    coordl_config cfg = base_config();
    cfg.topology = "synthetic:florp:2 pu:2";
    expect_open_fails("synthetic topology with an unknown type", &cfg, COORDL_ERR_INVALID, "topology");
    cfg.topology = "synthetic:";
    expect_open_fails("empty synthetic topology", &cfg, COORDL_ERR_INVALID, "topology");
    /* a missing file or a file that is not XML: some error, naming topology */
    char *missing = tu_join(g_dir, "no-such-topology.xml");
    char *junk = tu_join(g_dir, "junk.xml");
    tu_write_file(junk, "not xml at all\n", 15);
    const char *paths[2] = {missing, junk};
    for (int i = 0; i < 2; i++) {
        cfg.topology = paths[i];
        coordl *L = NULL;
        coordl_status rc = coordl_open(&cfg, &L);
        if (rc == COORDL_OK) {
            coordl_close(L);
            fail_msg("topology \"%s\": coordl_open succeeded", paths[i]);
        }
        if (!strstr(coordl_errmsg(NULL), "topology"))
            fail_msg("topology \"%s\": message \"%s\" does not name topology", paths[i],
                     coordl_errmsg(NULL));
        if (g_verbose)
            print_message("  [error] topology %-31s %s: %s\n", i ? "junk" : "missing",
                          coordl_strerror(rc), coordl_errmsg(NULL));
    }
    free(missing);
    free(junk);
    /* a cpuset outside the topology's PUs */
    cfg.topology = T2;
    cfg.cpuset = "64-70";
    expect_open_fails("cpuset 64-70 on T2 (16 PUs)", &cfg, COORDL_ERR_INVALID, "cpuset");
    cfg.cpuset = "15-16";
    expect_open_fails("cpuset 15-16 on T2", &cfg, COORDL_ERR_INVALID, "cpuset");
    /* reserve_cores against the chosen set of a topology */
    cfg.cpuset = NULL;
    cfg.numa_node = 1;
    cfg.reserve_cores = 4;
    expect_open_fails("reserve_cores 4 of node 1's 4 cores on T2", &cfg, COORDL_ERR_INVALID,
                      "reserve_cores");
    cfg.topology = T4;
    cfg.numa_node = 3;
    cfg.reserve_cores = 2;
    expect_open_fails("reserve_cores 2 of node 3's 2 cores on T4", &cfg, COORDL_ERR_INVALID,
                      "reserve_cores");
}

/* ---- synthetic topologies -------------------------------------------- */

static void plan(const char *what, const char *topo, const char *cpuset, int numa_node,
                 const char *pci, int reserve, int threads, const expect_t *e)
{
    for (int bind = 1; bind >= 0; bind--) { /* a topology binds nothing either way */
        coordl_config cfg = base_config();
        cfg.topology = topo;
        cfg.cpuset = cpuset;
        cfg.numa_node = numa_node;
        cfg.pci_bus_id = pci;
        cfg.reserve_cores = reserve;
        cfg.threads = threads;
        cfg.bind = bind;
        char w[160];
        snprintf(w, sizeof w, "%s%s", what, bind ? "" : " (bind 0)");
        int verbose = g_verbose;
        g_verbose = verbose && bind; /* print each plan once */
        check_plan_unbound(w, &cfg, e);
        g_verbose = verbose;
    }
}

/* T2, 2 sockets x 4 cores x 2 hyper-threads, one NUMA node per socket. */
static void test_synthetic_two_sockets(void **state)
{
    (void)state;
    /* default: one worker per core, first PUs of every core */
    expect_t def = {8, {0, 2, 4, 6, 8, 10, 12, 14}, "0,2,4,6,8,10,12,14", "", -1, 2};
    plan("T2 default", T2, NULL, -1, NULL, 0, 0, &def);
    /* reserve 2: cores 0-1 (PUs 0-3) to the trainer */
    expect_t res = {6, {4, 6, 8, 10, 12, 14}, "4,6,8,10,12,14", "0-3", -1, 2};
    plan("T2 reserve_cores 2", T2, NULL, -1, NULL, 2, 0, &res);
    /* reserve 2 and 14 threads: all 12 remaining PUs, first then second
     * PUs, then wrap */
    expect_t res14 = {14, {4, 6, 8, 10, 12, 14, 5, 7, 9, 11, 13, 15, 4, 6}, "4-15", "0-3", -1, 2};
    plan("T2 reserve_cores 2, threads 14", T2, NULL, -1, NULL, 2, 14, &res14);
    /* node 1 */
    expect_t n1 = {4, {8, 10, 12, 14}, "8,10,12,14", "", 1, 1};
    plan("T2 numa_node 1", T2, NULL, 1, NULL, 0, 0, &n1);
    expect_t n1r = {3, {10, 12, 14}, "10,12,14", "8-9", 1, 1};
    plan("T2 numa_node 1, reserve_cores 1", T2, NULL, 1, NULL, 1, 0, &n1r);
    expect_t n1t6 = {6, {8, 10, 12, 14, 9, 11}, "8-12,14", "", 1, 1};
    plan("T2 numa_node 1, threads 6", T2, NULL, 1, NULL, 0, 6, &n1t6);
    expect_t n0 = {4, {0, 2, 4, 6}, "0,2,4,6", "", 0, 1};
    plan("T2 numa_node 0", T2, NULL, 0, NULL, 0, 0, &n0);
    /* a cpuset across the sockets: cores 3 (PUs 6-7) and 4 (PUs 8-9) */
    expect_t span = {2, {6, 8}, "6,8", "", -1, 2};
    plan("T2 cpuset 6-9", T2, "6-9", -1, NULL, 0, 0, &span);
    expect_t span4 = {4, {6, 8, 7, 9}, "6-9", "", -1, 2};
    plan("T2 cpuset 6-9, threads 4", T2, "6-9", -1, NULL, 0, 4, &span4);
    expect_t span5 = {5, {6, 8, 7, 9, 6}, "6-9", "", -1, 2};
    plan("T2 cpuset 6-9, threads 5 (wraps)", T2, "6-9", -1, NULL, 0, 5, &span5);
    expect_t spanr = {1, {8}, "8", "6-7", -1, 2};
    plan("T2 cpuset 6-9, reserve_cores 1", T2, "6-9", -1, NULL, 1, 0, &spanr);
    /* cpuset within one socket */
    expect_t in1 = {2, {8, 10}, "8,10", "", 1, 1};
    plan("T2 cpuset 8-11", T2, "8-11", -1, NULL, 0, 0, &in1);
    /* a cpuset that cuts cores: PU 1 (core 0), 2-3 (core 1), 4 (core 2) */
    expect_t cut = {4, {1, 2, 4, 3}, "1-4", "", 0, 1};
    plan("T2 cpuset 1-4, threads 4", T2, "1-4", -1, NULL, 0, 4, &cut);
    expect_t cutr = {2, {2, 4}, "2,4", "1", 0, 1};
    plan("T2 cpuset 1-4, reserve_cores 1", T2, "1-4", -1, NULL, 1, 0, &cutr);
    /* list syntax in, any order */
    expect_t odd = {3, {1, 9, 15}, "1,9,15", "", -1, 2};
    plan("T2 cpuset 15,9,1", T2, "15,9,1", -1, NULL, 0, 0, &odd);
    /* fewer threads than cores */
    expect_t t3 = {3, {0, 2, 4}, "0,2,4", "", -1, 2};
    plan("T2 threads 3", T2, NULL, -1, NULL, 0, 3, &t3);
    expect_t t1 = {1, {0}, "0", "", -1, 2};
    plan("T2 threads 1", T2, NULL, -1, NULL, 0, 1, &t1);
    /* more threads than cores: hyper-threads after every core's first PU */
    expect_t t10 = {10, {0, 2, 4, 6, 8, 10, 12, 14, 1, 3}, "0-4,6,8,10,12,14", "", -1, 2};
    plan("T2 threads 10", T2, NULL, -1, NULL, 0, 10, &t10);
}

/* T2 with Linux numbering (siblings k and k+8): physical cores first means
 * PUs 0-7 first. */
static void test_synthetic_linux_numbering(void **state)
{
    (void)state;
    expect_t def = {8, {0, 1, 2, 3, 4, 5, 6, 7}, "0-7", "", -1, 2};
    plan("T2L default", T2L, NULL, -1, NULL, 0, 0, &def);
    expect_t res = {6, {2, 3, 4, 5, 6, 7}, "2-7", "0-1,8-9", -1, 2};
    plan("T2L reserve_cores 2", T2L, NULL, -1, NULL, 2, 0, &res);
    expect_t t12 = {12, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, "0-11", "", -1, 2};
    plan("T2L threads 12", T2L, NULL, -1, NULL, 0, 12, &t12);
    expect_t n1 = {4, {4, 5, 6, 7}, "4-7", "", 1, 1};
    plan("T2L numa_node 1", T2L, NULL, 1, NULL, 0, 0, &n1);
    expect_t n1t8 = {8, {4, 5, 6, 7, 12, 13, 14, 15}, "4-7,12-15", "", 1, 1};
    plan("T2L numa_node 1, threads 8", T2L, NULL, 1, NULL, 0, 8, &n1t8);
    expect_t cs = {2, {3, 4}, "3-4", "", -1, 2};
    plan("T2L cpuset 3-4,11-12", T2L, "3-4,11-12", -1, NULL, 0, 0, &cs);
    expect_t cs4 = {4, {3, 4, 11, 12}, "3-4,11-12", "", -1, 2};
    plan("T2L cpuset 3-4,11-12, threads 4", T2L, "3-4,11-12", -1, NULL, 0, 4, &cs4);
}

/* T4: 2 packages x 2 groups, one NUMA node per group (4 nodes, 2 cores
 * each). */
static void test_synthetic_four_nodes(void **state)
{
    (void)state;
    expect_t def = {8, {0, 2, 4, 6, 8, 10, 12, 14}, "0,2,4,6,8,10,12,14", "", -1, 4};
    plan("T4 default", T4, NULL, -1, NULL, 0, 0, &def);
    expect_t n2 = {2, {8, 10}, "8,10", "", 2, 1};
    plan("T4 numa_node 2", T4, NULL, 2, NULL, 0, 0, &n2);
    expect_t n3r = {1, {14}, "14", "12-13", 3, 1};
    plan("T4 numa_node 3, reserve_cores 1", T4, NULL, 3, NULL, 1, 0, &n3r);
    expect_t n3r2 = {2, {14, 15}, "14-15", "12-13", 3, 1};
    plan("T4 numa_node 3, reserve_cores 1, threads 2", T4, NULL, 3, NULL, 1, 2, &n3r2);
    expect_t span = {4, {4, 6, 8, 10}, "4,6,8,10", "", -1, 2};
    plan("T4 cpuset 4-11 (nodes 1-2)", T4, "4-11", -1, NULL, 0, 0, &span);
    expect_t span3 = {3, {2, 4, 8}, "2,4,8", "", -1, 3};
    plan("T4 cpuset 2-5,8 (nodes 0-2)", T4, "2-5,8", -1, NULL, 0, 0, &span3);
    expect_t res = {5, {6, 8, 10, 12, 14}, "6,8,10,12,14", "0-5", -1, 4};
    plan("T4 reserve_cores 3", T4, NULL, -1, NULL, 3, 0, &res);
}

/* Precedence: cpuset > numa_node > pci_bus_id > default. */
static void test_synthetic_precedence(void **state)
{
    (void)state;
    expect_t cs = {1, {0}, "0", "", 0, 1};
    plan("T2 cpuset 0-1 + numa_node 1", T2, "0-1", 1, NULL, 0, 0, &cs);
    expect_t cs2 = {1, {2}, "2", "", 0, 1};
    plan("XML cpuset 2-3 + numa_node 1 + pci 3b", g_xml, "2-3", 1, "0000:3b:00.0", 0, 0, &cs2);
    expect_t nn = {4, {0, 2, 4, 6}, "0,2,4,6", "", 0, 1};
    plan("XML numa_node 0 + pci 3b (node 1)", g_xml, NULL, 0, "0000:3b:00.0", 0, 0, &nn);
    expect_t cs3 = {2, {8, 10}, "8,10", "", 1, 1};
    plan("XML cpuset 8-11 + pci 17 (node 0)", g_xml, "8-11", -1, "0000:17:00.0", 0, 0, &cs3);
}

/* pci_bus_id on an XML topology: the device's local node and cores. */
static void test_xml_pci_bus_id(void **state)
{
    (void)state;
    expect_t def = {8, {0, 2, 4, 6, 8, 10, 12, 14}, "0,2,4,6,8,10,12,14", "", -1, 2};
    plan("XML default", g_xml, NULL, -1, NULL, 0, 0, &def);
    expect_t g1 = {4, {8, 10, 12, 14}, "8,10,12,14", "", 1, 1};
    plan("XML pci 0000:3b:00.0", g_xml, NULL, -1, "0000:3b:00.0", 0, 0, &g1);
    expect_t g1r = {3, {10, 12, 14}, "10,12,14", "8-9", 1, 1};
    plan("XML pci 0000:3b:00.0, reserve_cores 1", g_xml, NULL, -1, "0000:3b:00.0", 1, 0, &g1r);
    expect_t g1t2 = {2, {8, 10}, "8,10", "", 1, 1};
    plan("XML pci 0000:3b:00.0, threads 2", g_xml, NULL, -1, "0000:3b:00.0", 0, 2, &g1t2);
    expect_t g0 = {4, {0, 2, 4, 6}, "0,2,4,6", "", 0, 1};
    plan("XML pci 0000:17:00.0", g_xml, NULL, -1, "0000:17:00.0", 0, 0, &g0);
    /* hex digits in either case name the same device */
    plan("XML pci 0000:3B:00.0", g_xml, NULL, -1, "0000:3B:00.0", 0, 0, &g1);
    /* behind a host bridge of the whole machine: every core, both nodes */
    expect_t gm = {8, {0, 2, 4, 6, 8, 10, 12, 14}, "0,2,4,6,8,10,12,14", "", -1, 2};
    plan("XML pci 0000:01:00.0 (machine-wide)", g_xml, NULL, -1, "0000:01:00.0", 0, 0, &gm);
    expect_t x1 = {4, {8, 10, 12, 14}, "8,10,12,14", "", 1, 1};
    plan("XML numa_node 1", g_xml, NULL, 1, NULL, 0, 0, &x1);
}

#endif /* COORDL_NO_HWLOC */

/* ===================================================================== */
/* page-locked memory                                                    */
/* ===================================================================== */

static int may_lock_unlimited(void)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) != 0)
        return 0;
    return (data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1;
}

#define PIN_OUT 64
#define PIN_ROW_BYTES ((uint64_t)PIN_OUT * PIN_OUT * 3 * sizeof(float))

static coordl_config pin_config(uint64_t cache_bytes, coordl_pin_mode mode, pin_rec *pr)
{
    coordl_config cfg = base_config();
    cfg.out_w = cfg.out_h = PIN_OUT;
    cfg.layout = COORDL_F32_NCHW;
    cfg.cache_bytes = cache_bytes;
    cfg.cache_pin = mode;
    cfg.pin = pin_record;
    cfg.pin_user = pr;
    return cfg;
}

/* With CAP_IPC_LOCK (root): cache and ring are page-locked, pinned_bytes
 * counts both (at least the configured cache and the ring's batch bytes,
 * exactly the arenas the pin callback saw), the kernel's VmLck agrees, the
 * pin callback registers each arena once at open and unregisters the same
 * (addr, bytes) at close, and VmLck drops back after close. */
static void test_pin_locked_as_root(void **state)
{
    (void)state;
    if (!may_lock_unlimited())
        skip(); /* visible: only meaningful with CAP_IPC_LOCK (CI runs as root) */
    static const struct {
        uint64_t cache;
        coordl_pin_mode mode;
    } cases[3] = {{4 << 20, COORDL_PIN_TRY}, {0, COORDL_PIN_TRY}, {4 << 20, COORDL_PIN_REQUIRED}};
    for (int c = 0; c < 3; c++) {
        pin_rec pr;
        memset(&pr, 0, sizeof pr);
        coordl_config cfg = pin_config(cases[c].cache, cases[c].mode, &pr);
        uint64_t lck0 = vm_locked();
        coordl *L = tu_open(&cfg);
        int regions = cases[c].cache ? 2 : 1;
        assert_int_equal(pr.n, regions);
        uint64_t sum = 0;
        for (int i = 0; i < regions; i++) {
            assert_int_equal(pr.ev[i].reg, 1);
            assert_non_null(pr.ev[i].addr);
            assert_true(pr.ev[i].bytes > 0);
            sum += pr.ev[i].bytes;
        }
        if (regions == 2)
            assert_ptr_not_equal(pr.ev[0].addr, pr.ev[1].addr);
        run_one_epoch(L, "pinned");
        coordl_stats st;
        coordl_get_stats(L, &st);
        uint64_t ring = (uint64_t)cfg.prefetch_batches * cfg.batch_size * PIN_ROW_BYTES;
        uint64_t lck1 = vm_locked();
        if (g_verbose)
            print_message("  [pin] cache %llu mode %d: pinned_bytes %llu, arenas %llu, ring >= %llu, "
                          "VmLck +%llu\n", (unsigned long long)cases[c].cache, (int)cases[c].mode,
                          (unsigned long long)st.pinned_bytes, (unsigned long long)sum,
                          (unsigned long long)ring, (unsigned long long)(lck1 - lck0));
        if (st.pinned_bytes < ring + cases[c].cache)
            fail_msg("case %d: pinned_bytes %llu < ring %llu + cache %llu", c,
                     (unsigned long long)st.pinned_bytes, (unsigned long long)ring,
                     (unsigned long long)cases[c].cache);
        if (st.pinned_bytes != sum)
            fail_msg("case %d: pinned_bytes %llu, but the arenas given to the pin callback "
                     "total %llu", c, (unsigned long long)st.pinned_bytes, (unsigned long long)sum);
        if (!TN_ASAN && lck1 - lck0 < st.pinned_bytes)
            fail_msg("case %d: VmLck grew by %llu bytes, less than pinned_bytes %llu", c,
                     (unsigned long long)(lck1 - lck0), (unsigned long long)st.pinned_bytes);
        coordl_close(L);
        assert_int_equal(pr.n, 2 * regions);
        for (int i = regions; i < 2 * regions; i++)
            assert_int_equal(pr.ev[i].reg, 0);
        for (int j = 0; j < regions; j++) { /* each arena unregistered once, as registered */
            int match = 0;
            for (int i = regions; i < 2 * regions; i++)
                match += pr.ev[j].addr == pr.ev[i].addr && pr.ev[j].bytes == pr.ev[i].bytes;
            if (match != 1)
                fail_msg("case %d: arena %p (%zu bytes) unregistered %d times at close", c,
                         pr.ev[j].addr, pr.ev[j].bytes, match);
        }
        assert_int_equal(vm_locked(), lck0);
    }
}

/* COORDL_PIN_OFF: nothing locked, but the pin callback still sees both
 * arenas (registering with an accelerator runtime is the trainer's call). */
static void test_pin_off(void **state)
{
    (void)state;
    pin_rec pr;
    memset(&pr, 0, sizeof pr);
    coordl_config cfg = pin_config(1 << 20, COORDL_PIN_OFF, &pr);
    uint64_t lck0 = vm_locked();
    coordl *L = tu_open(&cfg);
    run_one_epoch(L, "pin off");
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.pinned_bytes, 0);
    assert_int_equal(vm_locked(), lck0);
    assert_int_equal(pr.n, 2);
    coordl_close(L);
    assert_int_equal(pr.n, 4);
}

/* A pin callback that fails is logged; the open goes on. */
static void test_pin_callback_failure(void **state)
{
    (void)state;
    pin_rec pr;
    memset(&pr, 0, sizeof pr);
    pr.ret = -1;
    tu_log_record *rec = tu_log_record_new();
    coordl_config cfg = pin_config(1 << 20, COORDL_PIN_OFF, &pr);
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    cfg.log_level = COORDL_LOG_DEBUG;
    coordl *L = tu_open(&cfg);
    run_one_epoch(L, "pin callback fails");
    assert_int_equal(pr.n, 2);
    assert_true(tu_log_contains(rec, "pin callback"));
    coordl_close(L);
    tu_log_record_free(rec);
}

/* ---- fallback without the right to lock (forked child) -------------- */

enum {
    CH_OK = 0,
    CH_SETRLIMIT = 10,
    CH_CAPGET,
    CH_CAPSET,
    CH_STILL_LOCKS,
    CH_TRY_OPEN,
    CH_TRY_PINNED,
    CH_TRY_LOGS,
    CH_TRY_CALLBACK,
    CH_TRY_VMLCK,
    CH_TRY_EPOCH,
    CH_RING_OPEN,
    CH_RING_PINNED,
    CH_RING_LOGS,
    CH_REQ_RC,
    CH_REQ_MSG,
    CH_REQ_HANDLE,
    CH_OFF_OPEN,
    CH_OFF_LOGS,
    CH_END
};

static const char *child_code_text(int code)
{
    switch (code) {
    case CH_SETRLIMIT: return "setrlimit(RLIMIT_MEMLOCK, 0) failed";
    case CH_CAPGET: return "capget failed";
    case CH_CAPSET: return "capset (dropping CAP_IPC_LOCK) failed";
    case CH_STILL_LOCKS: return "mlock still works after dropping CAP_IPC_LOCK (test environment)";
    case CH_TRY_OPEN: return "COORDL_PIN_TRY: coordl_open failed without the right to lock";
    case CH_TRY_PINNED: return "COORDL_PIN_TRY: pinned_bytes != 0 without the right to lock";
    case CH_TRY_LOGS: return "COORDL_PIN_TRY (cache + ring): not exactly one warning about locking";
    case CH_TRY_CALLBACK: return "COORDL_PIN_TRY: pin callback not called once per arena (2) at open";
    case CH_TRY_VMLCK: return "COORDL_PIN_TRY: VmLck not 0";
    case CH_TRY_EPOCH: return "COORDL_PIN_TRY: the loader failed to run an epoch on pageable memory";
    case CH_RING_OPEN: return "COORDL_PIN_TRY, no cache: coordl_open failed";
    case CH_RING_PINNED: return "COORDL_PIN_TRY, no cache: pinned_bytes != 0";
    case CH_RING_LOGS: return "COORDL_PIN_TRY, no cache: not exactly one warning about locking";
    case CH_REQ_RC: return "COORDL_PIN_REQUIRED: coordl_open did not return COORDL_ERR_NOMEM";
    case CH_REQ_MSG: return "COORDL_PIN_REQUIRED: the error message does not name cache_pin";
    case CH_REQ_HANDLE: return "COORDL_PIN_REQUIRED: *out not NULL after a failed open";
    case CH_OFF_OPEN: return "COORDL_PIN_OFF: coordl_open failed";
    case CH_OFF_LOGS: return "COORDL_PIN_OFF: a warning about locking";
    default: return "unknown";
    }
}

static int child_run_epoch(coordl *L)
{
    uint64_t rows = 0;
    for (;;) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH)
            break;
        if (rc != COORDL_OK)
            return -1;
        rows += b.n;
        coordl_release(L, &b);
    }
    return rows == N_ITEMS ? 0 : -1;
}

/* Drops the right to lock memory, then checks TRY / REQUIRED / OFF. No
 * cmocka here: the result is the exit status. */
static int child_no_lock(void)
{
    struct rlimit rl = {0, 0};
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return CH_SETRLIMIT;
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) != 0)
        return CH_CAPGET;
    uint32_t bit = 1u << (CAP_IPC_LOCK % 32);
    data[CAP_IPC_LOCK / 32].effective &= ~bit;
    data[CAP_IPC_LOCK / 32].permitted &= ~bit;
    data[CAP_IPC_LOCK / 32].inheritable &= ~bit;
    if (syscall(SYS_capset, &hdr, data) != 0)
        return CH_CAPSET;
    long pg = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        /* the raw syscall: a sanitizer's mlock interceptor always succeeds */
        int locked = syscall(SYS_mlock, p, (size_t)pg) == 0;
        munmap(p, (size_t)pg);
        if (locked)
            return CH_STILL_LOCKS;
    }

    /* TRY with a cache: opens, nothing pinned, one message, callbacks */
    {
        pin_rec pr;
        memset(&pr, 0, sizeof pr);
        log_rec lr;
        memset(&lr, 0, sizeof lr);
        coordl_config cfg = pin_config(1 << 20, COORDL_PIN_TRY, &pr);
        cfg.log = log_lock_fn;
        cfg.log_user = &lr;
        cfg.log_level = COORDL_LOG_DEBUG;
        coordl *L = NULL;
        if (coordl_open(&cfg, &L) != COORDL_OK)
            return CH_TRY_OPEN;
        coordl_stats st;
        coordl_get_stats(L, &st);
        int bad = 0;
        if (st.pinned_bytes != 0)
            bad = CH_TRY_PINNED;
        else if (pr.n != 2)
            bad = CH_TRY_CALLBACK;
        else if (vm_locked() != 0)
            bad = CH_TRY_VMLCK;
        else if (child_run_epoch(L) != 0)
            bad = CH_TRY_EPOCH;
        coordl_close(L);
        if (bad)
            return bad;
        if (__atomic_load_n(&lr.lock_msgs, __ATOMIC_SEQ_CST) != 1) {
            fprintf(stderr, "child: %d messages about locking:\n", lr.lock_msgs);
            for (int i = 0; i < lr.lock_msgs && i < 4; i++)
                fprintf(stderr, "child:   \"%s\"\n", lr.msg[i]);
            return CH_TRY_LOGS;
        }
        if (g_verbose)
            fprintf(stderr, "child: TRY fallback message: \"%s\"\n", lr.msg[0]);
    }
    /* TRY, ring only */
    {
        log_rec lr;
        memset(&lr, 0, sizeof lr);
        coordl_config cfg = pin_config(0, COORDL_PIN_TRY, NULL);
        cfg.pin = NULL;
        cfg.log = log_lock_fn;
        cfg.log_user = &lr;
        cfg.log_level = COORDL_LOG_DEBUG;
        coordl *L = NULL;
        if (coordl_open(&cfg, &L) != COORDL_OK)
            return CH_RING_OPEN;
        coordl_stats st;
        coordl_get_stats(L, &st);
        coordl_close(L);
        if (st.pinned_bytes != 0)
            return CH_RING_PINNED;
        if (lr.lock_msgs != 1) {
            for (int i = 0; i < lr.lock_msgs && i < 4; i++)
                fprintf(stderr, "child:   \"%s\"\n", lr.msg[i]);
            return CH_RING_LOGS;
        }
    }
    /* REQUIRED: fails, NOMEM, says which setting */
    {
        coordl_config cfg = pin_config(1 << 20, COORDL_PIN_REQUIRED, NULL);
        cfg.pin = NULL;
        static char not_null;
        coordl *L = (coordl *)(void *)&not_null;
        coordl_status rc = coordl_open(&cfg, &L);
        if (rc == COORDL_OK)
            coordl_close(L);
        if (rc != COORDL_ERR_NOMEM)
            return CH_REQ_RC;
        if (L != NULL)
            return CH_REQ_HANDLE;
        if (!strstr(coordl_errmsg(NULL), "cache_pin"))
            return CH_REQ_MSG;
        if (g_verbose)
            fprintf(stderr, "child: REQUIRED message: \"%s\"\n", coordl_errmsg(NULL));
    }
    /* OFF: no attempt, so no message */
    {
        log_rec lr;
        memset(&lr, 0, sizeof lr);
        coordl_config cfg = pin_config(1 << 20, COORDL_PIN_OFF, NULL);
        cfg.pin = NULL;
        cfg.log = log_lock_fn;
        cfg.log_user = &lr;
        cfg.log_level = COORDL_LOG_DEBUG;
        coordl *L = NULL;
        if (coordl_open(&cfg, &L) != COORDL_OK)
            return CH_OFF_OPEN;
        coordl_close(L);
        if (lr.lock_msgs != 0) {
            for (int i = 0; i < lr.lock_msgs && i < 4; i++)
                fprintf(stderr, "child:   \"%s\"\n", lr.msg[i]);
            return CH_OFF_LOGS;
        }
    }
    return CH_OK;
}

/* Without CAP_IPC_LOCK and with RLIMIT_MEMLOCK = 0 (in a forked child, so
 * the rest of the suite keeps its rights): COORDL_PIN_TRY opens on pageable
 * memory (pinned_bytes 0) and logs exactly one warning about locking (every
 * level delivered; WARN or ERROR counted, so a default configuration shows
 * it once);
 * COORDL_PIN_REQUIRED fails with COORDL_ERR_NOMEM naming cache_pin;
 * COORDL_PIN_OFF logs nothing about locking. */
static void test_pin_fallback_without_rights(void **state)
{
    (void)state;
    if (TN_ASAN) {
        print_message("  ASan: mlock() is intercepted and always succeeds; the fallback "
                      "cannot be provoked in this build\n");
        skip();
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60);
        _exit(child_no_lock());
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("child killed by signal %d", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    int code = WEXITSTATUS(status);
    if (code != CH_OK)
        fail_msg("child exit %d: %s", code, child_code_text(code));
}

/* ===================================================================== */

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_machine_default_binds_each_worker),
        cmocka_unit_test(test_machine_threads_wrap),
        cmocka_unit_test(test_machine_cpuset_one_pu),
        cmocka_unit_test(test_machine_reserve_cores),
        cmocka_unit_test(test_machine_bind_off),
        cmocka_unit_test_teardown(test_machine_follows_process_affinity, restore_affinity),
        cmocka_unit_test(test_machine_memory_policy),
        cmocka_unit_test(test_bad_cpuset),
        cmocka_unit_test(test_bad_reserve_cores),
#ifdef COORDL_NO_HWLOC
        cmocka_unit_test(test_no_hwloc_unsupported),
#else
        cmocka_unit_test(test_bad_numa_node),
        cmocka_unit_test(test_bad_pci_bus_id),
        cmocka_unit_test(test_bad_topology),
        cmocka_unit_test(test_synthetic_two_sockets),
        cmocka_unit_test(test_synthetic_linux_numbering),
        cmocka_unit_test(test_synthetic_four_nodes),
        cmocka_unit_test(test_synthetic_precedence),
        cmocka_unit_test(test_xml_pci_bus_id),
#endif
        cmocka_unit_test(test_pin_locked_as_root),
        cmocka_unit_test(test_pin_off),
        cmocka_unit_test(test_pin_callback_failure),
        cmocka_unit_test(test_pin_fallback_without_rights),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
