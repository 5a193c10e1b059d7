#!/usr/bin/env bash
# Re-vendor plotly.js from the npm package plotly.js-dist-min: scripts/vendor-plotly.sh [VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
V="${1:-3.0.1}"
T="$(mktemp -d)"
( cd "$T" && npm pack "plotly.js-dist-min@$V" >/dev/null && tar xzf "plotly.js-dist-min-$V.tgz" )
cp "$T/package/plotly.min.js" "$T/package/LICENSE" vendor/plotly.js-dist-min/
sha256sum vendor/plotly.js-dist-min/plotly.min.js
echo "update the version and sha256 in vendor/plotly.js-dist-min/README.md and src/plots/mod.rs"
