// validate.mjs -- check every response the integration suite received
// against openapi.yaml: its path and method must be described, its status
// declared (404/405 errors excepted, which the document describes in
// prose), its content type the declared one, and a JSON body must match
// the declared schema (Ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses).
//   node tests/contract/validate.mjs openapi.yaml responses.jsonl
// Prints TAP: one line per distinct operation+status, then a summary.
import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const [specPath, logPath] = process.argv.slice(2);
const spec = YAML.parse(readFileSync(specPath, 'utf8'), { maxAliasCount: -1 });
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(spec, 'spec');

const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const deref = (obj) => {
  while (obj && obj.$ref) {
    obj = obj.$ref.slice(2).split('/').reduce((o, k) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
  }
  return obj;
};
// the JSON pointer, in the spec, of a response's JSON schema
const schemaPointer = (response, pointer) => {
  if (response.$ref) return schemaPointer(deref(response), response.$ref.slice(1));
  return `${pointer}/content/${esc('application/json')}/schema`;
};

const routes = Object.keys(spec.paths).map((p) => ({
  template: p,
  re: new RegExp('^' + p.replace(/\{[^}]+\}/g, '[^/]+').replace(/\./g, '\\.') + '$'),
}));
const validators = new Map();
const validatorFor = (pointer) => {
  if (!validators.has(pointer)) validators.set(pointer, ajv.compile({ $ref: `spec#${pointer}` }));
  return validators.get(pointer);
};
const errorPointer = '/components/schemas/Error';

const lines = readFileSync(logPath, 'utf8').split('\n').filter(Boolean);
const failures = [];
const seen = new Map();   // "METHOD template status" -> count
let checked = 0;

for (const line of lines) {
  const r = JSON.parse(line);
  const route = routes.find((x) => x.re.test(r.path));
  const op = route && spec.paths[route.template][r.method.toLowerCase()];
  const declared = op && op.responses[String(r.status)];
  const where = `${r.method} ${r.path} ${r.status}`;
  let pointer = null;
  let type = 'application/json';

  if (declared) {
    const resp = deref(declared);
    type = Object.keys(resp.content || {})[0];
    if (type === 'application/json') {
      const base = `/paths/${esc(route.template)}/${r.method.toLowerCase()}/responses/${r.status}`;
      pointer = schemaPointer(declared, base);
    }
  } else if (r.status === 404 || r.status === 405 || (!op && r.status === 400)) {
    // unknown path, method not taken, or a name the path cannot carry
    pointer = errorPointer;
  } else {
    failures.push(`${where}: ${route ? (op ? 'status not declared' : 'method not described') : 'path not described'}`);
    continue;
  }
  const key = `${r.method} ${route ? route.template : '(unmatched)'} ${r.status}`;
  seen.set(key, (seen.get(key) || 0) + 1);
  if (!r.content_type.startsWith(type)) {
    failures.push(`${where}: content type ${r.content_type}, declared ${type}`);
    continue;
  }
  if (pointer) {
    let body;
    try {
      body = JSON.parse(r.body);
    } catch (e) {
      failures.push(`${where}: body is not JSON: ${r.body.slice(0, 80)}`);
      continue;
    }
    const validate = validatorFor(pointer);
    if (!validate(body)) {
      failures.push(`${where}: ${r.body.trim().slice(0, 160)} does not match ${pointer}: ` +
        ajv.errorsText(validate.errors));
      continue;
    }
  }
  checked++;
}

let n = 0;
for (const [key, count] of [...seen.entries()].sort()) console.log(`# ${key}: ${count}`);
for (const f of failures.slice(0, 30)) console.log(`# ${f}`);
const ok = failures.length === 0 && checked > 0;
console.log(`${ok ? 'ok' : 'not ok'} ${++n} - contract: ${checked} responses (${seen.size} operation/status pairs) match openapi.yaml, ${failures.length} do not`);
process.exit(ok ? 0 : 1);
