#!/usr/bin/env bash
# Python venvs for the frugal_rl wheel (issue 25), idempotent and quiet when done. From PyPI only.
#   scripts/python_venvs.sh build   $FRUGAL_CACHE/py-build: maturin (builds the wheel)
#   scripts/python_venvs.sh trl     $FRUGAL_CACHE/py-trl:   pytest, TRL 1.16.0 (+ transformers, accelerate, datasets)
#   scripts/python_venvs.sh verl    $FRUGAL_CACHE/py-verl:  pytest, verl 0.9.1 (transformers<5.11) and the
#                                   modules its v1 trainer imports without declaring them
# verl and TRL want different transformers versions, hence two test venvs. torch is not downloaded
# again: each test venv gets a `.pth` file naming the site-packages of the provisioned venv
# ($FRUGAL_CACHE/venv, torch 2.11.0, scripts/provision.sh); a venv's own site-packages come
# first on sys.path, and a constraints file pins torch so pip never replaces it.
# Prints the venv's python on stdout.
set -euo pipefail

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.0.2
TRL_VERSION=1.16.0
VERL_VERSION=0.9.1
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${FRUGAL_CACHE:-$HOME/.cache/frugal-rl}
base=$cache/venv
say() { echo "[python_venvs] $*" >&2; }

[ -x "$base/bin/python" ] || "$root/scripts/provision.sh" >&2
base_py=$("$base/bin/python" -c 'import sys; print(sys._base_executable)')
base_site=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
torch_version=$("$base/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))')

make_venv() {
  # $1: folder; creates it with the base interpreter; links the base venv's packages
  local dir=$1
  if [ ! -x "$dir/bin/python" ]; then
    say "creating $dir"
    "$base_py" -m venv "$dir"
  fi
}

link_torch() {
  local dir=$1 site
  site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base_site" > "$site/frugal_rl_base_venv.pth"
  echo "torch==$torch_version" > "$dir/constraints.txt"
}

install() {
  # $1: venv, $2: stamp text, rest: requirements
  local dir=$1 stamp=$2; shift 2
  if [ -f "$dir/.frugal-stamp" ] && [ "$(cat "$dir/.frugal-stamp")" = "$stamp" ]; then return 0; fi
  say "installing into $dir: $*"
  local c=()
  [ -f "$dir/constraints.txt" ] && c=(-c "$dir/constraints.txt")
  # the freeze of the venv that passed make test (scripts/constraints/NAME.txt): every version
  # pip picks is pinned, so a later PyPI release cannot change what a new machine installs
  local pins="$root/scripts/constraints/$(basename "$dir" | sed 's/^py-//').txt"
  [ -f "$pins" ] && c+=(-c "$pins")
  if ! "$dir/bin/python" -m pip install --disable-pip-version-check -q "${c[@]}" "$@" >&2; then
    say "ERROR: pip could not install: $* (PyPI must be reachable)"; exit 1
  fi
  echo "$stamp" > "$dir/.frugal-stamp"
}

case "${1:-}" in
  build)
    d=$cache/py-build; make_venv "$d"
    install "$d" "maturin==$MATURIN_VERSION" "maturin==$MATURIN_VERSION" ;;
  trl)
    d=$cache/py-trl; make_venv "$d"; link_torch "$d"
    install "$d" "trl==$TRL_VERSION pytest==$PYTEST_VERSION torch==$torch_version" \
      "trl==$TRL_VERSION" "pytest==$PYTEST_VERSION" numpy accelerate datasets ;;
  verl)
    d=$cache/py-verl; make_venv "$d"; link_torch "$d"
    install "$d" "verl==$VERL_VERSION pytest==$PYTEST_VERSION torch==$torch_version" \
      "verl==$VERL_VERSION" "transformers<5.11" "pytest==$PYTEST_VERSION" numpy torchdata \
      transferqueue cachetools uvicorn fastapi ;;
  *) echo "usage: $0 build|trl|verl" >&2; exit 2 ;;
esac
echo "$d/bin/python"
