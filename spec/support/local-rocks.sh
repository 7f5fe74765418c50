#!/bin/sh
# local-rocks.sh DIR - build a local LuaRocks server in DIR/server with the
# Lua dependencies of qoslab-scm-1.rockspec (argparse, lua-cjson, dkjson,
# luafilesystem), made from Debian's packages: this machine reaches Debian's
# mirror but no rocks server. Nothing third-party is kept in the repository.
#
# Sources come through a private apt configuration under DIR (a deb-src entry
# for the mirror the system already uses; the system's apt setup is not
# touched). argparse, lua-cjson and luafilesystem are built by LuaRocks from
# their Debian source tarballs; dkjson (whose source package the mirror may
# not hold) is one pure-Lua file, taken from its binary package. Each gets a
# small rockspec whose source.url is a file:// tarball, is packed into a
# .src.rock, and the server gets a manifest.
#
# Exit 0: DIR/server is ready (it says so, with the luarocks command to
# pass it to: --only-server=DIR/server). Exit 77: the mirror cannot be reached (the
# reason is printed). Other: a real failure. QOSLAB_DEB_MIRROR and
# QOSLAB_DEB_SUITE name another mirror and suite than the system's first.
set -eu
dir=$1
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/apt/parts" \
    "$dir/dl" "$dir/src" "$dir/rockspecs" "$dir/server"
dir=$(cd "$dir" && pwd -P)

# The mirror and suite from the system's sources (deb822 or one-line form).
uri=""; suite=""
if [ -r /etc/apt/sources.list.d/debian.sources ]; then
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources | head -1)
    suite=$(sed -n 's/^Suites:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources | head -1)
fi
if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
    set -- $(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\)[[:space:]]\+\([^[:space:]]\+\).*/\2 \3/p' /etc/apt/sources.list | head -1)
    uri=${1:-}; suite=${2:-}
fi
# QOSLAB_DEB_MIRROR / QOSLAB_DEB_SUITE: another mirror or suite than the system's.
uri=${QOSLAB_DEB_MIRROR:-$uri}; suite=${QOSLAB_DEB_SUITE:-$suite}
if [ -z "$uri" ] || [ -z "$suite" ]; then
    echo "local-rocks: no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list" >&2
    exit 77
fi
printf 'deb %s %s main\ndeb-src %s %s main\n' "$uri" "$suite" "$uri" "$suite" > "$dir/apt/sources.list"

apt() {
    apt-get -q -o Dir::Etc::SourceList="$dir/apt/sources.list" \
        -o Dir::Etc::SourceParts="$dir/apt/parts" -o Dir::State::Lists="$dir/apt/lists" \
        -o Dir::Cache="$dir/apt/cache" -o APT::Sandbox::User=root "$@"
}

if ! apt update > "$dir/apt/update.log" 2>&1 || grep -q '^\(Err\|E\):' "$dir/apt/update.log"; then
    echo "local-rocks: the Debian mirror $uri cannot be reached: $(grep -m1 -A1 '^\(Err\|E\):' "$dir/apt/update.log" | tr -s ' \n' ' ' || tail -1 "$dir/apt/update.log")" >&2
    exit 77
fi
cd "$dir/dl"
# Only the upstream (orig) tarballs are needed: Debian's own patches of these
# three touch packaging and tests, not the modules. Each is checked against
# the hash the Sources index gives.
if ! apt source --print-uris lua-argparse lua-cjson lua-filesystem > "$dir/apt/source.uris" 2>&1; then
    echo "local-rocks: no source packages in $uri: $(grep -m1 '^E:' "$dir/apt/source.uris")" >&2
    exit 77
fi
grep "^'.*\.orig\.tar\." "$dir/apt/source.uris" | while read -r url file size hash; do
    url=$(echo "$url" | tr -d "'")
    if ! /usr/lib/apt/apt-helper download-file "$url" "$dir/dl/$file" "$hash" > "$dir/apt/fetch.log" 2>&1; then
        echo "local-rocks: cannot fetch $url: $(grep -m1 '^\(Err\|E\):' "$dir/apt/fetch.log")" >&2
        exit 77
    fi
done
[ "$(ls "$dir/dl"/*.orig.tar.* 2>/dev/null | wc -l)" -eq 3 ] || exit 77
if ! apt download lua-dkjson > "$dir/apt/download.log" 2>&1; then
    echo "local-rocks: cannot fetch lua-dkjson from $uri: $(grep -m1 '^\(Err\|E\):' "$dir/apt/download.log")" >&2
    exit 77
fi

# upstream version of a source package's orig tarball (without +dfsg etc.)
upstream() { ls "$dir/dl/$1"_*.orig.tar.* | head -1 | sed "s|.*/$1_\([0-9.]*[0-9]\).*|\1|"; }

# repack NAME VERSION PKG: the orig tarball unpacked, re-tarred as NAME-VERSION.tar.gz
repack() {
    rm -rf "$dir/src/unpack" && mkdir -p "$dir/src/unpack"
    tar xf "$(ls "$dir/dl/$3"_*.orig.tar.* | head -1)" -C "$dir/src/unpack"
    top=$(ls "$dir/src/unpack" | head -1)
    rm -rf "$dir/src/$1-$2" && mv "$dir/src/unpack/$top" "$dir/src/$1-$2"
    (cd "$dir/src" && tar czf "$1-$2.tar.gz" "$1-$2")
}

v=$(upstream lua-argparse); repack argparse "$v" lua-argparse
cat > "$dir/rockspecs/argparse-$v-1.rockspec" <<EOF
package = "argparse"
version = "$v-1"
source = { url = "file://$dir/src/argparse-$v.tar.gz", dir = "argparse-$v" }
description = { summary = "Command line parser (Debian's lua-argparse source)", license = "MIT" }
dependencies = { "lua >= 5.1" }
build = { type = "builtin", modules = { argparse = "src/argparse.lua" } }
EOF

v=$(upstream lua-cjson); repack lua-cjson "$v" lua-cjson
cat > "$dir/rockspecs/lua-cjson-$v-1.rockspec" <<EOF
package = "lua-cjson"
version = "$v-1"
source = { url = "file://$dir/src/lua-cjson-$v.tar.gz", dir = "lua-cjson-$v" }
description = { summary = "JSON for Lua (Debian's lua-cjson source)", license = "MIT" }
dependencies = { "lua >= 5.1" }
build = {
  type = "builtin",
  modules = {
    cjson = { sources = { "lua_cjson.c", "strbuf.c", "fpconv.c" } },
    ["cjson.util"] = "lua/cjson/util.lua",
  },
}
EOF

v=$(upstream lua-filesystem); repack luafilesystem "$v" lua-filesystem
cat > "$dir/rockspecs/luafilesystem-$v-1.rockspec" <<EOF
package = "luafilesystem"
version = "$v-1"
source = { url = "file://$dir/src/luafilesystem-$v.tar.gz", dir = "luafilesystem-$v" }
description = { summary = "File system library (Debian's lua-filesystem source)", license = "MIT" }
dependencies = { "lua >= 5.1" }
build = { type = "builtin", modules = { lfs = "src/lfs.c" } }
EOF

deb=$(ls "$dir/dl"/lua-dkjson_*.deb | head -1)
v=$(basename "$deb" | sed 's/^lua-dkjson_\([0-9.]*\).*/\1/')
rm -rf "$dir/src/deb" "$dir/src/dkjson-$v" && mkdir -p "$dir/src/deb" "$dir/src/dkjson-$v"
dpkg-deb -x "$deb" "$dir/src/deb"
file=$(find "$dir/src/deb/usr/share/lua" -name dkjson.lua -type f | head -1)
cp "$file" "$dir/src/dkjson-$v/dkjson.lua"
(cd "$dir/src" && tar czf "dkjson-$v.tar.gz" "dkjson-$v")
cat > "$dir/rockspecs/dkjson-$v-1.rockspec" <<EOF
package = "dkjson"
version = "$v-1"
source = { url = "file://$dir/src/dkjson-$v.tar.gz", dir = "dkjson-$v" }
description = { summary = "JSON in pure Lua (from Debian's lua-dkjson)", license = "MIT" }
dependencies = { "lua >= 5.1" }
build = { type = "builtin", modules = { dkjson = "dkjson.lua" } }
EOF

cd "$dir/server"
for r in "$dir"/rockspecs/*.rockspec; do
    luarocks --lua-version=5.4 pack "$r" > "$dir/pack.log" 2>&1 || { cat "$dir/pack.log" >&2; exit 1; }
done
luarocks-admin --lua-version=5.4 make-manifest "$dir/server" > "$dir/manifest.log" 2>&1 ||
    { cat "$dir/manifest.log" >&2; exit 1; }
# What was made and how to use it: the server is DIR/server, not DIR.
echo "local-rocks: a rocks server is ready in $dir/server:"
for f in "$dir/server"/*; do echo "  ${f##*/}"; done
echo "install qoslab into a tree TREE from inside the qoslab checkout (luarocks make reads"
echo "the rockspec and sources there):"
echo "  luarocks --lua-version=5.4 make --tree=TREE --only-server=$dir/server qoslab-scm-1.rockspec"
echo "then run TREE/bin/qoslab, or use the tree from your own lua5.4:"
# shellcheck disable=SC2016 # printed for the user to run, not expanded here
echo '  eval "$(luarocks --lua-version=5.4 path --tree=TREE)"'
