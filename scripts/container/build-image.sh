#!/usr/bin/env bash
# Builds the service's image from the Dockerfile, on the stand-in base (see build-base-image.sh) unless
# BASE_IMAGE names another. Usage: scripts/container/build-image.sh [image name]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/container/podman.sh

IMAGE=${1:-${PLANTSTORE_IMAGE:-localhost/plantstore:ci}}
BASE_IMAGE=${BASE_IMAGE:-localhost/plantstore-node-base:24-bookworm}

if [ "$BASE_IMAGE" = localhost/plantstore-node-base:24-bookworm ]; then
  PLANTSTORE_BASE_IMAGE=$BASE_IMAGE scripts/container/build-base-image.sh
fi
# The docker format keeps HEALTHCHECK, which the OCI image format has no field for.
podman build --format docker "${PODMAN_RUN_FLAGS[@]}" --build-arg "BASE_IMAGE=$BASE_IMAGE" --tag "$IMAGE" .
podman image inspect --format "$IMAGE: {{.Size}} bytes" "$IMAGE"
