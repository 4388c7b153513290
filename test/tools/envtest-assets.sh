#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver, etcd) and kubectl-compatible assets from
# the Go module proxy, because prebuilt downloads are unreachable. Cached per user; rebuilt
# only when missing. Prints the asset directory on the last line of stdout.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
CACHE_ROOT="${GITOPS_REVERSER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gitops-reverser}"
ASSETS="$CACHE_ROOT/envtest/$K8S_VERSION"
STAGING_MINOR="0.${K8S_VERSION#1.}"

log() { echo "envtest: $*" >&2; }

# with_heartbeat runs the rest of its arguments in the foreground, so a Ctrl-C stops it, and prints a
# heartbeat meanwhile, so a 10-minute step never looks hung. The heartbeat lets go of the
# lock's descriptor and of stdout (the Makefile reads the asset directory from it until it
# closes), and ends within 30 s of this script.
with_heartbeat() {
  local what=$1 start=$SECONDS beat rc=0
  shift
  (
    exec 9>&- >/dev/null
    while sleep 30 && kill -0 $$ 2>/dev/null; do log "still building $what ($((SECONDS - start))s elapsed)"; done
  ) &
  beat=$!
  "$@" || rc=$?
  kill "$beat" 2>/dev/null || : # it may have ended already
  return "$rc"
}

build_apiserver() {
  local dir
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' RETURN
  log "building kube-apiserver v$K8S_VERSION from the Go module proxy (cold: about 10 minutes on 2 cores)"
  cd "$dir"
  cat >go.mod <<MOD
module envtest.local/kubeapiserver

go 1.26
MOD
  cat >tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  go mod download "k8s.io/kubernetes@v$K8S_VERSION" >&2
  local modfile
  modfile="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$K8S_VERSION.mod"
  go mod edit -require "k8s.io/kubernetes@v$K8S_VERSION"
  grep -E '=> \./staging/' "$modfile" | awk '{print $1}' | while read -r m; do
    go mod edit -replace "$m=$m@v$STAGING_MINOR"
  done
  go mod tidy >&2
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#1.} -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"
  ldflags="${ldflags/gitMinor=${K8S_VERSION#1.}/gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)}"
  with_heartbeat kube-apiserver go build -trimpath -ldflags "$ldflags" -o "$ASSETS/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$ASSETS/kube-apiserver.tmp" "$ASSETS/kube-apiserver"
  log "kube-apiserver ready"
}

build_etcd() {
  local dir
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' RETURN
  log "building etcd v$ETCD_VERSION from the Go module proxy (cold: about 2 minutes)"
  cd "$dir"
  cat >go.mod <<MOD
module envtest.local/etcd

go 1.26
MOD
  cat >tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go mod edit -require "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  go mod tidy >&2
  with_heartbeat etcd go build -trimpath -ldflags "-s -w" -o "$ASSETS/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$ASSETS/etcd.tmp" "$ASSETS/etcd"
  log "etcd ready"
}

# lock serialises concurrent callers (make test and make demo at once) on one lock per asset
# dir: flock(1) where there is one (Linux; the lock goes with the process and the builds it
# started, across containers sharing the cache too), else a directory (mkdir is atomic
# everywhere; macOS has no flock) holding its holder's pid, so a lock left by a killed build
# is taken over rather than waited on (a best effort: for one user's concurrent runs).
lock() {
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$ASSETS/.lock"
    if ! flock -n 9; then
      log "waiting for another build of the envtest assets"
      flock 9
    fi
    return
  fi
  local dir="$ASSETS/.lock.d" holder told=""
  until mkdir "$dir" 2>/dev/null; do
    holder=$(cat "$dir/pid" 2>/dev/null || true)
    if [ -n "$holder" ] && ! kill -0 "$holder" 2>/dev/null; then
      # Still that holder's (not released meanwhile, and taken by another caller)?
      if [ "$(cat "$dir/pid" 2>/dev/null || true)" = "$holder" ]; then
        log "taking over the lock of a build that is gone (pid $holder)"
        rm -rf "$dir"
      fi
      continue
    fi
    if [ -z "$holder" ] && [ -n "$(find "$dir" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then
      rm -rf "$dir" # killed between taking the lock and writing its pid
      continue
    fi
    if [ -n "$holder" ] && [ -z "$told" ]; then
      log "waiting for another build of the envtest assets (pid $holder)"
      told=1
    fi
    sleep 1
  done
  echo $$ >"$dir/pid"
  trap 'rm -rf "$ASSETS/.lock.d"' EXIT
}

mkdir -p "$ASSETS"
lock
[ -x "$ASSETS/etcd" ] || (build_etcd)
[ -x "$ASSETS/kube-apiserver" ] || (build_apiserver)
if [ ! -x "$ASSETS/kubectl" ] && command -v kubectl >/dev/null; then
  ln -sf "$(command -v kubectl)" "$ASSETS/kubectl"
fi
echo "$ASSETS"
