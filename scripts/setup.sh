#!/usr/bin/env bash
# Prepare a Debian/Ubuntu machine for ooda; idempotent, quiet when all is well, and on failure
# says which step failed and shows its log. As root, or as a user with sudo:
#   - system packages: Docker engine, bubblewrap, debootstrap (and python3-venv when missing);
#   - a virtual environment of ooda's own, .venv in this checkout (python3 -m venv), with ooda
#     installed in it (editable) and only the extras asked for;
#   - the sandbox image, built offline (`ooda sandbox build`).
# Then `source .venv/bin/activate` puts `ooda` on PATH (or call .venv/bin/ooda).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"  # dockerd, debootstrap (a user's PATH lacks them)

usage() {
  cat <<'EOF'
usage: bash scripts/setup.sh [--dev] [--ray] [--python PYTHON] [--no-image]
  --dev            also the test and lint tools (the dev extra; tmux and chromium for the tests)
  --ray            also Ray, for `ooda eval --executor ray` (the ray extra, ~300 MB)
  --python PYTHON  the Python (>= 3.11) to make .venv with (default: python3, else python3.1x)
  --no-image       leave the sandbox image to the first run (`ooda sandbox build`)
EOF
}

extras=()
python=""
build_image=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras+=(dev) ;;
    --ray) extras+=(ray) ;;
    --python) [ $# -ge 2 ] || { usage >&2; exit 2; }; python="$2"; shift ;;
    --python=*) python="${1#--python=}" ;;
    --no-image) build_image=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "setup.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

LOG="$(mktemp -t ooda-setup.XXXXXX)"
trap 'rm -f "$LOG"' EXIT

step() {  # step "what" command...: run quietly, show its log and stop on failure
  local what="$1"
  shift
  if ! "$@" >"$LOG" 2>&1; then
    echo "setup.sh: $what failed; its output:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

# Root runs the system steps itself; anyone else through sudo (asked once, when needed).
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup.sh: run as root, or as a user with sudo (it installs system packages)" >&2
    exit 1
  fi
  as_root=(sudo)
fi

apt_install() {  # apt_install PACKAGE...: one apt-get update per run, then install
  if [ -z "${apt_updated:-}" ]; then
    step "apt-get update" "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    apt_updated=1
  fi
  step "apt-get install $*" "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "$@"
}

# ----------------------------------------------------------------- system packages
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v git >/dev/null 2>&1 || missing+=(git)
if [[ " ${extras[*]} " == *" dev "* ]]; then
  command -v tmux >/dev/null 2>&1 || missing+=(tmux)  # the CLI's real-terminal test
fi
if [ "${#missing[@]}" -gt 0 ]; then
  apt_install "${missing[@]}"
fi
if [[ " ${extras[*]} " == *" dev "* ]] && ! command -v chromium >/dev/null 2>&1; then
  # report.html rendered headless; its test skips without it (Ubuntu ships it as a snap)
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends chromium >>"$LOG" 2>&1 \
    || echo "setup.sh: chromium could not be installed; the report's rendering test will skip" >&2
fi

# ----------------------------------------------------------------- the Docker engine
docker_answers() { "${as_root[@]}" docker info >/dev/null 2>&1; }
if ! docker_answers; then
  if command -v systemctl >/dev/null 2>&1 && "${as_root[@]}" systemctl start docker >>"$LOG" 2>&1
  then
    :
  else
    "${as_root[@]}" sh -c 'nohup dockerd >/var/log/ooda-dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do
    docker_answers && break
    sleep 1
  done
  if ! docker_answers; then
    echo "setup.sh: the Docker engine did not answer within 60 s (log: /var/log/ooda-dockerd.log);" \
      "ooda can still use --sandbox bwrap" >&2
    "${as_root[@]}" tail -n 20 /var/log/ooda-dockerd.log >&2 2>/dev/null || true
  fi
fi
joined_docker_group=""
if [ "$(id -u)" -ne 0 ] && docker_answers && ! docker info >/dev/null 2>&1 \
    && ! id -nG "$(id -un)" | tr ' ' '\n' | grep -qx docker; then
  step "adding $(id -un) to the docker group" sudo usermod -aG docker "$(id -un)"
  joined_docker_group=1
fi

# ----------------------------------------------------------------- ooda's virtual environment
python_ok() {  # python_ok PYTHON: runs, and is 3.11 or newer
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1
}
VENV="$(pwd -P)/.venv"
if [ -e "$VENV" ] && ! python_ok "$VENV/bin/python"; then
  echo "setup.sh: $VENV does not hold a working Python >= 3.11: making it again" >&2
  rm -rf "$VENV"
fi
if [ ! -e "$VENV" ]; then
  if [ -z "$python" ]; then
    for candidate in python3 python3.13 python3.12 python3.11; do
      if command -v "$candidate" >/dev/null 2>&1 && python_ok "$candidate"; then
        python="$candidate"
        break
      fi
    done
  fi
  if [ -z "$python" ] && command -v apt-get >/dev/null 2>&1; then
    apt_install python3.11 python3.11-venv  # e.g. Ubuntu 22.04, whose python3 is 3.10
    python=python3.11
  fi
  if [ -z "$python" ] || ! python_ok "$python"; then
    found="$(python3 -V 2>&1 || true)"
    [ -n "$python" ] && found="$python is $("$python" -V 2>&1 || echo 'not a Python')"
    echo "setup.sh: ooda needs Python 3.11 or newer (${found:-no python3 on PATH}):" \
      "install one, or pass --python PATH" >&2
    exit 1
  fi
  if ! "$python" -m venv "$VENV" >>"$LOG" 2>&1; then
    # Debian and Ubuntu ship venv's pip bootstrap apart, in python3-venv / python3.X-venv
    rm -rf "$VENV"
    version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    apt_install "python$version-venv"
    step "$python -m venv .venv" "$python" -m venv "$VENV"
  fi
fi

# Install ooda (editable) unless this checkout is already installed there, with this
# pyproject.toml, constraints and the extras asked for; the stamp lives in the environment itself.
stamp="$VENV/.ooda-installed"
digest="$(cat pyproject.toml scripts/constraints.txt | sha256sum | cut -c1-16)"
had=""
if [ "$(head -n 1 "$stamp" 2>/dev/null)" = "$digest" ]; then
  had="$(sed -n 2p "$stamp")"
fi
wanted="$(printf '%s\n' ${had//,/ } "${extras[@]}" | sort -u | grep -v '^$' | paste -sd, - || true)"
installed_at="$(cd / && "$VENV/bin/python" -c 'import ooda.agent, pathlib
print(pathlib.Path(ooda.agent.__file__).resolve().parents[1])' 2>/dev/null || true)"
if [ "$installed_at" != "$(pwd -P)" ] || [ ! -x "$VENV/bin/ooda" ] \
    || [ "$(head -n 1 "$stamp" 2>/dev/null)" != "$digest" ] || [ "$wanted" != "$had" ]; then
  target="."
  [ -n "$wanted" ] && target=".[$wanted]"
  step "pip install -e $target (into .venv)" env PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$VENV/bin/python" -m pip install -q -c scripts/constraints.txt -e "$target"
  printf '%s\n%s\n' "$digest" "$wanted" >"$stamp"
fi
# mypy runs no import hooks: it reads the ooda.* names through three links in .typecheck/ooda/.
mkdir -p .typecheck/ooda
for part in agent verifiers tasks; do
  [ -L ".typecheck/ooda/$part" ] || ln -sfn "../../$part" ".typecheck/ooda/$part"
done

# ----------------------------------------------------------------- the sandbox image
if [ "$build_image" = 1 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    step "building the sandbox image (ooda sandbox build)" "$VENV/bin/ooda" sandbox build
  else
    # debootstrap needs root; the image lands where this user's ooda looks ($OODA_HOME),
    # which stays this user's (the root filesystems in it stay root's)
    home="${OODA_HOME:-$HOME/.cache/ooda}"
    mkdir -p "$home"
    step "building the sandbox image (sudo ooda sandbox build)" \
      sudo env "OODA_HOME=$home" OODA_DAEMON=0 "$VENV/bin/ooda" sandbox build
    sudo find "$home" -mindepth 1 -maxdepth 1 ! -name 'rootfs-*' ! -name 'base-*' \
      -exec chown -R "$(id -u):$(id -g)" {} + 2>>"$LOG" || true
  fi
fi

if [ -n "$joined_docker_group" ]; then
  echo "setup.sh: added $(id -un) to the docker group; log in again (or run \`newgrp docker\`)" \
    "for ooda to use Docker; until then it uses bubblewrap"
fi
if [ "${VIRTUAL_ENV:-}" != "$VENV" ]; then
  echo "ooda is installed in .venv: \`source .venv/bin/activate\` puts it on PATH (then \`ooda doctor\`)"
fi
