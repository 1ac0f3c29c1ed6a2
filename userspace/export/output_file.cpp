#include "export/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <streambuf>

namespace pbp {

namespace {

// An output stream buffer over a file descriptor that remembers the first write error.
class FdBuf : public std::streambuf {
public:
    explicit FdBuf(int fd) : fd_(fd) { setp(buf_, buf_ + sizeof buf_); }
    int error() const { return errno_; }

protected:
    int_type overflow(int_type c) override {
        if (!drain()) return traits_type::eof();
        if (!traits_type::eq_int_type(c, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(c);
            pbump(1);
        }
        return traits_type::not_eof(c);
    }
    int sync() override { return drain() ? 0 : -1; }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        if (n < static_cast<std::streamsize>(sizeof buf_)) return std::streambuf::xsputn(s, n);
        if (!drain() || !write_all(s, static_cast<size_t>(n))) return 0;
        return n;
    }

private:
    bool drain() {
        size_t n = static_cast<size_t>(pptr() - pbase());
        bool ok = write_all(pbase(), n);
        setp(buf_, buf_ + sizeof buf_);
        return ok;
    }
    bool write_all(const char* p, size_t n) {
        if (errno_) return false;
        while (n) {
            ssize_t w = ::write(fd_, p, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                errno_ = w < 0 ? errno : EIO;
                return false;
            }
            p += w;
            n -= static_cast<size_t>(w);
        }
        return true;
    }

    int fd_;
    int errno_ = 0;
    char buf_[1 << 16];
};

// Runs fill on fd; false with error set when fill throws or a write fails.
bool fill_fd(int fd, const std::function<void(std::ostream&)>& fill, std::string& error) {
    FdBuf buf(fd);
    std::ostream out(&buf);
    try {
        fill(out);
        out.flush();
    } catch (const std::exception& e) {
        error = buf.error() ? strerror(buf.error()) : e.what();
        return false;
    } catch (...) {
        error = "the output could not be made";
        return false;
    }
    if (buf.error() || !out) {
        error = strerror(buf.error() ? buf.error() : EIO);
        return false;
    }
    return true;
}

std::string errno_text() { return strerror(errno); }

// A path that exists and is no regular file nor directory: written in place.
bool write_in_place(const std::string& path, const std::function<void(std::ostream&)>& fill, std::string& error) {
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        error = errno_text();
        return false;
    }
    bool ok = fill_fd(fd, fill, error);
    if (close(fd) != 0 && ok) {
        error = errno_text();
        ok = false;
    }
    return ok;
}

// Temporary files of NAME in dir left by writers that were killed (SIGKILL, a power cut):
// removed. A writer holds an flock on its temporary file until it is renamed, and the lock
// dies with it; a file whose lock can be taken and that has not changed for a second (a
// writer takes its lock right after creating the file) has no writer any more. The lock
// works across PID namespaces, where the writer's PID would not.
void remove_abandoned_temporaries(const std::string& dir, const std::string& name) {
    DIR* d = opendir(dir.c_str());
    if (!d) return;
    const std::string prefix = "." + name + ".tmp-";
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    auto ns = [](const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
    while (dirent* e = readdir(d)) {
        if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
        struct stat st{};
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            ns(now) - ns(st.st_mtim) < 1000000000)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) unlinkat(dirfd(d), e->d_name, 0);
        close(fd);
    }
    closedir(d);
}

}  // namespace

bool write_file_atomically(const std::string& path_in, const std::function<void(std::ostream&)>& fill,
                           std::string& error) {
    error.clear();
    if (path_in.empty()) {
        error = strerror(ENOENT);
        return false;
    }
    std::string path = path_in;
    struct stat st{};
    if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        // Replace what the link points to, not the link itself.
        char resolved[PATH_MAX];
        if (realpath(path.c_str(), resolved)) path = resolved;
    }
    bool replacing = false;
    if (stat(path.c_str(), &st) == 0) {
        replacing = true;
        if (S_ISDIR(st.st_mode)) {
            error = strerror(EISDIR);
            return false;
        }
        if (!S_ISREG(st.st_mode)) return write_in_place(path, fill, error);
    }

    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);

    remove_abandoned_temporaries(dir, name);
    std::random_device rd;
    std::string tmp;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        std::string suffix;
        for (int i = 0; i < 6; i++) suffix += kChars[rd() % (sizeof kChars - 1)];
        tmp = dir + "/." + name + ".tmp-" + suffix;
        fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) {
            error = errno_text();
            return false;
        }
    }
    if (fd < 0) {
        error = strerror(EEXIST);
        return false;
    }
    flock(fd, LOCK_EX);  // held until renamed: remove_abandoned_temporaries leaves it alone
    if (replacing) {
        // The file it replaces keeps its permissions (a profile its owner made private stays
        // private), and its owner and group where this process may give them (root may; a
        // user writing over another's file, which the directory allowed, takes it over).
        (void)!fchown(fd, st.st_uid, st.st_gid);
        fchmod(fd, st.st_mode & 0777);
    }

    bool ok = fill_fd(fd, fill, error);
    if (ok && fsync(fd) != 0) error = errno_text(), ok = false;
    if (ok && rename(tmp.c_str(), path.c_str()) != 0) error = errno_text(), ok = false;
    if (!ok) unlink(tmp.c_str());
    close(fd);  // (after fsync: every byte is on disk, whatever close says)
    if (!ok) return false;
    // The rename itself is on disk once the directory is: a failure here leaves the new
    // file in place, so it is not reported.
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return true;
}

}  // namespace pbp
