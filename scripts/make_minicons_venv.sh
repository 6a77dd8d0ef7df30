#!/usr/bin/env bash
# Create a separate virtual environment with minicons, the independent PLL implementation we
# compare our scores against (tests/fixtures/minicons_scores.json is produced with it).
#
# Why a separate venv: minicons needs transformers<5 while pll_harness targets transformers 5.
#
# Usage: scripts/make_minicons_venv.sh [DIR]     (default DIR: bench/.minicons-venv in this repository)
#
# torch is pinned to 2.13.0 because that exact wheel lies on local disk (any other version would
# download gigabytes); we install it first, then minicons with a constraint that keeps torch at
# that version and transformers below 5, and finally check that pip did not swap torch.
set -euo pipefail
case ${1:-} in -h | --help)
    sed -n '2,11p' "$0"
    exit 0
    ;;
esac

DIR="${1:-$(cd "$(dirname "$0")/.." && pwd)/bench/.minicons-venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="2.13.0"

if [[ ! -x "$DIR/bin/python" ]]; then
    "$PYTHON" -m venv "$DIR"
fi
PY="$DIR/bin/python"

"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install --quiet "torch==${TORCH_VERSION}"

CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
printf 'torch==%s\ntransformers<5\n' "$TORCH_VERSION" >"$CONSTRAINTS"
"$PY" -m pip install --quiet -c "$CONSTRAINTS" minicons "transformers<5"

# pip must not have replaced torch (e.g. with a CUDA build pulled in by a dependency).
"$PY" - "$TORCH_VERSION" <<'PYEOF'
import sys

import minicons  # noqa: F401
import torch
import transformers

want = sys.argv[1]
got = torch.__version__.split("+")[0]
if got != want:
    sys.exit(f"torch was replaced: want {want}, got {torch.__version__}")
if int(transformers.__version__.split(".")[0]) >= 5:
    sys.exit(f"transformers must be <5 for minicons, got {transformers.__version__}")
print(f"ok: torch {torch.__version__}, transformers {transformers.__version__}")
PYEOF
"$PY" -m pip show minicons | sed -n '1,2p'
