#!/usr/bin/env bash
# Prepare a fresh Debian/Ubuntu machine for ooda (as root, non-interactive, idempotent):
# Docker engine, bubblewrap, debootstrap, the package itself, the offline sandbox image.
# Quiet when all is well; on failure says which step failed and shows its log.
set -euo pipefail
cd "$(dirname "$0")/.."

LOG="$(mktemp -t ooda-setup.XXXXXX)"
trap 'rm -f "$LOG"' EXIT

step() {  # step "what" command...: run quietly, show the log and stop on failure
  local what="$1"
  shift
  if ! "$@" >>"$LOG" 2>&1; then
    echo "setup.sh: $what failed; its output:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs packages and starts the Docker engine)" >&2
  exit 1
fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)  # the CLI's real-terminal test
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # report.html rendered headless
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  step "apt-get update" apt-get update -q
  step "apt-get install ${missing[*]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

docker_answers() { docker info >/dev/null 2>&1; }
if ! docker_answers; then
  if command -v systemctl >/dev/null 2>&1 && systemctl start docker >>"$LOG" 2>&1; then
    :
  else
    nohup dockerd >/var/log/ooda-dockerd.log 2>&1 &
  fi
  for _ in $(seq 60); do
    docker_answers && break
    sleep 1
  done
  if ! docker_answers; then
    echo "setup.sh: the Docker engine did not answer within 60 s (log: /var/log/ooda-dockerd.log);" \
      "ooda can still use --sandbox bwrap" >&2
    tail -n 20 /var/log/ooda-dockerd.log >&2 2>/dev/null || true
  fi
fi

# Install the package (editable) unless this very checkout is installed with this pyproject.
stamp="$(sha256sum pyproject.toml | cut -c1-16)"
installed_at="$(cd / && python -c 'import ooda.agent, pathlib; print(pathlib.Path(ooda.agent.__file__).resolve().parents[1])' 2>/dev/null || true)"
if [ "$installed_at" != "$(pwd -P)" ] || [ "$(cat .ooda-installed 2>/dev/null)" != "$stamp" ] \
    || ! command -v ooda >/dev/null 2>&1; then
  step "pip install -e .[dev,ray]" python -m pip install -q -e ".[dev,ray]"
  echo "$stamp" >.ooda-installed
fi
# mypy runs no import hooks: it reads the ooda.* names through three links in .typecheck/ooda/.
mkdir -p .typecheck/ooda
for part in agent verifiers tasks; do
  [ -L ".typecheck/ooda/$part" ] || ln -sfn "../../$part" ".typecheck/ooda/$part"
done
step "building the sandbox image (ooda sandbox build)" ooda sandbox build
