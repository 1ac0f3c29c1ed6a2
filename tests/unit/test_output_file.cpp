// write_file_atomically (export/output_file.h) on real file systems: a full tmpfs, a
// read-only one, a writer killed with SIGKILL in the middle, and the ordinary cases. The
// target is never destroyed nor left half-written, and no temporary file is left behind
// (after a SIGKILL, until the next write of the same file).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "export/exporter.h"
#include "export/output_file.h"
#include "synthetic_profile.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace pbp {
namespace {

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

void write_plain(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::set<std::string> entries(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

// What a profile looked like before: recognisable bytes.
std::string old_bytes() {
    std::string s;
    for (int i = 0; i < 2000; i++) s += "old profile line " + std::to_string(i) + "\n";
    return s;
}

// A large output: several MB of speedscope JSON.
const std::string& large_profile_json() {
    static const std::string json = [] {
        Profile p = test::synthetic_profile(2, 120, 99);
        std::ostringstream os;
        make_exporter("speedscope")->write(p, {}, os);
        return os.str();
    }();
    return json;
}

// A small tmpfs (8 MiB) mounted on a fresh directory for the test, with an old profile in
// it (root only; required under CI).
class OutputFileOnTmpfs : public ::testing::Test {
protected:
    void SetUp() override {
        PBP_REQUIRE(geteuid() == 0, "mounting a tmpfs needs root");
        dir_ = test::temp_dir() + "/mnt";
        fs::create_directories(dir_);
        mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=8m,mode=0755") == 0;
        PBP_REQUIRE(mounted_, std::string("cannot mount a tmpfs: ") + strerror(errno));
        path_ = dir_ + "/profile.out";
        write_plain(path_, old_bytes());
    }
    void TearDown() override {
        if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    }
    std::string dir_, path_;
    bool mounted_ = false;
};

TEST(OutputFile, WritesANewFileWithTheUsualMode) {
    std::string dir = test::temp_dir();
    std::string path = dir + "/out.json";
    mode_t old_mask = umask(027);
    std::string error;
    bool ok = write_file_atomically(path, [](std::ostream& o) { o << "{\"a\":1}\n"; }, error);
    umask(old_mask);
    ASSERT_TRUE(ok) << error;
    EXPECT_EQ(error, "");
    EXPECT_EQ(read_all(path), "{\"a\":1}\n");
    struct stat st{};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u) << "0666 & ~umask";
    EXPECT_EQ(entries(dir), std::set<std::string>{"out.json"}) << "no temporary file left";
}

TEST(OutputFile, ReplacesTheOldFileWhole) {
    std::string dir = test::temp_dir();
    std::string path = dir + "/out.folded";
    write_plain(path, old_bytes());
    std::string error;
    ASSERT_TRUE(write_file_atomically(path, [](std::ostream& o) { o << large_profile_json(); }, error)) << error;
    EXPECT_TRUE(read_all(path) == large_profile_json()) << "not the new content";
    EXPECT_EQ(entries(dir), std::set<std::string>{"out.folded"});
    // A relative path writes in the current directory.
    std::string cwd = fs::current_path();
    fs::current_path(dir);
    bool ok = write_file_atomically("rel.txt", [](std::ostream& o) { o << "x"; }, error);
    fs::current_path(cwd);
    ASSERT_TRUE(ok) << error;
    EXPECT_EQ(read_all(dir + "/rel.txt"), "x");
}

// The file replaced keeps its mode, owner and group: a profile its owner made private (0600)
// stays private when root writes it again (it became 0644 and root's, by umask).
TEST(OutputFile, ReplacingKeepsTheOldFilesModeAndOwner) {
    std::string dir = test::temp_dir();
    std::string path = dir + "/private.json";
    write_plain(path, old_bytes());
    ASSERT_EQ(chmod(path.c_str(), 0600), 0);
    const bool root = geteuid() == 0;
    if (root) ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);  // nobody:nogroup
    mode_t old_mask = umask(022);
    std::string error;
    bool ok = write_file_atomically(path, [](std::ostream& o) { o << "{\"a\":2}\n"; }, error);
    umask(old_mask);
    ASSERT_TRUE(ok) << error;
    EXPECT_EQ(read_all(path), "{\"a\":2}\n");
    struct stat st{};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    if (root) {
        EXPECT_EQ(st.st_uid, 65534u);
        EXPECT_EQ(st.st_gid, 65534u);
    }
}

TEST(OutputFile, AWriterThatThrowsLeavesTheTargetAlone) {
    std::string dir = test::temp_dir();
    std::string path = dir + "/out.pb.gz";
    write_plain(path, old_bytes());
    std::string error;
    EXPECT_FALSE(write_file_atomically(
        path,
        [](std::ostream& o) {
            o << std::string(1 << 20, 'x');
            throw std::runtime_error("pprof: cannot serialize the profile");
        },
        error));
    EXPECT_EQ(error, "pprof: cannot serialize the profile");
    EXPECT_TRUE(read_all(path) == old_bytes()) << "the old file changed";
    EXPECT_EQ(entries(dir), std::set<std::string>{"out.pb.gz"});
}

TEST(OutputFile, MissingDirectoryAndADirectoryAsTarget) {
    std::string dir = test::temp_dir();
    std::string error;
    EXPECT_FALSE(write_file_atomically(dir + "/gone/out.json", [](std::ostream& o) { o << "x"; }, error));
    EXPECT_EQ(error, "No such file or directory");
    fs::create_directories(dir + "/sub");
    EXPECT_FALSE(write_file_atomically(dir + "/sub", [](std::ostream& o) { o << "x"; }, error));
    EXPECT_EQ(error, "Is a directory");
    EXPECT_TRUE(fs::is_directory(dir + "/sub"));
}

// A link is followed (the file it names is replaced, the link stays); a device is written
// in place, never replaced by a regular file.
TEST(OutputFile, SymlinksAndDevices) {
    std::string dir = test::temp_dir();
    write_plain(dir + "/real.json", old_bytes());
    fs::create_symlink("real.json", dir + "/link.json");
    std::string error;
    ASSERT_TRUE(write_file_atomically(dir + "/link.json", [](std::ostream& o) { o << "new"; }, error)) << error;
    EXPECT_TRUE(fs::is_symlink(dir + "/link.json"));
    EXPECT_EQ(read_all(dir + "/real.json"), "new");
    EXPECT_EQ(entries(dir), (std::set<std::string>{"link.json", "real.json"}));
    ASSERT_TRUE(write_file_atomically("/dev/null", [](std::ostream& o) { o << large_profile_json(); }, error)) << error;
    struct stat st{};
    ASSERT_EQ(stat("/dev/null", &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null is still a device";
}

// A full file system: the write fails with ENOSPC part way; the old file survives byte for
// byte, nothing is left under the target's name and no temporary file remains.
TEST_F(OutputFileOnTmpfs, FullFileSystemKeepsTheOldFile) {
    {  // fill it, leaving some room: the write gets part way before the disk is full
        std::ofstream filler(dir_ + "/filler", std::ios::binary);
        std::string block(64 * 1024, 'f');
        while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) && filler.flush()) {
        }
    }
    fs::resize_file(dir_ + "/filler", fs::file_size(dir_ + "/filler") - 256 * 1024);
    ASSERT_GT(large_profile_json().size(), 2u << 20);
    std::string error;
    EXPECT_FALSE(write_file_atomically(path_, [](std::ostream& o) { o << large_profile_json(); }, error));
    EXPECT_EQ(error, "No space left on device");
    EXPECT_TRUE(read_all(path_) == old_bytes()) << "the old file changed";
    EXPECT_EQ(entries(dir_), (std::set<std::string>{"filler", "profile.out"}));
    // With room again the same write succeeds.
    fs::remove(dir_ + "/filler");
    ASSERT_LT(large_profile_json().size(), 7u << 20) << "fits the tmpfs next to the old file";
    EXPECT_TRUE(write_file_atomically(path_, [](std::ostream& o) { o << large_profile_json(); }, error)) << error;
    EXPECT_TRUE(read_all(path_) == large_profile_json()) << "not the new content";
}

TEST_F(OutputFileOnTmpfs, ReadOnlyDirectoryKeepsTheOldFile) {
    ASSERT_EQ(mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, "size=8m,mode=0755"), 0) << strerror(errno);
    std::string error;
    EXPECT_FALSE(write_file_atomically(path_, [](std::ostream& o) { o << large_profile_json(); }, error));
    EXPECT_EQ(error, "Read-only file system");
    EXPECT_TRUE(read_all(path_) == old_bytes()) << "the old file changed";
    EXPECT_EQ(entries(dir_), std::set<std::string>{"profile.out"});
}

// SIGKILL in the middle of a large write: the target keeps its old bytes. The temporary
// file may stay (nothing runs after SIGKILL), but under its own name only.
TEST(OutputFile, KilledMidWriteKeepsTheOldFile) {
    const std::string dir = test::temp_dir();
    const std::string path = dir + "/out.pb.gz";
    write_plain(path, old_bytes());
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        std::string error;
        write_file_atomically(
            path,
            [](std::ostream& o) {
                std::string block(1 << 20, 'n');
                for (int i = 0; i < 2000; i++) {  // ~2 GB, slowly: it is killed long before
                    o.write(block.data(), static_cast<std::streamsize>(block.size()));
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                }
            },
            error);
        _exit(0);
    }
    // Wait until the temporary file holds a few MB.
    std::string tmp;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().filename() != "out.pb.gz" && fs::file_size(e.path()) > (4u << 20)) tmp = e.path();
        if (!tmp.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_FALSE(tmp.empty()) << "the writer never got going";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    EXPECT_TRUE(read_all(path) == old_bytes()) << "the old file changed";
    size_t left = 0;
    for (const auto& name : entries(dir)) {
        if (name == "out.pb.gz") continue;
        left++;
        EXPECT_EQ(name.rfind(".out.pb.gz.tmp-", 0), 0u) << "a stray file under another name: " << name;
    }
    EXPECT_EQ(left, 1u) << "the killed writer's temporary file";
    // The next write of the same file removes it: its writer is gone (its lock with it), and
    // it has not changed for a second.
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));
    std::string error;
    ASSERT_TRUE(write_file_atomically(path, [](std::ostream& o) { o << "new"; }, error)) << error;
    EXPECT_EQ(read_all(path), "new");
    EXPECT_EQ(entries(dir), std::set<std::string>{"out.pb.gz"}) << "the abandoned temporary file was left";
}

// A writer that is alive but quiet (a large report made before its bytes flow) keeps its
// temporary file while another writes the same path: only abandoned ones are removed. Both
// writes succeed; the last rename wins.
TEST(OutputFile, AQuietWriterKeepsItsTemporaryFile) {
    const std::string dir = test::temp_dir();
    const std::string path = dir + "/out.json";
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(ready[0]);
        std::string error;
        bool ok = write_file_atomically(
            path,
            [&](std::ostream& o) {
                o << "slow" << std::flush;
                (void)!write(ready[1], "r", 1);
                std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // no write for 3.5 s
                o << " writer";
            },
            error);
        _exit(ok ? 0 : 1);
    }
    close(ready[1]);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // its file is 2 s unchanged
    std::string error;
    ASSERT_TRUE(write_file_atomically(path, [](std::ostream& o) { o << "quick"; }, error)) << error;
    EXPECT_EQ(read_all(path), "quick");
    EXPECT_EQ(entries(dir).size(), 2u) << "the quiet writer's temporary file was removed";
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the quiet writer failed";
    EXPECT_EQ(read_all(path), "slow writer");
    EXPECT_EQ(entries(dir), std::set<std::string>{"out.json"});
}

}  // namespace
}  // namespace pbp
