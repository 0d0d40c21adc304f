#!/usr/bin/env bash
# The wheels a bare GPU image (torch + transformers, no network) lacks for benchmarks/gpu_check.sh, for Python 3.12
# (manylinux x86_64), in one ignored folder that the device tool carries beside the tree.
#
# The image has Python 3.12, torch 2.11 (CUDA 13), transformers 5.17, peft, accelerate,
# tensorboard (and their dependencies: numpy, pyyaml, tqdm, safetensors, psutil...), no network.
# The check also needs gymnasium, the ALFWorld engine (textworld, alfworld, tatsu, jericho,
# fast-downward-textworld: built here with Python 3.12), matplotlib (the run report's plot) and
# this package. Everything travels in 64 MiB with the tree: the bundle must stay <= 48 MiB.
#
#   bash scripts/build_device_bundle.sh                 # -> .device-bundle/ (prints the total size)
#   # on the device, from the tree's root:
#   pip install --no-index --no-deps .device-bundle/*.whl && bash benchmarks/gpu_check.sh
#
# Env: PY312 (a Python 3.12, default: python3.12 on PATH, else pyenv's 3.12.x), BUNDLE_DIR
# (default .device-bundle), MAX_MIB (default 48).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${BUNDLE_DIR:-.device-bundle}"
MAX_MIB="${MAX_MIB:-48}"
source scripts/venv_common.sh  # find_python
PY="$(find_python 3.12 "${PY312:-}")" || { echo "build_device_bundle: no Python 3.12 found (PY312=...)" >&2; exit 3; }
# what the image lacks, pinned to the versions the check was run with
PACKAGES=(
  gymnasium==1.4.0 cloudpickle==2.1.0 farama-notifications==0.0.6
  textworld==1.7.0 alfworld==0.4.2 tatsu==5.8.3 jericho==3.3.1 fast-downward-textworld==20.6.4
  mementos==1.3.1 hashids==1.3.1 termcolor==3.3.0 more-itertools==11.2.1 prompt-toolkit==3.0.52 wcwidth==0.7.0
  matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1 pillow==12.3.0
  pyparsing==3.3.2 python-dateutil==2.9.0.post0 six==1.17.0
)
rm -rf "$OUT"
mkdir -p "$OUT"
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; return "${PIPESTATUS[0]}"; }
# binary wheels for cp312 manylinux where PyPI has them; the rest built here by Python 3.12
quiet "$PY" -m pip wheel -q --no-deps --prefer-binary -w "$OUT" "${PACKAGES[@]}"
quiet "$PY" -m pip wheel -q --no-deps -w "$OUT" .
total=$(du -cb "$OUT"/*.whl | tail -1 | cut -f1)
printf '%s\n' "$OUT"/*.whl | while read -r w; do printf '%8.2f MiB  %s\n' "$(echo "$(stat -c %s "$w") / 1048576" | bc -l)" "$(basename "$w")"; done
mib=$(echo "$total / 1048576" | bc -l)
printf 'device bundle: %d wheels, %.1f MiB in %s (limit %s MiB)\n' "$(ls "$OUT"/*.whl | wc -l)" "$mib" "$OUT" "$MAX_MIB"
if [ "$(echo "$mib > $MAX_MIB" | bc)" = "1" ]; then
  echo "build_device_bundle: over $MAX_MIB MiB: the tree would not fit beside it" >&2
  exit 1
fi
