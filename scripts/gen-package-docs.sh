#!/usr/bin/env bash
# Generates what the Debian package ships from docs/, at package build time, so that it cannot
# drift from the documentation:
#   OUT/man/peregrine.8         docs/peregrine.8.md, with the command-line and signal sections
#                               of docs/configuration.md inserted where it says so
#   OUT/man/peregrine.toml.5    docs/configuration.md
#   OUT/man/peregrine-bench.1   docs/bench.md
#   OUT/examples/*.toml         the WordPress and Tomcat examples of docs/configuration.md
# Needs pandoc (scripts/install-deps.sh package), except with --examples-only (what
# tests/integration/test_package.py checks with peregrine -t).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
examples_only=0
[ "${1:-}" = "--examples-only" ] && { examples_only=1; shift; }
out=${1:?usage: $0 [--examples-only] OUTDIR}
mkdir -p "$out/man" "$out/examples"

version=$(sed -n 's/^project(peregrine VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
# dpkg-buildpackage sets SOURCE_DATE_EPOCH from debian/changelog: the pages build reproducibly.
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d)

# The lines of the section whose heading line is exactly $2 in file $1, heading included, up to
# the next heading of the same or a higher level; '#' lines inside code fences are not headings.
section() {
  awk -v want="$2" '
    /^```/ { fence = !fence }
    !fence && /^#+ / {
      level = index($0, " ") - 1
      if (on && level <= depth) exit
      if ($0 == want) { on = 1; depth = level }
    }
    on { print }' "$1"
}

# $1 file name (NAME.SECTION), $2 one-line summary for NAME, stdin: the page's markdown, whose
# "##" headings become the page's sections.
man_page() {
  local name=${1%.*} sec=${1##*.}
  { printf '## NAME\n\n%s - %s\n\n' "$name" "$2"; cat; } |
    pandoc -f gfm -t man -s --shift-heading-level-by=-1 --lua-filter "$src/scripts/man-filter.lua" \
      -M title="${name^^}" -M section="$sec" -M date="$date" \
      -M footer="peregrine $version" -M header="Peregrine manual" -o "$out/man/$1"
}

# The examples: the first toml block under each heading.
example() {
  local block
  block=$(section "$src/docs/configuration.md" "### $2" |
          awk '/^```toml$/ && !seen { on = 1; seen = 1; next } on && /^```$/ { exit } on { print }')
  [ -n "$block" ] || { echo "docs/configuration.md: no toml example under '### $2'" >&2; exit 1; }
  { printf '# %s: the example of docs/configuration.md (peregrine.toml(5), "Examples").\n' "$2"
    printf '# Check it with: peregrine -t -c THIS_FILE\n\n'
    printf '%s\n' "$block"; } >"$out/examples/$1"
}
example wordpress.toml "WordPress behind php-fpm"
example tomcat-proxy.toml "A Java application (Tomcat) behind the proxy"
[ "$examples_only" -eq 0 ] || exit 0

# docs/peregrine.8.md from its first "## " section (its title and note stay out of the page);
# each line <!-- include: FILE "HEADING" --> is replaced by that section of docs/FILE.
re='^<!-- include: ([^ ]+) "(.+)" -->$'
sed '1,/^## /{/^## /!d}' "$src/docs/peregrine.8.md" | while IFS= read -r line; do
  if [[ "$line" =~ $re ]]; then
    section "$src/docs/${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" | grep . >/dev/null ||
      { echo "docs/peregrine.8.md: no section '${BASH_REMATCH[2]}' in ${BASH_REMATCH[1]}" >&2; exit 1; }
    section "$src/docs/${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  else
    printf '%s\n' "$line"
  fi
done | man_page peregrine.8 "web server for PHP sites, Java back ends and static files"

{ printf '## DESCRIPTION\n\n'; sed 1d "$src/docs/configuration.md"; } |
  man_page peregrine.toml.5 "configuration file of the Peregrine web server"
{ printf '## DESCRIPTION\n\n'; sed 1d "$src/docs/bench.md"; } |
  man_page peregrine-bench.1 "ab-compatible HTTP load generator"
