# No `# syntax=` line: it would make BuildKit pull a frontend image from Docker Hub, which the machines
# that build this image without a container registry cannot do; the built-in frontend is enough.

# The base image: the official Node.js 24 image by default. Machines that cannot pull it build a
# stand-in with scripts/container/build-base-image.sh and pass --build-arg BASE_IMAGE=<that image>.
ARG BASE_IMAGE=node:24-slim

# --- build: compile TypeScript, then keep production dependencies only ------------------------------
FROM ${BASE_IMAGE} AS build
WORKDIR /app
# No install scripts: on Node 22 and later the service loads better-sqlite3 13, whose binary is prebuilt
# inside its package, so nothing is compiled and no compiler is needed. The unused release 12 (Node 20's
# driver, which would compile from source) is removed with the other platforms' prebuilt binaries.
RUN node -e "if (Number(process.versions.node.split('.')[0]) < 22) { console.error('the image needs Node.js 22 or later'); process.exit(1) }"
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build \
 && chmod 0755 dist/cli.js \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
 && rm -rf node_modules/better-sqlite3 \
 && platform="$(node -p 'process.platform + "-" + process.arch')" \
 && find node_modules/better-sqlite3-v13/prebuilds -type f ! -name "${platform}.node" -delete \
 && rm -rf node_modules/better-sqlite3-v13/src node_modules/better-sqlite3-v13/deps \
 && node -e "require('better-sqlite3-v13')(':memory:').prepare('SELECT 1').get()"

# --- runtime: production dependencies and compiled code only, as the unprivileged node user -------
FROM ${BASE_IMAGE}
# MALLOC_ARENA_MAX: glibc's malloc keeps one arena per thread that allocates (the main thread, the SQLite
# writer, libuv's pool), each holding freed memory of its own; two arenas keep 4-8 MB less resident at
# no CPU cost measured (docs/explanations/performance.md, "Memory").
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    METRICS_PORT=9464 \
    DATABASE_URL=sqlite:/data/plantstore.db \
    MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# `plantstore …` on the PATH: dist/cli.js starts with `#!/usr/bin/env -S node` and the CMD's flags, and a symlink's target
# is what Node loads (an ES module, by /app/package.json). It reads the same environment as the service, so
# `podman exec <container> plantstore tokens create …` changes the tokens of the service's own database, and
# `plantstore backup FILE` backs it up.
RUN mkdir -p /data && chown node:node /data \
 && ln -s /app/dist/cli.js /usr/local/bin/plantstore
VOLUME ["/data"]
USER node
EXPOSE 3000 9464
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
# Node's flags, the same as `npm start` and the first line of dist/cli.js (docs/explanations/performance.md, "Memory"): an
# 8 MB semi-space, and an old generation that grows by half its live size before a full collection.
CMD ["node", "--max-semi-space-size=8", "--heap-growing-percent=50", "dist/server.js"]
