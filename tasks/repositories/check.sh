#!/usr/bin/env bash
# Check every task repository in this folder, in temporary copies:
#   1. base/ alone: all tests pass
#   2. base/ + hidden/: at least 2 tests FAIL, no collection errors, and only
#      tests from the hidden files fail
#   3. fixed/ + hidden/: all tests pass
#   4. fixed/ alone: all tests pass (and fixed/tests equals base/tests)
# plus: every node id in public.txt exists in base/ and passes there.
# Usage: check.sh [python]   (default: python3)
set -u
PY="${1:-python3}"
HERE="$(cd "$(dirname "$0")" && pwd)"
export PYTHONDONTWRITEBYTECODE=1
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
status=0

# run_pytest DIR [ARGS...]: run pytest in DIR, output in DIR.log, exit code in RC
run_pytest() {
    local dir="$1"
    shift
    (cd "$dir" && "$PY" -m pytest -p no:cacheprovider -q -rfE "$@") >"$dir.log" 2>&1
    RC=$?
}

count() {  # count WORD LOG: number in the final summary line, e.g. "3 passed"
    tail -n 1 "$2" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0
}

for repo in "$HERE"/*/; do
    repo="${repo%/}"
    slug="$(basename "$repo")"
    [ -d "$repo/base" ] || continue
    problems=()
    w="$WORK/$slug"
    mkdir -p "$w"
    cp -r "$repo/base" "$w/base"
    cp -r "$repo/base" "$w/base_hidden"
    cp -r "$repo/hidden/." "$w/base_hidden/"
    cp -r "$repo/fixed" "$w/fixed_hidden"
    cp -r "$repo/hidden/." "$w/fixed_hidden/"
    cp -r "$repo/fixed" "$w/fixed"

    diff -r "$repo/base/tests" "$repo/fixed/tests" >/dev/null || problems+=("fixed/tests differs from base/tests")
    [ -f "$repo/issue.md" ] || problems+=("no issue.md")

    run_pytest "$w/base"
    b_pass=$(count passed "$w/base.log")
    [ "$RC" -eq 0 ] && [ "$b_pass" -ge 4 ] || problems+=("base: rc=$RC passed=$b_pass")

    run_pytest "$w/base_hidden"
    bh_pass=$(count passed "$w/base_hidden.log")
    bh_fail=$(grep -c '^FAILED ' "$w/base_hidden.log")
    bh_err=$(grep -c '^ERROR ' "$w/base_hidden.log")
    [ "$RC" -eq 1 ] && [ "$bh_fail" -ge 2 ] && [ "$bh_err" -eq 0 ] \
        || problems+=("base+hidden: rc=$RC failed=$bh_fail errors=$bh_err")
    while read -r node; do
        file="${node%%::*}"
        [ -f "$repo/hidden/$file" ] || problems+=("base+hidden: non-hidden test failed: $node")
    done < <(grep '^FAILED ' "$w/base_hidden.log" | sed -E 's/^FAILED ([^ ]+).*/\1/')

    run_pytest "$w/fixed_hidden"
    fh_pass=$(count passed "$w/fixed_hidden.log")
    [ "$RC" -eq 0 ] && [ "$fh_pass" -eq $((bh_pass + bh_fail)) ] \
        || problems+=("fixed+hidden: rc=$RC passed=$fh_pass")

    run_pytest "$w/fixed"
    f_pass=$(count passed "$w/fixed.log")
    [ "$RC" -eq 0 ] && [ "$f_pass" -eq "$b_pass" ] || problems+=("fixed: rc=$RC passed=$f_pass")

    public="-"
    if [ -f "$repo/public.txt" ]; then
        mapfile -t nodes < "$repo/public.txt"
        rm -rf "$w/base"
        cp -r "$repo/base" "$w/base"
        run_pytest "$w/base" "${nodes[@]}"
        p_pass=$(count passed "$w/base.log")
        [ "$RC" -eq 0 ] && [ "$p_pass" -eq "${#nodes[@]}" ] \
            || problems+=("public.txt: rc=$RC passed=$p_pass of ${#nodes[@]}")
        public="$p_pass/${#nodes[@]}"
    fi

    if [ "${#problems[@]}" -eq 0 ]; then
        verdict="OK"
    else
        verdict="FAIL: $(IFS=';'; echo "${problems[*]}")"
        status=1
    fi
    printf '%-16s base %2s passed | base+hidden %2s passed %2s failed %s errors | fixed+hidden %2s passed | fixed %2s passed | public %s | %s\n' \
        "$slug" "$b_pass" "$bh_pass" "$bh_fail" "$bh_err" "$fh_pass" "$f_pass" "$public" "$verdict"
done
exit "$status"
