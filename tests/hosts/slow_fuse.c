// A FUSE file system with one file, /slow, whose every read takes DELAY_MS: a reader of it
// waits in the kernel for the server's answer, uninterruptibly (the page-cache read waits
// for its folio with TASK_KILLABLE, state D), which is what the wall-mode test of
// "[waiting for I/O]" needs on a machine without a slow disk (tests/integration/test_wall.cpp).
//
//   pbp_slow_fuse MOUNTPOINT DELAY_MS      (foreground; unmounts on SIGTERM/SIGINT)
//
// The file is 1 TiB long and reads as zeros, so a reader can read at ever new offsets and
// never hit the page cache.
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char* kName = "/slow";
static const off_t kSize = (off_t)1 << 40;
static long delay_ms = 200;

static int slow_getattr(const char* path, struct stat* st, struct fuse_file_info* fi) {
    (void)fi;
    memset(st, 0, sizeof *st);
    if (strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    if (strcmp(path, kName) == 0) {
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        st->st_size = kSize;
        return 0;
    }
    return -ENOENT;
}

static int slow_open(const char* path, struct fuse_file_info* fi) {
    if (strcmp(path, kName) != 0) return -ENOENT;
    if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EACCES;
    return 0;
}

static int slow_read(const char* path, char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
    (void)fi;
    if (strcmp(path, kName) != 0) return -ENOENT;
    struct timespec d = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {
    }
    if (off >= kSize) return 0;
    if ((off_t)size > kSize - off) size = (size_t)(kSize - off);
    memset(buf, 0, size);
    return (int)size;
}

static int slow_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info* fi,
                        enum fuse_readdir_flags flags) {
    (void)off, (void)fi, (void)flags;
    if (strcmp(path, "/") != 0) return -ENOENT;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, kName + 1, NULL, 0, 0);
    return 0;
}

static const struct fuse_operations ops = {
    .getattr = slow_getattr,
    .open = slow_open,
    .read = slow_read,
    .readdir = slow_readdir,
};

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MOUNTPOINT DELAY_MS\n", argv[0]);
        return 2;
    }
    delay_ms = atol(argv[2]);
    // -f: stay in the foreground (the test owns the process); -s: one thread is enough.
    char* fargv[] = {argv[0], "-f", "-s", "-o", "fsname=pbp_slow_fuse", argv[1], NULL};
    return fuse_main(6, fargv, &ops, NULL);
}
