#!/usr/bin/env bash
# Installs what building and smoke-testing the image needs on a Debian machine, when it is missing:
# podman (build and run), runc (the runtime that works with this machine's cgroups) and debootstrap
# (the stand-in base image). Needs root.
set -euo pipefail
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -eq 0 ]; then
  echo "podman, runc and debootstrap are installed"
  exit 0
fi
echo "installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
podman --version
