#!/usr/bin/env bash
# Offline `dvc plots show`: DVC's own page loads Vega, Vega-Lite and Vega-Embed from a CDN, so its
# charts are blank without the internet. This fetches the three from the npm registry, pinned by
# version and checked against their integrity hashes, and writes .dvc/plots/index.html: DVC's
# page template with the three libraries inlined (no {scripts} placeholder, so DVC adds no CDN
# tags). It then points DVC at it in .dvc/config.local (plots.html_template): every
# `dvc plots show/diff` page is then one self-contained file.
#
#   scripts/vendor_vega.sh [PROJECT]    default: this script's project; run by `make venv/repro`
#
# Quiet and quick when the page is there for these pins. Without npm it says so and leaves DVC
# on its CDN page (exit 0); a download that does not match its hash stops it (exit 1).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT=$(cd "${1:-$HERE/..}" && pwd)
PAGE_DIR=$PROJECT/.dvc/plots
PAGE=$PAGE_DIR/index.html
TEMPLATE_SETTING=plots/index.html    # relative to .dvc/, as DVC reads plots.html_template

# name@version, file in the package, npm integrity (sha512 of the tarball, as the registry lists it)
PINS=(
    "vega@5.33.1 build/vega.min.js sha512-1fArfVDUqVbb5z8n+/nVQb+VNBzx8svY6CrsyTK4Ujm4yrd9I1auoKxBAPXLCavY1LcrbHUskQbGUP8gXOzyQw=="
    "vega-lite@5.23.0 build/vega-lite.min.js sha512-l4J6+AWE3DIjvovEoHl2LdtCUkfm4zs8Xxx7INwZEAv+XVb6kR6vIN1gt3t2gN2gs/y4DYTs/RPoTeYAuEg6mA=="
    "vega-embed@6.29.0 build/vega-embed.min.js sha512-PmlshTLtLFLgWtF/b23T1OwX53AugJ9RZ3qPE2c01VFAbgt3/GSNI/etzA/GzdrkceXFma+FDHNXUppKuM0U6Q=="
)

say() { echo "heldout: $*" >&2; }

stamp() {  # the pins and this script's checksum: a change to either makes the page again
    local pin spec file integrity line=""
    for pin in "${PINS[@]}"; do
        read -r spec file integrity <<<"$pin"
        line+=" $spec $integrity"
    done
    read -r sum _ < <(cksum <"${BASH_SOURCE[0]}")
    echo "<!-- heldout vendored:$line (scripts/vendor_vega.sh, cksum $sum) -->"
}

use_page() {
    # DVC reads .dvc/config.local after .dvc/config; the setting is this clone's, like the page.
    local config=$PROJECT/.dvc/config.local dvc
    if [ -f "$config" ] && grep -Eq "^\s*html_template\s*=\s*$TEMPLATE_SETTING\s*$" "$config"; then
        return
    fi
    dvc=$(command -v dvc || true)
    [ -n "$dvc" ] || dvc=$HERE/../.venv/bin/dvc
    [ -x "$dvc" ] || { say "dvc not found: run make venv, then $0"; exit 1; }
    (cd "$PROJECT" && "$dvc" config --local plots.html_template "$TEMPLATE_SETTING")
}

# Without the page, DVC would read the setting's path as the page itself and fail; its own
# page (CDN) is the better fallback.
forget_missing_page() {
    local config=$PROJECT/.dvc/config.local dvc
    if [ ! -f "$PAGE" ] && [ -f "$config" ] && grep -q "html_template" "$config"; then
        dvc=$(command -v dvc || echo "$HERE/../.venv/bin/dvc")
        (cd "$PROJECT" && "$dvc" config --local --unset plots.html_template) || true
    fi
}

STAMP=$(stamp)
if [ -f "$PAGE" ] && [ "$(sed -n 2p "$PAGE")" = "$STAMP" ]; then
    use_page
    exit 0
fi

if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    say "npm not found: skipped vendoring Vega, so \`dvc plots show\` pages load it from a CDN" \
        "(blank offline). Install Node.js with npm, then run make venv (or $0)."
    forget_missing_page
    exit 0
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
specs=()
for pin in "${PINS[@]}"; do
    read -r spec _ _ <<<"$pin"
    specs+=("$spec")
done
say "fetching ${specs[*]} from the npm registry, for \`dvc plots show\` offline"
# Registry tarballs run no scripts when packed; a registry that does not answer fails within
# a minute or two (npm's own default waits five minutes a try).
if ! (cd "$WORK" && npm pack --silent --ignore-scripts --fetch-timeout=30000 --fetch-retries=1 \
        "${specs[@]}" >/dev/null 2>"$WORK/npm.log"); then
    tail -n 5 "$WORK/npm.log" >&2
    say "could not fetch them (offline, or no registry?): \`dvc plots show\` keeps loading Vega" \
        "from a CDN; run make venv again when the registry is reachable."
    forget_missing_page
    exit 0
fi

sri() {  # the npm integrity string of a file
    node -e 'const c = require("crypto"), f = require("fs");
             process.stdout.write("sha512-" + c.createHash("sha512")
                 .update(f.readFileSync(process.argv[1])).digest("base64"));' "$1"
}

scripts=$WORK/scripts.html
: >"$scripts"
for pin in "${PINS[@]}"; do
    read -r spec file integrity <<<"$pin"
    name=${spec%@*}
    version=${spec##*@}
    tarball=$WORK/$name-$version.tgz
    actual=$(sri "$tarball")
    if [ "$actual" != "$integrity" ]; then
        say "$spec: the tarball's hash is $actual, the pinned one $integrity: not using it"
        exit 1
    fi
    tar -xzf "$tarball" -C "$WORK" "package/$file"
    code=$WORK/package/$file
    # Inlined as is: it must not end the <script> element early, nor hold a placeholder that
    # DVC fills in the page ({plot_divs}, {scripts}, {refresh_tag}).
    if grep -Eqi '</script|<!--' "$code" || grep -Eq '\{(plot_divs|scripts|refresh_tag)\}' "$code"; then
        say "$spec: $file cannot be inlined as is (it holds </script, <!-- or a DVC placeholder)"
        exit 1
    fi
    {
        echo "<script>/* $spec ($file), BSD-3-Clause, from the npm registry, $integrity */"
        cat "$code"
        echo
        echo "</script>"
    } >>"$scripts"
    rm -rf "$WORK/package"
done

{
    echo "<!DOCTYPE html>"
    echo "$STAMP"
    cat <<'HEAD'
<html>
<head>
<meta charset="utf-8">
{refresh_tag}
<title>heldout: DVC plots</title>
HEAD
    cat "$scripts"
    cat <<'TAIL'
<script>
  // Charts as SVG (their text is in the page, for search, copy and tests) and no action that
  // needs the internet (the Vega Editor): DVC's own markup calls vegaEmbed(id, spec).
  (function () {
    var embed = window.vegaEmbed;
    window.vegaEmbed = Object.assign(function (el, spec, options) {
      return embed(el, spec, Object.assign(
        {renderer: "svg", actions: {export: true, source: true, compiled: true, editor: false}},
        options || {}));
    }, embed);
  })();
</script>
<style>
  body { font-family: sans-serif; margin: 1.5em; }
  table { border-spacing: 15px; }
  /* DVC's image plots (e.g. plots/sensitivity.png) fit the window instead of being cut off */
  div > div { max-width: calc(100% - 12px); box-sizing: border-box; }
  div > div > img { max-width: 100%; height: auto; }
</style>
</head>
<body>
{plot_divs}
</body>
</html>
TAIL
} >"$WORK/index.html"

mkdir -p "$PAGE_DIR"
mv "$WORK/index.html" "$PAGE"
use_page
say "wrote ${PAGE#"$PROJECT"/} ($(($(wc -c <"$PAGE") / 1024)) KiB): \`dvc plots show\` pages work offline"
