// check-monitoring.mjs -- make lint's check that the shipped dashboard and
// alert rules speak of metrics dlockd really exports. It starts the dlockd
// binary given (on a free loopback port, Redis unreachable: /metrics
// answers anyway and lists every family's # TYPE line), reads the
// families from its /metrics, and checks that every PromQL expression of
// deploy/grafana/*.json (panels, nested rows, template queries) and of
// deploy/prometheus/*-alerts.yaml (rules; and the series of the rule
// tests) names only those metrics (a histogram's _bucket, _sum, _count
// included) or Prometheus' own `up`. The dashboard must be valid JSON.
//   node deploy/check-monitoring.mjs build/dlockd
import { readFileSync, readdirSync } from "node:fs";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.argv[2];
if (!bin) {
	console.error("usage: node deploy/check-monitoring.mjs path/to/dlockd");
	process.exit(2);
}

// dlockd's metric names, from the # TYPE lines of a running dlockd.
async function exported() {
	const d = spawn(bin, ["--listen", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1/0",
		"--threads", "1"], { stdio: ["ignore", "ignore", "pipe"] });
	let log = "";
	d.stderr.on("data", (b) => { log += b; });
	try {
		let port = null;
		for (let i = 0; i < 200 && !port; i++) {
			await new Promise((r) => setTimeout(r, 50));
			port = log.match(/"port":(\d+)/)?.[1];
		}
		if (!port)
			throw new Error(`dlockd did not start:\n${log}`);
		const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
		const names = new Set(["up"]);
		for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
			names.add(name);
			if (type === "histogram" || type === "summary")
				for (const s of ["_bucket", "_sum", "_count"])
					names.add(name + s);
		}
		return names;
	} finally {
		d.kill("SIGTERM");
	}
}

const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right",
	"and", "or", "unless", "bool", "offset", "inf", "nan", "le"]);

// The metric names a PromQL expression selects.
function metricsOf(expr) {
	const s = expr
		.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')	// strings
		.replace(/\{[^}]*\}/g, "")				// label matchers
		.replace(/\[[^\]]*\]/g, "")				// ranges
		.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "")
		.replace(/\$\{?\w+\}?/g, "");				// Grafana variables
	const out = [];
	for (const m of s.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
		const after = s.slice(m.index + m[0].length).trimStart();
		if (after.startsWith("(") || KEYWORDS.has(m[0].toLowerCase()))
			continue;	// a function, an aggregation, a keyword
		if (/^[0-9]/.test(m[0]) || (m.index > 0 && /[0-9.]/.test(s[m.index - 1])))
			continue;	// a number's exponent or unit (1e3, 5m)
		out.push(m[0]);
	}
	return out;
}

const names = await exported();
const problems = [];
let exprs = 0;

function check(where, expr) {
	exprs++;
	for (const m of metricsOf(expr))
		if (!names.has(m))
			problems.push(`${where}: '${m}' is no metric dlockd exports (in: ${expr})`);
}

for (const f of readdirSync(join(here, "grafana")).filter((f) => f.endsWith(".json"))) {
	let dash;
	try {
		dash = JSON.parse(readFileSync(join(here, "grafana", f), "utf8"));
	} catch (e) {
		problems.push(`grafana/${f}: not valid JSON: ${e.message}`);
		continue;
	}
	const walk = (panels) => {
		for (const p of panels ?? []) {
			for (const t of p.targets ?? [])
				if (t.expr !== undefined)
					check(`grafana/${f} panel '${p.title}'`, t.expr);
			if (p.type !== "row" && !(p.targets ?? []).length)
				problems.push(`grafana/${f} panel '${p.title}' has no query`);
			walk(p.panels);
		}
	};
	walk(dash.panels);
	for (const v of dash.templating?.list ?? [])
		if (v.type === "query")
			check(`grafana/${f} variable '${v.name}'`,
				(typeof v.query === "string" ? v.query : v.query?.query ?? "")
					.replace(/^label_values\((.*),\s*\w+\)$/, "$1"));
}

for (const f of readdirSync(join(here, "prometheus")).filter((f) => /\.ya?ml$/.test(f))) {
	const doc = parse(readFileSync(join(here, "prometheus", f), "utf8"));
	for (const g of doc.groups ?? [])
		for (const r of g.rules ?? [])
			check(`prometheus/${f} ${r.alert ?? r.record}`, r.expr);
	for (const t of doc.tests ?? [])
		for (const s of t.input_series ?? [])
			if (!names.has(s.series.replace(/\{.*$/, "")))
				problems.push(`prometheus/${f} test '${t.name}': series ${s.series} is no metric dlockd exports`);
}

for (const p of problems)
	console.error(`check-monitoring: ${p}`);
console.log(`check-monitoring: ${exprs} queries checked against ${names.size} metric names`);
process.exit(problems.length ? 1 : 0);
