#!/usr/bin/env bash
# make test-python: install the wheel built by `make wheel` (target/wheels) into a fresh venv and
# import it; then into the TRL and verl test venvs (scripts/python_venvs.sh) and run the pytest
# suite python/tests in each; the Rust side of the cross-language test is written first.
# Ends with one line: the counts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache=${FRUGAL_CACHE:-$HOME/.cache/frugal-rl}
CARGO=${CARGO:-cargo}
wheel=$(ls -t target/wheels/frugal_rl-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "test_python.sh: no wheel in target/wheels (run make wheel)" >&2; exit 1; }
out=target/python; mkdir -p "$out"

# 1. a fresh venv: pip install the wheel (numpy comes from PyPI as its dependency), import it
base_py=$("$cache/venv/bin/python" -c 'import sys; print(sys._base_executable)')
rm -rf "$out/fresh-venv"
"$base_py" -m venv "$out/fresh-venv"
"$out/fresh-venv/bin/python" -m pip install --disable-pip-version-check -q "$wheel"
(cd /tmp && "$root/$out/fresh-venv/bin/python" -c "import frugal_rl; print('fresh venv: import frugal_rl', frugal_rl.__version__, 'ok')")

# 2. the Rust side of the cross-language test
$CARGO run --quiet --release -p frugal-rl-py --example select_sequence -- "$out/select_sequence.json" >/dev/null
export FRUGAL_RUST_SEQUENCE=$root/$out/select_sequence.json

# 3. pytest in the TRL and the verl venv (neither starts Ray or a server)
summary=()
fail=0
for v in trl verl; do
  py=$(scripts/python_venvs.sh "$v")
  "$py" -m pip install --disable-pip-version-check -q --force-reinstall --no-deps "$wheel"
  log=$out/pytest-$v.log
  if (cd python/tests && "$py" -m pytest -q -p no:cacheprovider . 2>&1) | tee "$log" | tail -n 3; then :; else fail=1; fi
  line=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|[0-9]+ passed|[0-9]+ failed|error' "$log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
  summary+=("$v venv: ${line:-no summary}")
done
echo "python tests: ${summary[0]}; ${summary[1]}"
exit $fail
