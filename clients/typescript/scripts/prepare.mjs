// The prepare script: builds dist/ whenever npm installs the package from
// source (`npm install /path/to/clients/typescript`, a git checkout, `npm
// pack`). npm runs it in this directory but installs neither the
// devDependencies it needs (typescript, json-schema-to-typescript) nor, for
// a path it links, the runtime dependency (ws) there: on a fresh checkout
// it installs them first, with `npm ci` (package-lock.json's versions,
// scripts off so it does not recurse), then runs `npm run build`.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";
const needed = ["typescript", "json-schema-to-typescript", "ws"];
// The npm_config_* of the installing npm (global, prefix, omit=dev,
// install-links, …) must not steer the install of this directory.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_config_")));
const run = (args) => execFileSync(npm, args, { cwd: here, env, stdio: ["ignore", process.stderr, "inherit"] });

if (needed.some((m) => !existsSync(join(here, "node_modules", m, "package.json")))) {
  run(["ci", "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund"]);
}
run(["run", "build"]);
