/* Hooks called from threads Python does not know, in a Python application: run on a thread of the
   shim's own, never waiting for the interpreter lock on the caller's thread (compiled into both shims
   after vkapi/runtime/prelude.c; the generated guards call tessera_run_on_python, vkapi/guards.py).

   Why: in a Python program the GIL may be held by a thread that waits for the very thread calling
   Vulkan. moderngl holds it while it waits, in C, for zink's worker thread, which creates Vulkan
   objects: a hook taking the GIL on that worker would wait forever. A thread without a Python thread
   state (a native thread of a library) therefore hands its call to the runner thread and waits for
   it with a deadline; the runner takes the GIL first, and only then claims the call. If the GIL does
   not come before the deadline, the caller takes its call back (it is still unclaimed), forwards it in
   C without Tessera seeing it, and says so once. While the runner is still waiting for the GIL past
   a deadline, later calls are forwarded at once.

   Threads: any caller thread, one runner thread (started on first use); one mutex guards the queue. */
#include <errno.h>
#include <time.h>

#define TESSERA_RUNNER_WAIT_NS 2000000000LL   /* the GIL is offered every 5 ms while someone asks */

enum { TESSERA_CALL_PENDING, TESSERA_CALL_RUNNING, TESSERA_CALL_DONE };

struct tessera_call {
    void (*run)(void *args);
    void *args;
    const char *name;
    int state;
    struct tessera_call *next;
};

static pthread_mutex_t tessera_runner_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tessera_runner_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t tessera_runner_done;    /* on CLOCK_MONOTONIC: tessera_runner_init */
static pthread_once_t tessera_runner_once = PTHREAD_ONCE_INIT;
static struct tessera_call *tessera_runner_head, *tessera_runner_tail;
static int tessera_runner_started;
static int64_t tessera_runner_waiting_since;   /* monotonic ns since the runner waits for the GIL; 0: not */
static int tessera_runner_warned;

static void tessera_runner_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&tessera_runner_done, &attr);
    pthread_condattr_destroy(&attr);
}

static int64_t tessera_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* True on a thread Python does not know, in a process whose interpreter is the application's. */
static int tessera_off_python_thread(void)
{
    return tessera_in_app_python && PyGILState_GetThisThreadState() == NULL;
}

/* A thread Python does not know that may call hooks (an engine's recording threads in a C program,
   the runner below): Python would make it a thread state on every call and delete it on return (for
   a hook, cffi's PyGILState_Ensure/Release), mapping and unmapping a fresh frame stack each time
   (~10 us per call, measured: docs/benchmarks.md). Its first hook makes one that the thread keeps,
   without the GIL, until the thread exits (a pthread key's destructor deletes it then). Both shims may
   keep one for a thread; the second finds the first's. */
static pthread_key_t tessera_kept_key;
static int tessera_kept_key_ok;
static pthread_once_t tessera_kept_once = PTHREAD_ONCE_INIT;
static __thread int tessera_kept_checked;
static uint64_t tessera_kept_made, tessera_kept_deleted, tessera_runner_ran;   /* tessera_thread_counts */

/* At the thread's exit. Not PyGILState_Release: glibc has already emptied Python's own key of this
   thread (keys are emptied in creation order, and Python's is older). */
static void tessera_release_kept(void *tstate)
{
    if (!tessera_python_usable()) return;   /* finalised, or finalising: Python deletes it */
    PyEval_RestoreThread((PyThreadState *)tstate);
    PyThreadState_Clear((PyThreadState *)tstate);
    PyThreadState_DeleteCurrent();   /* and drops the GIL */
    __atomic_add_fetch(&tessera_kept_deleted, 1, __ATOMIC_RELAXED);
}

static void tessera_kept_init(void)
{
    tessera_kept_key_ok = pthread_key_create(&tessera_kept_key, tessera_release_kept) == 0;
}

/* (Python usable) Before a hook runs on this thread. */
static inline void tessera_keep_thread_state(void)
{
    if (__builtin_expect(tessera_kept_checked, 1)) return;
    tessera_kept_checked = 1;
    if (PyGILState_GetThisThreadState() != NULL) return;   /* Python's own, or kept by the other shim */
    pthread_once(&tessera_kept_once, tessera_kept_init);
    if (!tessera_kept_key_ok) return;
    PyGILState_Ensure();
    PyThreadState *tstate = PyEval_SaveThread();
    if (pthread_setspecific(tessera_kept_key, tstate) != 0) {   /* cannot delete it later: do it now */
        PyEval_RestoreThread(tstate);
        PyGILState_Release(PyGILState_UNLOCKED);
        return;
    }
    __atomic_add_fetch(&tessera_kept_made, 1, __ATOMIC_RELAXED);
}

/* For TESSERA_LOG=info (vkapi/guards.py thread_counts): thread states kept and deleted at their
   thread's exit, hooks run on the runner thread. */
void tessera_thread_counts(uint64_t *counts)
{
    counts[0] = __atomic_load_n(&tessera_kept_made, __ATOMIC_RELAXED);
    counts[1] = __atomic_load_n(&tessera_kept_deleted, __ATOMIC_RELAXED);
    counts[2] = __atomic_load_n(&tessera_runner_ran, __ATOMIC_RELAXED);
}

static void tessera_runner_unlink(struct tessera_call *call)
{
    struct tessera_call **link = &tessera_runner_head, *prev = NULL;
    while (*link && *link != call) {
        prev = *link;
        link = &(*link)->next;
    }
    if (!*link) return;
    *link = call->next;
    if (tessera_runner_tail == call) tessera_runner_tail = prev;
}

static void *tessera_runner_main(void *unused)
{
    (void)unused;
    if (tessera_python_usable()) tessera_keep_thread_state();
    for (;;) {
        pthread_mutex_lock(&tessera_runner_lock);
        while (!tessera_runner_head)
            pthread_cond_wait(&tessera_runner_work, &tessera_runner_lock);
        __atomic_store_n(&tessera_runner_waiting_since, tessera_monotonic_ns(), __ATOMIC_RELEASE);
        pthread_mutex_unlock(&tessera_runner_lock);
        if (!tessera_python_usable()) return NULL;
        PyGILState_STATE gil = PyGILState_Ensure();   /* before claiming a call: see above */
        __atomic_store_n(&tessera_runner_waiting_since, 0, __ATOMIC_RELEASE);
        pthread_mutex_lock(&tessera_runner_lock);
        struct tessera_call *call = tessera_runner_head;
        if (call) {
            tessera_runner_unlink(call);
            call->state = TESSERA_CALL_RUNNING;
        }
        pthread_mutex_unlock(&tessera_runner_lock);
        if (call) {
            __atomic_add_fetch(&tessera_runner_ran, 1, __ATOMIC_RELAXED);
            call->run(call->args);
            pthread_mutex_lock(&tessera_runner_lock);
            call->state = TESSERA_CALL_DONE;
            pthread_cond_broadcast(&tessera_runner_done);
            pthread_mutex_unlock(&tessera_runner_lock);
        }
        PyGILState_Release(gil);
    }
}

/* Run `run(args)` (a hook, which takes the GIL itself) on the runner thread; 1 once it ran, 0 when
   the GIL did not come in time and the call was not run (the caller forwards it in C). */
static int tessera_run_on_python(void (*run)(void *), void *args, const char *name)
{
    int64_t since = __atomic_load_n(&tessera_runner_waiting_since, __ATOMIC_ACQUIRE);
    int64_t now = tessera_monotonic_ns();
    int ran = 0;
    struct tessera_call call = {run, args, name, TESSERA_CALL_PENDING, NULL};
    pthread_once(&tessera_runner_once, tessera_runner_init);
    pthread_mutex_lock(&tessera_runner_lock);
    if (since && now - since > TESSERA_RUNNER_WAIT_NS)
        goto forward;   /* the runner is stuck behind a GIL that does not come */
    if (!tessera_runner_started) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, tessera_runner_main, NULL) != 0) goto forward;
        pthread_detach(thread);
        tessera_runner_started = 1;
    }
    if (tessera_runner_tail) tessera_runner_tail->next = &call;
    else tessera_runner_head = &call;
    tessera_runner_tail = &call;
    pthread_cond_signal(&tessera_runner_work);
    int64_t deadline_ns = now + TESSERA_RUNNER_WAIT_NS;
    struct timespec deadline = {deadline_ns / 1000000000LL, deadline_ns % 1000000000LL};
    while (call.state != TESSERA_CALL_DONE) {
        if (call.state == TESSERA_CALL_RUNNING) {   /* the hook runs with the GIL: it finishes */
            pthread_cond_wait(&tessera_runner_done, &tessera_runner_lock);
            continue;
        }
        int r = pthread_cond_timedwait(&tessera_runner_done, &tessera_runner_lock, &deadline);
        if (r == ETIMEDOUT && call.state == TESSERA_CALL_PENDING) {
            tessera_runner_unlink(&call);
            goto forward;
        }
    }
    ran = 1;
forward:
    if (!ran && !tessera_runner_warned) {
        tessera_runner_warned = 1;
        fprintf(stderr, "tessera: %s: %s on a thread Python does not know ran without Tessera: the application "
                "held Python's lock (GIL) for over %lld ms while that thread called Vulkan; later such calls "
                "are forwarded as long as it holds it (docs/programs.md).\n", tessera_self_path(), name,
                TESSERA_RUNNER_WAIT_NS / 1000000LL);
    }
    pthread_mutex_unlock(&tessera_runner_lock);
    return ran;
}
