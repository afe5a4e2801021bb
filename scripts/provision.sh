#!/usr/bin/env bash
# Provision what frugal-rl needs on a fresh machine, idempotently and quietly when done:
#   - a Python venv in the cache folder (FRUGAL_CACHE, default ~/.cache/frugal-rl) with
#     torch==2.11.0 (the PyPI wheel; the CUDA build, which also runs on CPU) and numpy;
#   - the link `.libtorch` in the repository root, pointing at that wheel's `torch/` folder,
#     which `.cargo/config.toml` hands to torch-sys as LIBTORCH;
#   - with the argument `mujoco`: mujoco==3.17.0 and gymnasium in the same venv, and the link
#     `.mujoco` to the folder holding libmujoco.so (MUJOCO_DYNAMIC_LINK_DIR) and
#     `gymnasium-assets/` (the MuJoCo model XMLs of the gymnasium wheel, read by rl-envs).
# Only PyPI is contacted; nothing is downloaded from anywhere else.
set -euo pipefail

TORCH_VERSION=2.11.0
MUJOCO_VERSION=3.17.0
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${FRUGAL_CACHE:-$HOME/.cache/frugal-rl}
venv=$cache/venv
py=$venv/bin/python
want_mujoco=0
for a in "$@"; do
  case "$a" in
    mujoco) want_mujoco=1 ;;
    *) echo "provision.sh: unknown argument '$a' (expected: mujoco)" >&2; exit 2 ;;
  esac
done

say() { echo "[provision] $*" >&2; }

pip_install() {
  # $@: requirement specifiers
  if ! "$py" -m pip install --disable-pip-version-check -q "$@"; then
    say "ERROR: pip could not install: $*"
    say "       frugal-rl installs these from PyPI into $venv."
    say "       Check that PyPI is reachable from this machine (proxy, network), then run make again."
    exit 1
  fi
}

mkdir -p "$cache"
# One provisioner at a time (parallel `make` invocations, CI next to a session).
exec 9>"$cache/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

torch_ok() {
  [ -x "$py" ] && "$py" - <<PY 2>/dev/null
from importlib.metadata import version
assert version("torch").split("+")[0] == "$TORCH_VERSION"
version("numpy")
PY
}

if ! torch_ok; then
  if [ ! -x "$py" ]; then
    say "creating venv $venv"
    python3 -m venv "$venv" || { say "ERROR: python3 -m venv failed (is python3-venv installed?)"; exit 1; }
  fi
  say "installing torch==$TORCH_VERSION and numpy from PyPI into $venv (about 4.6 GB, once)"
  SECONDS=0
  pip_install "torch==$TORCH_VERSION" numpy
  say "installed in ${SECONDS}s"
  torch_ok || { say "ERROR: torch $TORCH_VERSION still not importable from $py"; exit 1; }
fi

torch_dir=$("$py" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("torch").origin))')
if [ "$(readlink "$root/.libtorch" 2>/dev/null || true)" != "$torch_dir" ]; then
  ln -sfn "$torch_dir" "$root/.libtorch"
  say "linked .libtorch -> $torch_dir"
fi

if [ "$want_mujoco" = 1 ]; then
  mujoco_ok() {
    "$py" - <<PY 2>/dev/null
from importlib.metadata import version
assert version("mujoco") == "$MUJOCO_VERSION"
version("gymnasium")
PY
  }
  if ! mujoco_ok; then
    say "installing mujoco==$MUJOCO_VERSION and gymnasium from PyPI into $venv"
    pip_install "mujoco==$MUJOCO_VERSION" gymnasium
  fi
  mj_dir=$("$py" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("mujoco").origin))')
  # The wheel ships only libmujoco.so.$MUJOCO_VERSION; the linker (`-lmujoco`, as mujoco-rs
  # emits) needs an unversioned libmujoco.so, so a folder of links in the cache provides both.
  lib_dir=$cache/mujoco-lib
  mkdir -p "$lib_dir"
  ln -sfn "$mj_dir/libmujoco.so.$MUJOCO_VERSION" "$lib_dir/libmujoco.so.$MUJOCO_VERSION"
  ln -sfn "$mj_dir/libmujoco.so.$MUJOCO_VERSION" "$lib_dir/libmujoco.so"
  ln -sfn "$mj_dir/include" "$lib_dir/include"
  # rl-envs reads the locomotion models (hopper.xml, ...) from the installed gymnasium wheel
  gym_assets=$("$py" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("gymnasium").origin), "envs", "mujoco", "assets"))')
  ln -sfn "$gym_assets" "$lib_dir/gymnasium-assets"
  if [ "$(readlink "$root/.mujoco" 2>/dev/null || true)" != "$lib_dir" ]; then
    ln -sfn "$lib_dir" "$root/.mujoco"
    say "linked .mujoco -> $lib_dir (libmujoco.so, headers)"
  fi
fi
