#!/usr/bin/env bash
# Checks the relative links of README.md and docs/**/*.md: every `[text](path)` and
# `[text](path#anchor)` must name a file or directory of the repository (relative to the markdown
# file's own directory), and an anchor into a markdown file must match one of its headings, slugged as
# GitHub does. http(s) and mailto links are not checked (that needs the network). Also keeps README.md
# at most 250 lines, so the details stay in docs/. Prints each broken link as `file:line: target` and
# exits 1; silent and 0 when all is well.
set -euo pipefail
cd "$(dirname "$0")/.."

max_readme_lines=250
status=0

# Every link of a markdown file, as `line<TAB>target`. Fenced code blocks and inline code spans are
# skipped: brackets there are code, not links.
links_of() {
  awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)
      while (match(line, /\[[^]]*\]\([^)]*\)/)) {
        link = substr(line, RSTART, RLENGTH)
        line = substr(line, RSTART + RLENGTH)
        sub(/^\[[^]]*\]\(/, "", link)
        sub(/\)$/, "", link)
        sub(/^[ \t]*</, "", link); sub(/>[ \t]*$/, "", link)
        sub(/[ \t]+".*"$/, "", link)          # an optional "title"
        print NR "\t" link
      }
    }' "$1"
}

# The anchors of a markdown file's headings, one a line: lowercase, punctuation other than `-` and
# `_` dropped, spaces to `-`; a repeated slug gets `-1`, `-2`, ... as on GitHub.
anchors_of() {
  awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced { next }
    /^#+[ \t]/ && match($0, /^#+/) && RLENGTH <= 6 {
      heading = $0
      sub(/^#+[ \t]+/, "", heading)
      sub(/[ \t]+#+[ \t]*$/, "", heading)
      slug = tolower(heading)
      gsub(/[][!"#$%&'\''()*+,.\/:;<=>?@\\^`{|}~]/, "", slug)
      gsub(/ /, "-", slug)
      if (slug in seen) { seen[slug]++; print slug "-" seen[slug] } else { seen[slug] = 0; print slug }
    }' "$1"
}

# --anchors FILE prints FILE's anchors, one a line, for links kept outside markdown (the alerts'
# runbook_url).
if [[ ${1:-} == --anchors ]]; then
  anchors_of "$2"
  exit 0
fi

check_file() {
  local file=$1 dir line target path anchor resolved
  dir=$(dirname "$file")
  while IFS=$'\t' read -r line target; do
    case $target in
      http://* | https://* | mailto:* | "") continue ;;
    esac
    path=${target%%#*}
    anchor=
    [[ $target == *"#"* ]] && anchor=${target#*#}
    if [[ -z $path ]]; then
      resolved=$file
    else
      resolved=$dir/$path
    fi
    if [[ ! -e $resolved ]]; then
      echo "$file:$line: $target"
      status=1
      continue
    fi
    if [[ -n $anchor && -f $resolved && $resolved == *.md ]]; then
      if ! anchors_of "$resolved" | grep -qxF -- "$anchor"; then
        echo "$file:$line: $target"
        status=1
      fi
    fi
  done < <(links_of "$file")
}

files=(README.md)
if [[ -d docs ]]; then
  while IFS= read -r -d '' file; do
    files+=("$file")
  done < <(find docs -name '*.md' -type f -print0 | sort -z)
fi
for file in "${files[@]}"; do
  check_file "$file"
done

lines=$(wc -l < README.md)
if ((lines > max_readme_lines)); then
  echo "README.md: $lines lines, at most $max_readme_lines (move details to docs/)"
  status=1
fi
exit "$status"
