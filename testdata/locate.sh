#!/usr/bin/env bash
# Print the absolute directory holding the vendored C sources of a
# third-party library used as a real-code test workload.
#
#   testdata/locate.sh lua|sqlite|zlib|bzip2|zstd|xz|mimalloc|pcre2
#
# The sources are not in this repository: they come from crates.io
# packages listed in testdata/vendor/Cargo.toml (versions pinned by
# testdata/vendor/Cargo.lock). `cargo metadata` downloads them into the
# cargo registry (first run needs access to crates.io) and reports each
# package's manifest_path, from which the C source directory is derived.
#
# Exits non-zero with a one-line message on stderr on any failure.
set -u

die() { echo "locate.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: locate.sh lua|sqlite|zlib|bzip2|zstd|xz|mimalloc|pcre2"

case "$1" in
  lua)    pkg=lua-src;        sub='lua-5.4.*';   probe=lapi.c ;;
  sqlite) pkg=libsqlite3-sys; sub='sqlite3';     probe=sqlite3.c ;;
  zlib)   pkg=libz-sys;       sub='src/zlib';    probe=deflate.c ;;
  bzip2)  pkg=bzip2-sys;      sub='bzip2-*';     probe=bzlib.c ;;
  zstd)   pkg=zstd-sys;       sub='zstd/lib';    probe=zstd.h ;;
  xz)     pkg=lzma-sys;       sub='xz-5.*';      probe=src/liblzma/api/lzma.h ;;
  mimalloc) pkg=libmimalloc-sys; sub='c_src/mimalloc/v3'; probe=src/static.c ;;
  pcre2)  pkg=pcre2-sys;      sub='upstream';    probe=src/pcre2_match.c ;;
  *) die "unknown library '$1' (expected lua|sqlite|zlib|bzip2|zstd|xz|mimalloc|pcre2)" ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || die "cannot find script directory"
manifest="$here/vendor/Cargo.toml"
[ -f "$manifest" ] || die "missing $manifest"
command -v cargo >/dev/null 2>&1 || die "cargo not found in PATH"
command -v python3 >/dev/null 2>&1 || die "python3 not found in PATH"

errf=$(mktemp "${TMPDIR:-/tmp}/locate.XXXXXX") || die "mktemp failed"
meta=$(cargo metadata --locked --manifest-path "$manifest" --format-version 1 2>"$errf") || {
  msg=$(grep -m1 -i 'error' "$errf" || head -n1 "$errf")
  rm -f "$errf"
  die "cargo metadata failed: ${msg:-unknown error}"
}
rm -f "$errf"

pkgdir=$(printf '%s' "$meta" | python3 -c '
import json, os, sys
name = sys.argv[1]
try:
    d = json.load(sys.stdin)
except Exception as e:
    sys.exit("bad cargo metadata JSON: %s" % e)
paths = [p["manifest_path"] for p in d.get("packages", []) if p.get("name") == name]
if not paths:
    sys.exit("package %s not in cargo metadata" % name)
print(os.path.dirname(paths[0]))
' "$pkg" 2>&1) || die "${pkgdir:-cannot parse cargo metadata}"

# Expand the sub-directory glob (pick the last match in sorted order,
# e.g. the newest lua-5.4.x) and check the expected file is there.
dir=
for d in "$pkgdir"/$sub; do
  [ -f "$d/$probe" ] && dir=$d
done
[ -n "$dir" ] || die "no $sub/$probe under $pkgdir"
(cd "$dir" && pwd -P) || die "cannot resolve $dir"
