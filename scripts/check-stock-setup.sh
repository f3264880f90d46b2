#!/usr/bin/env bash
# By hand (root, the network to Debian and PyPI, ~10 min): the README's quick start on a stock
# Debian 12 that has nothing but python3, as root and as a user with sudo. The "machine" is a
# copy of the debootstrapped bookworm that `ooda sandbox build` caches, entered with unshare and
# pivot_root (own mount and PID namespaces; the host's network; the host's Docker socket, so no
# engine is started in it). Prints each quick start's output and exit code.
set -euo pipefail
base="${OODA_HOME:-$HOME/.cache/ooda}/base-bookworm-amd64"
[ "$(id -u)" -eq 0 ] || { echo "check-stock-setup.sh: run as root" >&2; exit 2; }
[ -d "$base" ] || { echo "check-stock-setup.sh: no $base: run \`ooda sandbox build\` first" >&2; exit 2; }
work="$(mktemp -d /tmp/ooda-stock.XXXXXX)"
chmod 755 "$work"  # the user inside clones from it
stock_host="ooda-stock-$$"
# the containers the stock machine's ooda left, if any (named by their owner's host name)
trap 'docker ps -aq --filter "label=ooda.owner_host=$stock_host" 2>/dev/null \
  | xargs -r docker rm -f >/dev/null 2>&1; rm -rf "$work"' EXIT
git clone -q "$(cd "$(dirname "$0")/.." && pwd)" "$work/src"
cp -a "$base" "$work/rootfs"
cp /etc/resolv.conf "$work/rootfs/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$work/host-ca.crt" 2>/dev/null || true
mkdir -p "$work/rootfs$work" "$work/rootfs/oldroot" "$work/tmp" && chmod 1777 "$work/tmp"
touch "$work/rootfs/run/docker.sock"
cat >"$work/inside.sh" <<'INSIDE'
set -u
W="$WORK"  # the same path as on the host: the engine's bind mounts must resolve there
export DEBIAN_FRONTEND=noninteractive
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d  # no services
apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends sudo git \
  ca-certificates procps >/dev/null || exit 9
# a TLS-intercepting proxy's CA, as the host trusts it (a no-op elsewhere)
[ -s "$W/host-ca.crt" ] && cp "$W/host-ca.crt" /etc/ssl/certs/ca-certificates.crt
git config --system --add safe.directory '*'
echo "== as a user with sudo: bash scripts/quickstart.sh"
# a uid of its own: the machine's Docker sandboxes run as uid 1000, and RLIMIT_NPROC (bwrap's
# process bound) counts a uid's processes machine-wide, which this pid namespace cannot see
useradd -m -s /bin/bash -u 27027 u && echo 'u ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/u
su - u -c "export TMPDIR=$W/tmp; git clone -q $W/src ~/ooda && cd ~/ooda \
  && bash scripts/quickstart.sh; echo \"user quickstart exit \$?\""
echo "== as root: bash scripts/quickstart.sh"
git clone -q "$W/src" /root/ooda && cd /root/ooda && bash scripts/quickstart.sh
echo "root quickstart exit $?"
if python3 -c 'import ooda' 2>/dev/null; then echo "the system python3 imports ooda (it should not)"; fi
INSIDE
# Its own host name (UTS namespace) too: ooda labels each container with its owner's pid and
# host, and removes as leftovers the ones whose owner it cannot see. Inside a pid namespace, on
# the same host name, the machine's own ooda processes and the stock one would each take the
# other's running containers for leftovers and remove them.
unshare --mount --pid --uts --fork --propagation private bash -c '
  set -e; cd "$1"
  hostname "$2"
  mount --bind rootfs rootfs
  mount --bind . "rootfs$1"
  mount --bind /var/run/docker.sock rootfs/run/docker.sock
  mount --rbind /dev rootfs/dev
  mount --rbind /sys rootfs/sys
  cd rootfs && pivot_root . oldroot && mount -t proc proc /proc && umount -l /oldroot
  exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root TMPDIR="$1/tmp" WORK="$1" LANG=C.UTF-8 bash "$1/inside.sh"' _ "$work" "$stock_host"
