#!/usr/bin/env bash
# The real-Label-Studio suite's main path against the newest release of each of the last four
# minor lines on PyPI (issue 62): connect, train, scores sorted by the wrong annotations
# (tests/labelstudio/test_e2e_label_studio.py, NER with the embedded runner), then a confirm, a
# fix and a retrain (tests/labelstudio/test_review_decisions.py). Too slow for the default CI
# (an install and two trainings per release); docs/label-studio.md carries its last table.
#
#   bash scripts/ls-matrix.sh                 # 1.20.0 1.21.0 1.22.0 1.23.2
#   bash scripts/ls-matrix.sh 1.22.0          # one release
#
# Each release gets its own virtualenv under .ls-venvs/ (ignored by git), so .ls-venv, the
# suite's 1.23.2, is left alone. Prints one Markdown row per release, with the commit and date.
set -uo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(1.20.0 1.21.0 1.22.0 1.23.2)
PY="${PYTHON:-python3}"
MAIN_PATH=(
    "tests/labelstudio/test_e2e_label_studio.py::test_label_studio_end_to_end[ner-embedded]"
    "tests/labelstudio/test_review_decisions.py::test_confirm_and_fix_through_the_api_stick_across_a_retrain"
)
commit="$(git rev-parse --short HEAD)"
rows=()
for version in "${versions[@]}"; do
    venv=".ls-venvs/$version"
    if [ ! -x "$venv/bin/label-studio" ]; then
        echo "ls-matrix: installing label-studio==$version into $venv" >&2
        "$PY" -m venv "$venv" && "$venv/bin/pip" install --quiet --disable-pip-version-check \
            -c scripts/label-studio-constraints.txt "label-studio==$version" >&2 || { rows+=("| $version | not installable from PyPI here | $commit | $(date -u +%F) |"); continue; }
    fi
    log="$(mktemp /tmp/ls-matrix-$version.XXXXXX)"
    start=$(date +%s)
    SUBREGWEIGH_LS_VENV="$PWD/$venv" SUBREGWEIGH_LS_VERSION="$version" CI=true \
        .venv/bin/python -m pytest -n 0 -p no:cacheprovider -q "${MAIN_PATH[@]}" >"$log" 2>&1
    rc=$?
    seconds=$(( $(date +%s) - start ))
    summary="$(tail -n 1 "$log")"
    if [ "$rc" = 0 ]; then outcome="passes ($summary)"; else
        outcome="fails: $(grep -m 1 -E '^E  ' "$log" | sed 's/^E *//' | cut -c1-160) ($summary; log $log)"
    fi
    echo "ls-matrix: $version: $outcome in ${seconds} s" >&2
    rows+=("| $version | $outcome | $commit | $(date -u +%F) |")
done
echo "| Label Studio | main path (connect, train, sorted, decide, retrain) | commit | date |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
