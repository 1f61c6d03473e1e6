/* ---- appends staged in shared memory (tessera.schemas.staged: why, the layout, and adoption) ----
   Static C, before placed_submits.c and reported_submits.c, which append through tessera_stage_append: the
   driver its GPU trace, the layer its spool. One stage per shim, used with tessera_ledger_lock held. The bytes
   go to a shared mapping of `<target>.staged-<pid>` (its pages outlive the process as a write's would) and
   reach the target in one write when the next would not fit, when the licence is revoked (before any write of
   Python's), and at exit. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

typedef struct {
    char magic[8];
    uint32_t version, data_offset;
    uint64_t capacity, length, flushing;   /* schemas/staged.py HEAD */
} tessera_stage_head;
#define TESSERA_STAGE_NOT_FLUSHING UINT64_MAX

static struct {
    int target;                  /* the file the stage is written to (O_APPEND); -1: no stage */
    int fd;                      /* the stage's, flock()ed while this process runs */
    tessera_stage_head *head;    /* its mapping: the header, then the data at TESSERA_STAGE_DATA_OFFSET */
    uint64_t reserved_to;        /* the target's blocks up to here were reserved by this process (fallocate) */
    int reserve_refused;         /* the target's file system refused a reservation: not asked again */
    char path[4096];
} tessera_stage = { -1, -1, NULL, 0, 0, "" };

/* The whole of `n` bytes to `fd`; an errno when a write fails, and how many were written into `*done`. */
static int tessera_write_all(int fd, const uint8_t *p, size_t n, size_t *done)
{
    *done = 0;
    while (*done < n) {
        ssize_t w = write(fd, p + *done, n - *done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        *done += (size_t)w;
    }
    return 0;
}

/* Let go of the stage: unmapped and its descriptor closed (the lock goes with the last one), not written. Also at
   fork, in the child: a child forked without exec shares the parent's mapping and lock, and appends at once
   (the staged bytes are the parent's). */
static void tessera_stage_forget(void)
{
    if (!tessera_stage.head) return;
    munmap(tessera_stage.head, TESSERA_STAGE_DATA_OFFSET + TESSERA_STAGE_CAPACITY);
    close(tessera_stage.fd);
    tessera_stage.head = NULL;
    tessera_stage.fd = tessera_stage.target = -1;
    tessera_stage.reserved_to = 0;
    tessera_stage.reserve_refused = 0;
}

/* Before a write of `n` bytes at `end`, the target's end: its blocks for the next TESSERA_STAGE_RESERVE bytes
   allocated in one call when the write would pass what this process reserved. A write into allocated blocks
   costs the kernel about a quarter less than one that reserves them page by page (delayed allocation:
   docs/benchmarks.md, "Session 17"); the file's size is left alone, so readers see only what was written. What
   is reserved past the end stays the file's until a reader releases it (tessera.schemas.staged.release_reserved).
   A file system that refuses (no fallocate, a full disk) is not asked again. */
static void tessera_stage_reserve(uint64_t end, uint64_t n)
{
    if (tessera_stage.reserve_refused || end + n <= tessera_stage.reserved_to) return;
    if (fallocate(tessera_stage.target, FALLOC_FL_KEEP_SIZE, (off_t)end, TESSERA_STAGE_RESERVE))
        tessera_stage.reserve_refused = 1;
    else
        tessera_stage.reserved_to = end + TESSERA_STAGE_RESERVE;
}

/* (the ledger locked) Write what the stage holds to its target; an errno when that fails. `flushing` says, until
   the stage is emptied, that a write began: a process killed inside it leaves the adoption to find out how much
   of it landed. A write that fails leaves the stage so too, for adoption, and the process lets go of it (its
   appends are written at once from then on). */
static int tessera_stage_flush(void)
{
    tessera_stage_head *h = tessera_stage.head;
    if (!h || !h->length) return 0;
    uint64_t n = h->length;
    struct stat st;
    int sized = fstat(tessera_stage.target, &st) == 0;
    __atomic_store_n(&h->flushing, sized ? (uint64_t)st.st_size : 0, __ATOMIC_RELEASE);
    if (sized) tessera_stage_reserve((uint64_t)st.st_size, n);
    size_t done;
    int error = tessera_write_all(tessera_stage.target, (uint8_t *)h + TESSERA_STAGE_DATA_OFFSET, n, &done);
    if (error) {
        tessera_stage_forget();
        return error;
    }
    __atomic_store_n(&h->length, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&h->flushing, TESSERA_STAGE_NOT_FLUSHING, __ATOMIC_RELEASE);
    return 0;
}

/* (the ledger locked) Append `n` bytes to `fd`: to its stage when it has one (what the stage held is written first
   when they would not fit), else at once. 0, or the errno of a write that failed; how many of the bytes were
   staged or written into `*done`. */
static int tessera_stage_append(int fd, const uint8_t *p, size_t n, size_t *done)
{
    tessera_stage_head *h = tessera_stage.head;
    *done = 0;
    if (!h || fd != tessera_stage.target) return tessera_write_all(fd, p, n, done);
    if (h->length + n > TESSERA_STAGE_CAPACITY) {
        int error = tessera_stage_flush();
        if (error) return error;
        if (n > TESSERA_STAGE_CAPACITY) return tessera_write_all(fd, p, n, done);
    }
    memcpy((uint8_t *)h + TESSERA_STAGE_DATA_OFFSET + h->length, p, n);
    __atomic_store_n(&h->length, h->length + n, __ATOMIC_RELEASE);
    *done = n;
    return 0;
}

/* (the ledger locked) Write what the stage holds and remove it; kept for adoption if the write fails. */
static void tessera_stage_close_locked(void)
{
    if (tessera_stage.head && !tessera_stage_flush()) {
        unlink(tessera_stage.path);
        tessera_stage_forget();
    }
}

static void tessera_stage_register_fork(void) { pthread_atfork(NULL, NULL, tessera_stage_forget); }

/* At exit, after the Python exit functions the shims run (which revoke the licences): what is staged written, the
   stage removed; unless a thread holds the ledger meanwhile (a submit as the program exits): the stage then
   stays, for adoption. */
__attribute__((destructor)) static void tessera_stage_at_exit(void)
{
    for (int i = 0; tessera_stage.head && i < 100; i++) {
        if (pthread_mutex_trylock(&tessera_ledger_lock) == 0) {
            tessera_stage_close_locked();
            pthread_mutex_unlock(&tessera_ledger_lock);
            return;
        }
        usleep(1000);
    }
}

/* Python: stage the appends to `target` in a new file at `path` (created exclusively, 0600, never through a link),
   replacing a stage of another target (written first). 0, or the errno that left appends unstaged. */
int tessera_stage_open(int target, const char *path)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    size_t size = TESSERA_STAGE_DATA_OFFSET + TESSERA_STAGE_CAPACITY, n = strlen(path);
    if (n >= sizeof tessera_stage.path) return ENAMETOOLONG;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    /* Its blocks allocated now (a full disk refuses the stage here, where a write to the mapping would raise
       SIGBUS in the application), its pages touched once (later writes fault on no new block). */
    int error = flock(fd, LOCK_EX | LOCK_NB) ? errno : posix_fallocate(fd, 0, (off_t)size);
    void *map = error ? MAP_FAILED : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!error && map == MAP_FAILED) error = errno;
    if (error) {
        close(fd);
        unlink(path);
        return error;
    }
    memset(map, 0, size);
    tessera_stage_head *h = map;
    memcpy(h->magic, TESSERA_STAGE_MAGIC, 8);
    h->version = TESSERA_STAGE_VERSION;
    h->data_offset = TESSERA_STAGE_DATA_OFFSET;
    h->capacity = TESSERA_STAGE_CAPACITY;
    h->length = 0;
    h->flushing = TESSERA_STAGE_NOT_FLUSHING;
    /* A reader adopting stages may have removed this one before it was locked (an unlocked stage without a
       header is one whose process ended while making it: tessera.schemas.staged): then none is used. */
    struct stat made, named;
    if (fstat(fd, &made) || stat(path, &named) || made.st_dev != named.st_dev || made.st_ino != named.st_ino) {
        munmap(map, size);
        close(fd);
        return ENOENT;
    }
    pthread_once(&once, tessera_stage_register_fork);
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_stage_close_locked();
    memcpy(tessera_stage.path, path, n + 1);
    tessera_stage.fd = fd;
    tessera_stage.target = target;
    tessera_stage.head = h;
    pthread_mutex_unlock(&tessera_ledger_lock);
    return 0;
}

/* Python: write what the stage holds and remove it (a target about to be closed, a failed write seen). */
void tessera_stage_close(void)
{
    pthread_mutex_lock(&tessera_ledger_lock);
    tessera_stage_close_locked();
    pthread_mutex_unlock(&tessera_ledger_lock);
}
