#!/usr/bin/env bash
# Install what tests/deploy/test_rayup.py needs to run `ray up` against this machine:
#   openssh-server  a private sshd on 127.0.0.1 for the cluster launcher to log into
#   rsync           `ray up` rsyncs its bootstrap config/key and file_mounts to the head
#   netcat-openbsd  `nc`, the ssh ProxyCommand that reaches the sshd's non-22 port
# Installs only what is missing, and only as root with apt-get. It never fails the build:
# when it cannot install, it says why and exits 0, and the test skips with the reason.
set -u

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v nc >/dev/null 2>&1 || need+=(netcat-openbsd)

if [ ${#need[@]} -eq 0 ]; then
    echo "install_deps.sh: sshd, rsync and nc are present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_deps.sh: missing ${need[*]}; not root, so not installing (test_rayup.py will skip)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_deps.sh: missing ${need[*]}; no apt-get on this machine (test_rayup.py will skip)"
    exit 0
fi

echo "install_deps.sh: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq; then
    echo "install_deps.sh: apt-get update failed; not installing ${need[*]} (test_rayup.py will skip)"
    exit 0
fi
if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
    echo "install_deps.sh: apt-get install ${need[*]} failed (test_rayup.py will skip)"
    exit 0
fi
echo "install_deps.sh: installed ${need[*]}"
exit 0
