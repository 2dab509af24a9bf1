#!/usr/bin/env bash
# Scaffolds a workspace project: tools/scripts/new-project.sh libs/NAME "description" [dep ...]
# Creates package.json, tsconfig files and vite.config.ts in the house layout; run `npx nx sync` after.
set -euo pipefail
dir=$1; desc=$2; shift 2
name=$(basename "$dir")
mkdir -p "$dir/src"
deps=""
for d in "$@"; do deps="$deps\"@fencer/$d\": \"*\", "; done
deps=${deps%, }
cat > "$dir/package.json" <<JSON
{
  "name": "@fencer/$name",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "description": "$desc",
  "exports": {
    ".": {
      "@fencer/source": "./src/index.ts",
      "types": "./dist/index.d.ts",
      "default": "./dist/index.js"
    },
    "./package.json": "./package.json"
  },
  "dependencies": { $deps },
  "nx": { "name": "$name" }
}
JSON
cp libs/base/tsconfig.json libs/base/tsconfig.lib.json libs/base/tsconfig.spec.json "$dir/"
sed -i "s#\\.\\./\\.\\./#$(realpath --relative-to="$dir" .)/#" "$dir"/tsconfig*.json
cat > "$dir/vite.config.ts" <<TS
import { fencerVitestConfig } from '$(realpath --relative-to="$dir" .)/tools/vitest/preset.mjs';

export default fencerVitestConfig('$name');
TS
