// Fails (exit 1, one line) when the committed generated types differ from a fresh generation.
import { readFileSync } from "node:fs";

const [committed, fresh] = process.argv.slice(2);
if (readFileSync(committed, "utf8") !== readFileSync(fresh, "utf8")) {
  console.error(
    `error: ${committed} is stale against the server's OpenAPI document; ` +
      "regenerate it with `make typescript-types` and commit the result",
  );
  process.exit(1);
}
console.log(`ok: ${committed} matches the server's OpenAPI document`);
