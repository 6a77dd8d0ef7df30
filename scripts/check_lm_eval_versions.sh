#!/usr/bin/env bash
# Run the lm-eval integration tests (plugin entry points / start-up hook, CLI, results file)
# against other lm-eval versions than the one CI installs, each in a throwaway venv.
#
# Usage: scripts/check_lm_eval_versions.sh WORKDIR LM_EVAL [LM_EVAL ...]
#   WORKDIR  a scratch folder outside the repository (venvs and a copy of HEAD go there)
#   LM_EVAL  what pip installs as lm-eval: a version (0.4.13) or a source folder, e.g. a
#            checkout of an lm-evaluation-harness pull request
#
# Our package is installed as CI installs it (pip install ".[test]", torch 2.13.0 first);
# then the requested lm-eval replaces the one it pulled in (--no-deps, so that a source
# tree whose version string lies outside our range, like 0.4.13.dev0, can still be tried).
set -euo pipefail

usage() { sed -n '2,12p' "$0"; }
case ${1:-} in -h | --help)
    usage
    exit 0
    ;;
esac
if [[ $# -lt 2 ]]; then
    usage >&2
    exit 2
fi
WORKDIR="$(realpath "$1")"
shift
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
mkdir -p "$WORKDIR"
rm -rf "$WORKDIR/src"
mkdir "$WORKDIR/src"
git -C "$REPO" archive HEAD | tar -x -C "$WORKDIR/src"

status=0
for spec in "$@"; do
    name="venv-$(basename "$spec")"
    venv="$WORKDIR/$name"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q torch==2.13.0
    "$venv/bin/python" -m pip install -q "$WORKDIR/src[test]"
    if [[ -d "$spec" ]]; then
        "$venv/bin/python" -m pip install -q --no-deps "$spec"
    else
        "$venv/bin/python" -m pip install -q --no-deps "lm-eval==$spec"
    fi
    version="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("lm_eval"))')"
    echo "=== lm-eval $version ($spec)"
    (
        cd "$WORKDIR/src"
        HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
            "$venv/bin/python" -m pytest -q -p no:cacheprovider \
            tests/test_hook.py tests/test_lm_eval_cli.py tests/test_provenance.py
    ) || status=1
done
exit "$status"
