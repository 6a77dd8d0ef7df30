#!/usr/bin/env bash
# Keep the packaged pll-demo's weights (26.7 MiB) out of what the device tool sends, and put
# them back. The tool sends tracked and untracked-not-ignored files, at most 64 MiB with
# the carried paths: the tree's 37 MiB and all of .whl (26.8 MiB) are over it together, and
# so are the tree and the demo model's packed training data. No step that needs all of
# .whl (sample) or the training reads the weights.
#
#   bash bench/demo_weights.sh out   # untracked and ignored: they stay here, the file too
#   bash bench/demo_weights.sh in    # tracked again, as committed; the ignore line removed
#
# Only git's index and .git/info/exclude change: nothing is committed or deleted. Commit
# nothing between the two, or the commit removes the weights.
set -euo pipefail
cd "$(dirname "$0")/.."
weights=pll_harness/models/pll-demo/model.safetensors
exclude=$(git rev-parse --git-path info/exclude)
case ${1:-} in
out)
    if git ls-files --error-unmatch "$weights" >/dev/null 2>&1; then
        git rm -q --cached "$weights"
    fi
    grep -qxF "/$weights" "$exclude" 2>/dev/null || echo "/$weights" >>"$exclude"
    ;;
in)
    git reset -q -- "$weights"
    if [[ -f $exclude ]]; then
        grep -vxF "/$weights" "$exclude" >"$exclude.tmp" || true
        mv "$exclude.tmp" "$exclude"
    fi
    git diff --quiet -- "$weights" || echo "warning: $weights differs from the commit" >&2
    ;;
*)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
