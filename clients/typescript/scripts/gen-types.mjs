// Generates src/protocol.ts from docs/schema.json (`sessiond schema`):
// one TypeScript type per $defs entry, and Methods, the map from each
// method name to its params and result. Run by `npm run build`.
import { readFileSync, writeFileSync } from "node:fs";
import { compile } from "json-schema-to-typescript";

const [src, out] = process.argv.slice(2);
const doc = JSON.parse(readFileSync(src, "utf8"));
// json-schema-to-typescript names types from "definitions"; the document
// uses 2020-12's "$defs".
const text = JSON.stringify(doc.$defs).replaceAll('"#/$defs/', '"#/definitions/');
const defs = JSON.parse(text);
for (const [name, d] of Object.entries(defs)) d.title = name;
const root = {
  title: "ProtocolDocument",
  type: "object",
  additionalProperties: false,
  properties: Object.fromEntries(Object.keys(defs).map((n) => [n, { $ref: `#/definitions/${n}` }])),
  definitions: defs,
};
let ts = await compile(root, "ProtocolDocument", {
  bannerComment: "/* Generated from docs/schema.json by scripts/gen-types.mjs; do not edit. */",
  additionalProperties: false,
  unreachableDefinitions: true,
  strictIndexSignatures: true,
  format: false,
});
const methods = Object.entries(doc["x-methods"])
  .map(([m, v]) => `  ${JSON.stringify(m)}: { params: ${v.params.$ref.split("/").pop()}; result: ${v.result.$ref.split("/").pop()} };`)
  .join("\n");
ts += `\n/** Every method: its params and result. */\nexport interface Methods {\n${methods}\n}\n`;
ts += `\n/** The event types. */\nexport type SessionEventType = SessionEvent["type"];\n`;
writeFileSync(out, ts);
