#!/usr/bin/env bash
# Set up the project's own virtual environment (.venv) and run one job in it:
#   ./dev.sh dashboard [PORT]   serve notebooks/dashboard.ipynb with Voila on 127.0.0.1
#   ./dev.sh test [PYTEST ARGS] run the whole test suite
# Installs only when pyproject.toml changed since the last install (a stamp in .venv).
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.installed-$(sha1sum pyproject.toml dev.sh | sha1sum | cut -c1-12)

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
  fi
  if [ ! -f "$STAMP" ]; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # Without a GPU, pin the CPU build of torch (an unpinned torch pulls a multi-GB CUDA build);
    # the project itself only asks for a range. TORCH_SPEC overrides this.
    if [ -z "${TORCH_SPEC:-}" ]; then
      if command -v nvidia-smi >/dev/null 2>&1; then TORCH_SPEC="torch>=2.6,<3"; else TORCH_SPEC="torch==2.13.0"; fi
    fi
    "$VENV/bin/python" -m pip install --quiet "$TORCH_SPEC"
    "$VENV/bin/python" -m pip install --quiet -e ".[test]"
    # rfc3987-syntax (pulled in through jupyter-events' jsonschema format extras) builds dozens
    # of parsers at import: 5-20 s per kernel start. Nothing here needs IRI format checks.
    "$VENV/bin/python" -m pip uninstall --quiet --yes rfc3987-syntax >/dev/null 2>&1 || true
    rm -f "$VENV"/.installed-*
    touch "$STAMP"
  fi
}

job=${1:-}
shift || true
case "$job" in
  dashboard)
    setup
    exec "$VENV/bin/python" -m workbench dashboard --port "${1:-0}"
    ;;
  test)
    setup
    # The browser test drives Debian's chromium (never a downloaded browser build).
    if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    fi
    # promtool checks the exported alert rules and the exposition; the scrape test runs
    # /usr/bin/prometheus. Both come with Debian's prometheus package.
    if [ ! -x /usr/bin/promtool ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
      # the package starts its service where the init system allows: the tests run their own
      invoke-rc.d prometheus stop >/dev/null 2>&1 || true
    fi
    exec "$VENV/bin/python" -m pytest "$@"
    ;;
  *)
    echo "usage: ./dev.sh dashboard [PORT] | ./dev.sh test [PYTEST ARGS]" >&2
    exit 2
    ;;
esac
