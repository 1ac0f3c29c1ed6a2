// cgroup2 mounts, kubelet cgroup layouts, the node's pod/container names and --cgroup
// resolution, against recreated layouts (a plain directory tree stands in for the cgroup2
// mount here; tests/integration/test_cgroups.cpp does the same on the real one).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "targets/cgroup_target.h"
#include "targets/cgroups.h"
#include "targets/engine_names.h"
#include "targets/kube.h"
#include "test_support.h"

namespace pbp::test {
namespace {

namespace fs = std::filesystem;

const std::string kUid = "0b6a2c4e-1f3d-4e5a-8b7c-9d0e1f2a3b4c";
const std::string kUidUnderscored = "0b6a2c4e_1f3d_4e5a_8b7c_9d0e1f2a3b4c";
const std::string kId1 = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789";
const std::string kId2 = "abcdef01ffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

TEST(Cgroup2Mounts, HybridPureAndEscaped) {
    std::string mi =
        "25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n"
        "31 25 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n"
        "42 31 0:39 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory\n"
        "90 30 0:38 /.. /host/cgroup\\040dir rw - cgroup2 cgroup2 rw\n";
    auto m = cgroups::parse_cgroup2_mounts(mi);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].path, "/sys/fs/cgroup/unified");
    EXPECT_EQ(m[0].root, "/");
    EXPECT_EQ(m[1].path, "/host/cgroup dir");
    EXPECT_EQ(m[1].root, "/..");
    EXPECT_TRUE(cgroups::parse_cgroup2_mounts("22 1 0:20 / /sys/fs/cgroup rw - cgroup cgroup rw,cpu\n").empty());
}

TEST(Cgroup2Mounts, ThisMachineHasTheHierarchyMounted) {
    std::string error;
    auto m = cgroups::hierarchy_mount(error);
    ASSERT_TRUE(m.has_value()) << error;
    EXPECT_TRUE(fs::exists(*m + "/cgroup.procs")) << *m;
}

TEST(CgroupPaths, Ancestry) {
    EXPECT_TRUE(cgroups::is_under("/a/b", "/a"));
    EXPECT_TRUE(cgroups::is_under("/a", "/a/"));
    EXPECT_FALSE(cgroups::is_under("/ab", "/a"));
    EXPECT_TRUE(cgroups::is_under("/x", "/"));
}

TEST(KubeletLayouts, SystemdDriverContainerd) {
    auto id = kube::parse_cgroup_path("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                                      kUidUnderscored + ".slice/cri-containerd-" + kId1 + ".scope");
    EXPECT_EQ(id.pod_uid, kUid);
    EXPECT_EQ(id.container_id, kId1);
    EXPECT_EQ(id.runtime, "containerd");
}

TEST(KubeletLayouts, GuaranteedPodCrioAndConmon) {
    auto id = kube::parse_cgroup_path("/kubepods.slice/kubepods-pod" + kUidUnderscored + ".slice/crio-" + kId1 +
                                      ".scope");
    EXPECT_EQ(id.pod_uid, kUid);
    EXPECT_EQ(id.container_id, kId1);
    EXPECT_EQ(id.runtime, "crio");
    EXPECT_EQ(kube::container_id_of_dir("crio-conmon-" + kId1 + ".scope"), "");
    EXPECT_EQ(kube::container_id_of_dir("docker-" + kId2 + ".scope"), kId2);
    EXPECT_EQ(kube::container_id_of_dir("libpod-" + kId2 + ".scope"), kId2);
}

TEST(KubeletLayouts, CgroupfsDriverAndPlainDocker) {
    auto id = kube::parse_cgroup_path("/kubepods/besteffort/pod" + kUid + "/" + kId1);
    EXPECT_EQ(id.pod_uid, kUid);
    EXPECT_EQ(id.container_id, kId1);
    auto d = kube::parse_cgroup_path("/docker/" + kId2);
    EXPECT_EQ(d.pod_uid, "");
    EXPECT_EQ(d.container_id, kId2);
    // a hybrid host's v1 line, as a reader in another cgroup namespace sees it
    auto ns = kube::parse_cgroup_path("/../../kubepods/burstable/pod" + kUid + "/" + kId1);
    EXPECT_EQ(ns.pod_uid, kUid);
    auto none = kube::parse_cgroup_path("/user.slice/user-0.slice/session-3.scope");
    EXPECT_EQ(none.pod_uid, "");
    EXPECT_EQ(none.container_id, "");
    EXPECT_EQ(kube::pod_uid_of_dir("kubepods-burstable.slice"), "");
}

TEST(KubeletLayouts, WhatArgumentsLookLike) {
    EXPECT_TRUE(kube::looks_like_pod_uid(kUid));
    EXPECT_FALSE(kube::looks_like_pod_uid(kUidUnderscored));
    EXPECT_TRUE(kube::looks_like_pod_name("ray-system/raycluster-head-x7k2p"));
    EXPECT_FALSE(kube::looks_like_pod_name("Ray/Head"));
    EXPECT_FALSE(kube::looks_like_pod_name("a/b/c"));
    EXPECT_TRUE(kube::looks_like_container_id("abcdef"));
    EXPECT_FALSE(kube::looks_like_container_id("abcde"));
    EXPECT_FALSE(kube::looks_like_container_id("xyz123"));
}

// A node: a cgroup tree with both kubelet layouts, and kubelet's log directories.
class NodeTree : public ::testing::Test {
protected:
    void SetUp() override {
        root = temp_dir();
        mount = root + "/cgroup";
        qos = mount + "/kubepods.slice/kubepods-burstable.slice";
        pod = qos + "/kubepods-burstable-pod" + kUidUnderscored + ".slice";
        fs::create_directories(pod + "/cri-containerd-" + kId1 + ".scope");
        fs::create_directories(pod + "/cri-containerd-" + kId2 + ".scope");
        fs::create_directories(mount + "/system.slice/crio-conmon-" + kId1 + ".scope");
        fs::create_directories(mount + "/plain/group");
        node = root + "/node";
        fs::create_directories(node + "/var/log/pods/shop_web-1_" + kUid + "/app");
        fs::create_directories(node + "/var/log/containers");
        std::ofstream(node + "/var/log/containers/web-1_shop_app-" + kId1 + ".log");
        std::ofstream(node + "/var/log/containers/web-1_shop_side-car-" + kId2 + ".log");
    }
    std::string root, mount, qos, pod, node;
};

TEST_F(NodeTree, NamesFromKubeletDirectories) {
    kube::Node n(node);
    auto p = n.pod_by_uid(kUid);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->namespace_, "shop");
    EXPECT_EQ(p->name, "web-1");
    EXPECT_EQ(n.container_name(kId1), "app");
    EXPECT_EQ(n.container_name(kId2), "side-car");
    EXPECT_EQ(n.pods_by_name("shop", "web-1").size(), 1u);
    EXPECT_TRUE(n.pods_by_name("shop", "web-2").empty());
}

// podman's and Docker's own state, as they write it (podman 4.3's containers.json, with a
// second storage driver's; Docker's config.v2.json), and what is not a name.
TEST(EngineNames, PodmanAndDockerState) {
    std::string root = temp_dir();
    const std::string podman_id = kId1, docker_id = kId2, vfs_id = std::string(64, 'e');
    fs::create_directories(root + "/var/lib/containers/storage/overlay-containers");
    std::ofstream(root + "/var/lib/containers/storage/overlay-containers/containers.json")
        << R"([{"id":"0000000000000000000000000000000000000000000000000000000000000000","names":["other"]},)"
        << R"({"id":")" << podman_id << R"(","names":["web-api","alias"],"image":"73434bc3de2e",)"
        << R"("metadata":"{\"name\":\"web-api\"}","flags":{"MountLabel":""}}])";
    fs::create_directories(root + "/var/lib/containers/storage/vfs-containers");
    std::ofstream(root + "/var/lib/containers/storage/vfs-containers/containers.json")
        << R"([{"id":")" << vfs_id << R"(","names":["on-vfs"]}])";
    fs::create_directories(root + "/var/lib/docker/containers/" + docker_id);
    std::ofstream(root + "/var/lib/docker/containers/" + docker_id + "/config.v2.json")
        << R"({"ID":")" << docker_id << R"(","Name":"/worker","State":{"Running":true}})";
    EXPECT_EQ(engines::container_name(root, podman_id), "web-api");
    EXPECT_EQ(engines::container_name(root, vfs_id), "on-vfs");
    EXPECT_EQ(engines::container_name(root, docker_id), "worker");
    EXPECT_EQ(engines::container_name(root, std::string(64, 'a')), "");
    EXPECT_EQ(engines::container_name(root, "../../etc"), "");
    // damaged state is no name, not an error
    std::ofstream(root + "/var/lib/containers/storage/overlay-containers/containers.json") << "[{\"id\":";
    EXPECT_EQ(engines::container_name(root, podman_id), "");
    EXPECT_EQ(engines::container_name(temp_dir(), podman_id), "");
}

TEST_F(NodeTree, ResolvesPodByUidAndByName) {
    kube::Node n(node);
    for (const std::string& spec : {kUid, std::string("shop/web-1")}) {
        auto r = resolve_cgroup(spec, mount, n);
        ASSERT_EQ(r.status, CgroupResolve::Found) << spec << ": " << r.message();
        EXPECT_EQ(r.target.kind, "pod");
        EXPECT_EQ(r.target.abs_path, pod);
        EXPECT_EQ(r.target.pod.name, "web-1");
        EXPECT_EQ(r.target.describe(),
                  "pod shop/web-1 (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidUnderscored +
                      ".slice)");
    }
}

TEST_F(NodeTree, ResolvesContainerByUniquePrefixOnly) {
    kube::Node n(node);
    auto r = resolve_cgroup(kId1.substr(0, 12), mount, n);
    ASSERT_EQ(r.status, CgroupResolve::Found) << r.message();
    EXPECT_EQ(r.target.abs_path, pod + "/cri-containerd-" + kId1 + ".scope") << "not the conmon scope";
    auto amb = resolve_cgroup("abcdef01", mount, n);
    EXPECT_EQ(amb.status, CgroupResolve::Ambiguous);
    EXPECT_NE(amb.message().find("matches 2 containers"), std::string::npos) << amb.message();
    auto none = resolve_cgroup("fedcba987", mount, n);
    EXPECT_EQ(none.status, CgroupResolve::NotFound);
    EXPECT_NE(none.message().find("no container"), std::string::npos) << none.message();
}

TEST_F(NodeTree, ResolvesPathsAndSaysWhatIsMissing) {
    kube::Node n(node);
    for (const std::string& spec : {std::string("plain/group"), std::string("/plain/group"), mount + "/plain/group/"}) {
        auto r = resolve_cgroup(spec, mount, n);
        ASSERT_EQ(r.status, CgroupResolve::Found) << spec << ": " << r.message();
        EXPECT_EQ(r.target.rel_path, "/plain/group") << spec;
        EXPECT_EQ(r.target.kind, "cgroup");
    }
    auto missing = resolve_cgroup("/plain/nope", mount, n);
    EXPECT_EQ(missing.status, CgroupResolve::NotFound);
    EXPECT_NE(missing.message().find("-d SECONDS"), std::string::npos) << missing.message();
    auto nopod = resolve_cgroup("shop/web-2", mount, n);
    EXPECT_EQ(nopod.status, CgroupResolve::NotFound);
    EXPECT_NE(nopod.cause.find("no pod shop/web-2 on this node"), std::string::npos) << nopod.message();
    EXPECT_EQ(nopod.message().find('\n'), std::string::npos);
    // kubelet knows the pod but its cgroup does not exist yet
    const std::string uid2 = "11111111-2222-3333-4444-555555555555";
    fs::create_directories(node + "/var/lib/kubelet/pods/" + uid2);
    auto early = resolve_cgroup(uid2, mount, n);
    EXPECT_EQ(early.status, CgroupResolve::NotFound);
    EXPECT_NE(early.cause.find("have not started"), std::string::npos) << early.message();
}

TEST_F(NodeTree, CgroupfsLayout) {
    const std::string uid = "99999999-8888-7777-6666-555555555555";
    std::string dir = mount + "/kubepods/besteffort/pod" + uid;
    fs::create_directories(dir + "/" + std::string(64, 'c'));
    fs::create_directories(node + "/var/log/pods/batch_etl-7_" + uid);
    kube::Node n(node);
    auto r = resolve_cgroup("batch/etl-7", mount, n);
    ASSERT_EQ(r.status, CgroupResolve::Found) << r.message();
    EXPECT_EQ(r.target.abs_path, dir);
    auto c = resolve_cgroup("cccccccc", mount, n);
    ASSERT_EQ(c.status, CgroupResolve::Found) << c.message();
    EXPECT_EQ(c.target.abs_path, dir + "/" + std::string(64, 'c'));
}

}  // namespace
}  // namespace pbp::test
