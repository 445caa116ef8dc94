#!/usr/bin/env bash
# The package as a plugin author gets it: npm pack, install the tarball in an
# empty directory (and the repository from a git URL in another) (the exact versions of package-lock.json, --prefer-offline:
# from the npm cache `npm ci` filled where it can, so the check is
# deterministic), compile README.md's quick start against it with tsc and
# run it against the real daemon (bin/sessiond, or $SESSIOND_BIN) with the
# fake model. Run by `make test-ts`.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
sessiond=${SESSIOND_BIN:-$root/bin/sessiond}
fakemodel=${SESSIOND_FAKEMODEL_BIN:-$(dirname "$sessiond")/sessiond-fakemodel}
for b in "$sessiond" "$fakemodel"; do
  [ -x "$b" ] || { echo "check-pack: $b is missing: run make build (or set SESSIOND_BIN)" >&2; exit 1; }
done
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cd "$here"
tarball=$(npm pack --silent --pack-destination "$work" | tail -1)
tar -tzf "$work/$tarball" > "$work/contents"
grep -qx 'package/dist/index.js' "$work/contents" || { echo "check-pack: $tarball has no dist/index.js (the prepare script builds it)" >&2; exit 1; }
tsver=$(node -p 'require("./package-lock.json").packages["node_modules/typescript"].version')
nodever=$(node -p 'require("./package-lock.json").packages["node_modules/@types/node"].version')

# install_app DIR SPEC: an empty project in DIR with the package installed
# from SPEC and the README quick start compiled against it.
install_app() {
  local app=$1 spec=$2
  mkdir "$app"
  (
    cd "$app"
    printf '{"name":"quickstart","private":true,"type":"module"}\n' > package.json
    npm install --prefer-offline --no-audit --no-fund --silent "$spec" "typescript@$tsver" "@types/node@$nodever"
    # The quick start is README.md's block between the quickstart markers.
    awk '/<!-- quickstart:begin -->/{on=1;next} /<!-- quickstart:end -->/{on=0} on' "$here/README.md" | sed '/^```/d' > quickstart.ts
    [ -s quickstart.ts ] || { echo "check-pack: no quick start in README.md" >&2; exit 1; }
    cat > tsconfig.json <<'JSON'
{"compilerOptions": {"target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true, "types": ["node"]}, "files": ["quickstart.ts"]}
JSON
    npx --no-install tsc -p .
  )
}

# run_app DIR: the compiled quick start against the daemon; it must print
# the turn's reply.
run_app() {
  local out
  out=$(cd "$work" && mkdir -p ws && cd ws && timeout 60 node "$1/quickstart.js")
  echo "$out"
  grep -q 'completed: You said: hello' <<<"$out" || { echo "check-pack: the quick start installed in $1 did not print the turn's reply" >&2; exit 1; }
}

install_app "$work/app" "$work/$tarball"
# From a git URL: npm clones the repository, runs the root package.json's
# prepare (which builds clients/typescript) and packs the root's "files".
# It installs the commit at HEAD (CI's clone is clean; locally, uncommitted
# changes are not in it).
if git -C "$root" rev-parse --verify -q HEAD >/dev/null; then
  install_app "$work/app-git" "git+file://$root#$(git -C "$root" rev-parse HEAD)"
  [ -f "$work/app-git/node_modules/@sessiond/client/clients/typescript/dist/index.d.ts" ] ||
    { echo "check-pack: the git URL install has no dist/index.d.ts (the root package.json's prepare builds it)" >&2; exit 1; }
  via_git=1
fi

# A daemon with the fake model, on a fresh home.
"$fakemodel" --listen 127.0.0.1:0 --quiet > "$work/model.out" 2>&1 &
pids+=($!)
for _ in $(seq 500); do url=$(grep -o 'http://[^ ]*' "$work/model.out" | head -1 || true); [ -n "$url" ] && break; sleep 0.02; done
[ -n "${url:-}" ] || { echo "check-pack: the fake model did not start" >&2; exit 1; }
export SESSIOND_HOME="$work/home"
mkdir -m 700 "$SESSIOND_HOME"
printf 'model: {provider: openai, default: fake-model, base_url: "%s"}\n' "$url" > "$SESSIOND_HOME/config.yaml"
"$sessiond" --home "$SESSIOND_HOME" 2> "$work/daemon.err" &
pids+=($!)
for _ in $(seq 1500); do [ -s "$SESSIOND_HOME/daemon.json" ] && break; sleep 0.02; done
[ -s "$SESSIOND_HOME/daemon.json" ] || { echo "check-pack: the daemon did not start:" >&2; cat "$work/daemon.err" >&2; exit 1; }
run_app "$work/app"
if [ -n "${via_git:-}" ]; then run_app "$work/app-git"; fi

# From a path, as README.md's Install says, on a fresh checkout (the
# committed files only: no node_modules, no dist): the prepare script must
# build dist/ and the runtime dependency must resolve.
checkout="$work/checkout"
mkdir -p "$checkout"
(cd "$root" && git ls-files -z clients/typescript docs/schema.json | xargs -0 cp --parents -t "$checkout")
app2="$work/app-path"
mkdir "$app2"
cd "$app2"
printf '{"name":"quickstart-path","private":true,"type":"module"}\n' > package.json
npm install --prefer-offline --no-audit --no-fund --loglevel=error "$checkout/clients/typescript" \
  || { echo "check-pack: npm install from the path of a fresh checkout failed" >&2; exit 1; }
cp "$work/app/quickstart.js" .
out=$(timeout 60 node quickstart.js) || { echo "check-pack: the quick start installed from a path failed" >&2; exit 1; }
grep -q 'completed: You said: hello' <<<"$out" || { echo "check-pack: the quick start installed from a path did not print the turn's reply" >&2; exit 1; }
echo "check-pack: ok ($tarball installed from the tarball${via_git:+, the package from a git URL} and from a fresh checkout's path; README quick start compiled and run)"
