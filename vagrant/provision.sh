#!/usr/bin/env bash
# Provisions a pybpfprof test machine (run as root by `vagrant up`; safe to run again):
# installs what building and testing pybpfprof needs with the distribution's own package
# manager (apt on Debian/Ubuntu, dnf on Fedora), the tests' JavaScript packages (npm ci) and
# the Debian chroots with extra CPython versions (tools/provision-pythons). It builds nothing:
# vagrant/run-tests does (into /var/tmp/pybpfprof-build, outside the synced folder).
#
#   provision.sh [MACHINE-NAME]      # the name is only printed
set -euo pipefail
repo=${PBP_REPO:-/vagrant}
name=${1:-$(hostname)}
[ "$(id -u)" = 0 ] || { echo "provision.sh: must run as root" >&2; exit 1; }
# shellcheck source=/dev/null
. /etc/os-release
echo "provision.sh: $name: $PRETTY_NAME, kernel $(uname -r) (expected ${PBP_TARGET_KERNEL:-?})"

apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; }

case "${ID}:${VERSION_ID:-}" in
  debian:*)
    # tools/install-deps is written for Debian 12+: reuse it as is.
    apt-get update -q
    apt_install rsync
    "$repo/tools/install-deps"
    ;;

  ubuntu:*)
    apt-get update -q
    apt_install software-properties-common
    add-apt-repository -y universe
    if [ "${VERSION_ID}" != 22.04 ]; then
      # Ubuntu 24.04 has no python3.11 (the tests' "host" interpreter): the deadsnakes PPA
      # builds it the Debian way (static libpython, like Debian's /usr/bin/python3.11).
      add-apt-repository -y ppa:deadsnakes/ppa
    fi
    apt-get update -q
    # Ubuntu's names: bpftool and perf come with linux-tools-*; chromium is a snap (the
    # speedscope-in-a-browser test is then skipped); libbpf-dev is too old on 22.04 (0.5).
    pkgs=(build-essential cmake pkg-config git clang llvm libelf-dev zlib1g-dev libcli11-dev
      nlohmann-json3-dev libgtest-dev libgmock-dev libprotobuf-dev protobuf-compiler
      python3 procps util-linux python3.11 libpython3.11-dev python3-dev python3-yaml
      debootstrap debian-archive-keyring ca-certificates golang-go nodejs npm rsync
      linux-tools-common linux-tools-generic ruby)
    apt_install "${pkgs[@]}"
    apt_install "linux-tools-$(uname -r)" ||
      echo "provision.sh: no linux-tools-$(uname -r); bpftool falls back to linux-tools-generic's"
    apt_install libbpfcc-dev || true
    if [ "${VERSION_ID}" = 22.04 ]; then
      # libbpf >= 1.0 from its release source, into /usr/local (pkg-config finds it there).
      if ! pkg-config --atleast-version=1.0 libbpf 2>/dev/null; then
        v=1.4.7
        tmp=$(mktemp -d)
        curl -fsSL "https://github.com/libbpf/libbpf/archive/refs/tags/v$v.tar.gz" | tar -xz -C "$tmp"
        make -s -C "$tmp/libbpf-$v/src" -j"$(nproc)" install install_uapi_headers \
          PREFIX=/usr/local LIBDIR=/usr/local/lib
        ldconfig
        rm -rf "$tmp"
      fi
    else
      apt_install libbpf-dev
    fi
    # /usr/sbin/bpftool from linux-tools-common is a wrapper that needs the running
    # kernel's linux-tools; point it at whichever bpftool was installed if that is missing.
    if ! bpftool version >/dev/null 2>&1; then
      real=$(ls -d /usr/lib/linux-tools/*/bpftool 2>/dev/null | sort -V | tail -1)
      [ -n "$real" ] && ln -sf "$real" /usr/local/sbin/bpftool
    fi
    ;;

  fedora:*)
    pkgs=(gcc-c++ make cmake pkgconf-pkg-config git clang llvm libbpf-devel bpftool
      elfutils-libelf-devel zlib-devel cli11-devel json-devel gtest-devel gmock-devel
      protobuf-devel protobuf-compiler python3 python3-devel python3.11 python3.11-devel
      python3-pyyaml procps-ng util-linux debootstrap debian-keyring ca-certificates
      golang nodejs npm chromium perf bcc-devel rsync ruby rubygem-minitest)
    dnf install -y --setopt=install_weak_deps=False "${pkgs[@]}"
    ;;

  *)
    echo "provision.sh: $ID $VERSION_ID is not a provisioned target (debian, ubuntu, fedora)" >&2
    exit 1
    ;;
esac

# The tests' JavaScript packages (the real speedscope app check), where Node.js can run them.
if [ "$ID" != debian ] && [ -f "$repo/tests/js/package-lock.json" ] && command -v npm >/dev/null; then
  (cd "$repo/tests/js" && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "provision.sh: npm ci failed (old Node.js?); the speedscope app test will be skipped"
fi

# Debian chroots with CPython 3.9, 3.13, 3.14 and 3.15 (debootstrap works on every target).
"$repo/tools/provision-pythons" || echo "provision.sh: some chroots failed; their tests will be skipped"

echo "provision.sh: $name ready; run the tests: vagrant ssh $name -c 'sudo /vagrant/vagrant/run-tests'"
