# Sourced by the container scripts: podman as it works on this kind of machine. crun refuses its hybrid
# cgroups, so runc runs the containers; the sandbox cannot raise rlimits to podman's defaults, so they
# are given; containers share the host's network (loopback only is reachable anyway).
PODMAN_RUN_FLAGS=(--runtime runc --network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
export PODMAN_RUN_FLAGS
