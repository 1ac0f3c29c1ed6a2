#include "targets/engine_names.h"

#include <dirent.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace pbp::engines {

namespace {

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    if (!f) return "";
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

bool ends_with(const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// containers/storage keeps one containers.json per storage driver ("overlay-containers",
// "vfs-containers", ...): [{"id": ..., "names": [...]}, ...].
std::string podman_name(const std::string& root, const std::string& id) {
    const std::string storage = root + "/var/lib/containers/storage";
    DIR* d = opendir(storage.c_str());
    if (!d) return "";
    std::string found;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (!ends_with(n, "-containers")) continue;
        auto doc = nlohmann::json::parse(slurp(storage + "/" + n + "/containers.json"), nullptr, false);
        if (!doc.is_array()) continue;
        for (const auto& c : doc) {
            if (!c.is_object() || c.value("id", "") != id) continue;
            auto names = c.find("names");
            if (names != c.end() && names->is_array() && !names->empty() && (*names)[0].is_string())
                found = (*names)[0].get<std::string>();
        }
        if (!found.empty()) break;
    }
    closedir(d);
    return found;
}

// Docker: {"Name": "/web", ...}, the name with a leading '/'.
std::string docker_name(const std::string& root, const std::string& id) {
    auto doc = nlohmann::json::parse(slurp(root + "/var/lib/docker/containers/" + id + "/config.v2.json"), nullptr, false);
    if (!doc.is_object()) return "";
    auto it = doc.find("Name");
    if (it == doc.end() || !it->is_string()) return "";
    std::string n = it->get<std::string>();
    if (!n.empty() && n[0] == '/') n.erase(0, 1);
    return n;
}

}  // namespace

std::string container_name(const std::string& root, const std::string& id) {
    // An ID is hex: it cannot climb out of Docker's directory.
    if (id.empty() || id.find_first_not_of("0123456789abcdef") != std::string::npos) return "";
    std::string n = podman_name(root, id);
    return n.empty() ? docker_name(root, id) : n;
}

}  // namespace pbp::engines
