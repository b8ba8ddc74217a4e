#!/bin/sh
# scripts/check-docs.sh: the repository documents itself (docs/README.md lists the documents).
#  1. Every relative link in README.md and docs/*.md resolves to a file or directory in the
#     repository (links inside fenced code blocks and to http(s)/mailto targets are not checked).
#  2. No file outside tests/ refers to the project's out-of-tree notes (../shared/...,
#     DESIGN.md, STYLE.md, PLATFORM.md): they live in docs/ now. A file of an optional test
#     stage that needs the shared folder may do so if it says "optional test stage" in it.
# Fails listing each offending link or line. Run from the repository root (make check-docs).
set -u
bad=0
root=$(pwd -P)

check_links() { # file
	f=$1
	dir=$(dirname "$f")
	# drop fenced code blocks, then take every "](target)" of a markdown link
	awk '/^[ \t]*```/ { fence = !fence; next } !fence' "$f" |
		grep -o '\]([^)]*)' | sed 's/^](//; s/)$//' | while IFS= read -r t; do
		t=${t%% \"*}            # an optional "title"
		t=${t#<}; t=${t%>}
		case $t in
		'' | '#'* | http://* | https://* | mailto:*) continue ;;
		esac
		p=${t%%#*}
		case $p in
		/*) echo "docs: $f: link to an absolute path: $t"; echo x ;;
		*)
			if [ ! -e "$dir/$p" ]; then
				echo "docs: $f: broken link: $t"; echo x
			else
				real=$(cd "$(dirname "$dir/$p")" && pwd -P)
				case $real/ in
				"$root"/*) ;;
				*) echo "docs: $f: link leaves the repository: $t"; echo x ;;
				esac
			fi ;;
		esac
	done
}

out=$(for f in README.md docs/*.md; do [ -f "$f" ] && check_links "$f"; done)
if [ -n "$out" ]; then
	printf '%s\n' "$out" | grep -v '^x$'
	bad=1
fi

# Files in the repository (tracked and untracked-but-not-ignored), outside tests/: one grep.
list_files() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -z -co --exclude-standard
	else
		find . -type f ! -path './.git/*' ! -path './build/*' -print0 | sed -z 's|^\./||'
	fi
}
pat='\.\./shared([/ `]|$)|/work/shared|shared/(kvm-nested|conformance|hooks|seeds)|(DESIGN|STYLE|PLATFORM)\.md'
# vmm/guest/kernel.config keeps its provenance comment: the guest kernel's cache key is a hash
# of that whole file, and a changed comment would rebuild the kernel (5-40 min) everywhere.
hits=$(list_files | grep -zv -e '^tests/' -e '^scripts/check-docs\.sh$' \
	-e '^vmm/guest/kernel\.config$' |
	xargs -0 grep -HInE "$pat" -- 2>/dev/null)
offenders=$(printf '%s\n' "$hits" | sed -n 's/^\([^:]*\):[0-9]*:.*/\1/p' | sort -u |
	while IFS= read -r f; do
		grep -q 'optional test stage' "$f" && continue
		echo "docs: $f refers to notes outside the repository (use docs/):"
		printf '%s\n' "$hits" | grep -F "$f:" | cut -c$((${#f} + 2))-
	done)
if [ -n "$offenders" ]; then
	printf '%s\n' "$offenders"
	bad=1
fi

# 3. contrib/'s YAML and TOML parse (python3's tomllib and PyYAML; skipped, said so, without them)
if python3 -c 'import tomllib, yaml' 2>/dev/null; then
	python3 - $(find contrib -name '*.yaml' -o -name '*.toml' | sort) <<'PY' || bad=1
import sys, tomllib, yaml
for f in sys.argv[1:]:
    try:
        with open(f, "rb") as fh:
            docs = [tomllib.load(fh)] if f.endswith(".toml") else list(yaml.safe_load_all(fh))
        if not all(isinstance(d, dict) and d for d in docs):
            raise ValueError("not a mapping")
    except Exception as e:
        print(f"docs: {f}: does not parse: {e}")
        sys.exit(1)
PY
else
	echo "docs: contrib/ YAML and TOML not checked (no python3 tomllib/yaml)"
fi

[ $bad = 0 ] && echo "docs: ok"
exit $bad
