#!/usr/bin/env bash
# Builds the service's image from the Dockerfile, on the stand-in base (see build-base-image.sh) unless
# BASE_IMAGE names another. Usage: scripts/container/build-image.sh [image name]
set -euo pipefail
export LC_NUMERIC=C
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/container/podman.sh

IMAGE=${1:-${PLANTSTORE_IMAGE:-localhost/plantstore:ci}}
BASE_IMAGE=${BASE_IMAGE:-localhost/plantstore-node-base:24-bookworm}
seconds_since () { awk -v now="$EPOCHREALTIME" -v then="$1" 'BEGIN { printf "%.1f s", now - then }'; }

if [ "$BASE_IMAGE" = localhost/plantstore-node-base:24-bookworm ]; then
  started=$EPOCHREALTIME
  PLANTSTORE_BASE_IMAGE=$BASE_IMAGE scripts/container/build-base-image.sh
  echo "base image ready in $(seconds_since "$started")"
fi

started=$EPOCHREALTIME
# The docker format keeps HEALTHCHECK, which the OCI image format has no field for.
podman build --format docker "${PODMAN_RUN_FLAGS[@]}" --build-arg "BASE_IMAGE=$BASE_IMAGE" --tag "$IMAGE" .
echo "$IMAGE built in $(seconds_since "$started")"
podman image inspect --format "$IMAGE: {{.Size}} bytes" "$IMAGE"
