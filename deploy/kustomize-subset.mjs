// kustomize-subset.mjs -- a renderer for the part of kustomize that
// deploy/k8s/ uses, for deploy/validate-k8s.mjs when kubectl is not on
// PATH (Debian 12 packages no kubectl). It renders what
// `kubectl kustomize DIR` (kustomize v5) renders, as parsed YAML, for
// kustomization.yaml files made only of:
//   apiVersion/kind   kustomize.config.k8s.io/v1beta1 Kustomization
//   resources         local files and directories (a directory is a
//                     kustomization of its own, rendered first)
//   labels            [{pairs}]: metadata.labels only, as kustomize does
//                     when includeSelectors and includeTemplates are unset
//   configMapGenerator [{name, literals}]: the ConfigMap is named
//                     <name>-<hash> with kustomize's content hash, and the
//                     references of pod specs to <name> (envFrom, env
//                     valueFrom, volumes, projected volumes) are renamed
//   images            [{name, newName, newTag}] on containers and
//                     initContainers at any depth (kustomize's walk)
// and it sorts the result in kustomize's default ("legacy") order. Any
// other field or option is refused with an error naming it, so that an
// edit of the manifests cannot escape the validation by being ignored
// here; validate-k8s.mjs --self-test compares both renderings when
// kubectl is there. Resource files are read as kustomize's YAML parser
// reads them in one respect that matters to manifests: 0440 is octal.
// Not done (no manifest of deploy/k8s/ has them): references to a
// generated ConfigMap outside pod specs (Role resourceNames, Node
// configSource, an Ingress annotation), YAML 1.1 number forms other
// than a leading-zero octal (1_000, 0b101).
//   render_kustomization(dir) -> YAML text of the documents
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseAllDocuments, stringify } from "yaml";

// go-yaml v3 (which kustomize reads with) takes 0440 as octal, YAML 1.2
// as decimal 440: a Secret volume's defaultMode: 0440 must be 288.
const legacy_octal = {
	identify: (v) => typeof v === "number" && Number.isInteger(v),
	default: true,
	tag: "tag:yaml.org,2002:int",
	test: /^[-+]?0[0-7]+$/,
	resolve: (s) => parseInt(s, 8),
};
const parse_options = { customTags: (tags) => [legacy_octal, ...tags] };

// What a kustomization may say, and what each entry of its lists may.
const kustomization_fields = new Set(["apiVersion", "kind", "resources", "labels",
	"configMapGenerator", "images"]);
const label_fields = new Set(["pairs", "includeSelectors", "includeTemplates"]);
const generator_fields = new Set(["name", "literals"]);
const image_fields = new Set(["name", "newName", "newTag"]);

class KustomizeError extends Error {}
export { KustomizeError };

function fail(where, what) {
	throw new KustomizeError(`${where}: ${what}`);
}

function refuse_unknown(obj, allowed, where) {
	for (const k of Object.keys(obj))
		if (!allowed.has(k))
			fail(where, `'${k}' is not supported by validate-k8s's built-in kustomize ` +
				`(it supports ${[...allowed].join(", ")}); render with kubectl, or ` +
				"teach deploy/kustomize-subset.mjs the field and its test");
}

function list_of(v, where, what) {
	if (v === undefined || v === null) return [];
	if (!Array.isArray(v)) fail(where, `${what} is not a list`);
	return v;
}

function arr(v) {
	return Array.isArray(v) ? v : [];
}

function is_map(v) {
	return v !== null && typeof v === "object" && !Array.isArray(v);
}

function read_yaml(path, where) {
	const docs = parseAllDocuments(readFileSync(path, "utf8"), parse_options);
	for (const d of docs)
		if (d.errors.length) fail(where, d.errors[0].message);
	return docs.map((d) => d.toJS()).filter((d) => d !== null && d !== undefined);
}

function kustomization_file(dir) {
	for (const n of ["kustomization.yaml", "kustomization.yml", "Kustomization"])
		if (existsSync(join(dir, n))) return join(dir, n);
	return null;
}

// Go's json.Marshal of a string: JSON.stringify's, but <, >, & and the
// line/paragraph separators escaped as \u00XX.
function go_json_string(s) {
	return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g,
		(c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

// kustomize's hash of a ConfigMap (api/hasher): the sha256 of Go's JSON
// of {data, kind, name} (keys sorted), its first 10 hex digits with
// 0 1 3 a e spelled g h k m t. data absent hashes as "". The name is
// always "": the hasher looks it up as the one field "metadata/name",
// which no ConfigMap has (so two generators that differ only in name
// get the same suffix; kubectl kustomize v5.5.0 does so).
export function configmap_hash(data) {
	const name = "";
	const d = data === undefined ? '""' : "{" + Object.keys(data).sort()
		.map((k) => `${go_json_string(k)}:${go_json_string(data[k])}`).join(",") + "}";
	const json = `{"data":${d},"kind":"ConfigMap","name":${go_json_string(name)}}`;
	const hex = createHash("sha256").update(json).digest("hex");
	const spell = { 0: "g", 1: "h", 3: "k", a: "m", e: "t" };
	return [...hex.slice(0, 10)].map((c) => spell[c] ?? c).join("");
}

// key=value, split at the first =, surrounding matching quotes dropped
// (api/kv parseLiteralSource).
function parse_literal(lit, where) {
	if (typeof lit !== "string") fail(where, `literal ${JSON.stringify(lit)} is not a string`);
	const eq = lit.indexOf("=");
	if (eq <= 0) fail(where, `invalid literal source ${lit}, expected key=value`);
	const key = lit.slice(0, eq);
	let value = lit.slice(eq + 1);
	if (value.length >= 2 && value[0] === value[value.length - 1] &&
	    (value[0] === '"' || value[0] === "'"))
		value = value.slice(1, -1);
	if (!/^[-._a-zA-Z0-9]+$/.test(key)) fail(where, `'${key}' is not a valid ConfigMap key`);
	return [key, value];
}

// The pod specs of a resource whose ConfigMap references kustomize
// renames (its nameReference configuration).
function pod_specs(r) {
	switch (r.kind) {
	case "Pod": return [r.spec];
	case "PodTemplate": return [r.template?.spec];
	case "Deployment": case "ReplicaSet": case "DaemonSet": case "StatefulSet": case "Job":
		return [r.spec?.template?.spec];
	case "CronJob": return [r.spec?.jobTemplate?.spec?.template?.spec];
	default: return [];
	}
}

// Rename references to the ConfigMap `from` (in namespace ns) to `to`.
function rename_configmap_refs(resources, ns, from, to) {
	const fix = (ref) => {
		if (is_map(ref) && ref.name === from) ref.name = to;
	};
	for (const r of resources) {
		if ((r.metadata?.namespace ?? "") !== ns) continue;
		for (const spec of pod_specs(r)) {
			if (!is_map(spec)) continue;
			for (const c of [...arr(spec.containers), ...arr(spec.initContainers)]) {
				for (const e of arr(c?.env)) fix(e?.valueFrom?.configMapKeyRef);
				for (const e of arr(c?.envFrom)) fix(e?.configMapRef);
			}
			for (const v of arr(spec.volumes)) {
				fix(v?.configMap);
				for (const s of arr(v?.projected?.sources)) fix(s?.configMap);
			}
		}
	}
}

// api/internal/image: [host[:port]/]path[:tag][@digest]
function split_image(image) {
	const slash = Math.max(image.indexOf("/"), 0);
	const rest = image.slice(slash);
	const at = rest.indexOf("@"), colon = rest.indexOf(":");
	if (colon < 0 && at < 0) return [image, "", ""];
	if (at >= 0 && (at < colon || colon < 0))
		return [image.slice(0, slash + at), "", image.slice(slash + at + 1)];
	if (at >= 0) return [image.slice(0, slash + colon),
		image.slice(slash + colon + 1, slash + at), image.slice(slash + at + 1)];
	return [image.slice(0, slash + colon), image.slice(slash + colon + 1), ""];
}

function escape_regexp(s) {
	return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function set_image(container, img) {
	if (!is_map(container) || typeof container.image !== "string") return;
	const re = new RegExp("^" + escape_regexp(img.name) +
		"(:[a-zA-Z0-9_.{}-]*)?(@[a-zA-Z0-9]+([.+_-][a-zA-Z0-9]+)*:[a-zA-Z0-9_.{}-]*)?$");
	if (!re.test(container.image)) return;
	let [name, tag, digest] = split_image(container.image);
	if (img.newName) name = img.newName;
	if (img.newTag) {
		tag = img.newTag;
		digest = "";
	}
	container.image = name + (tag ? `:${tag}` : "") + (digest ? `@${digest}` : "");
}

// Every containers/initContainers list at any depth (imagetag's legacy
// walk), CustomResourceDefinitions left alone.
function walk_containers(node, img) {
	if (Array.isArray(node)) {
		for (const x of node) walk_containers(x, img);
	} else if (is_map(node)) {
		for (const [k, v] of Object.entries(node)) {
			walk_containers(v, img);
			if ((k === "containers" || k === "initContainers") && Array.isArray(v))
				for (const c of v) set_image(c, img);
		}
	}
}

function id_of(r) {
	const av = r.apiVersion.split("/");
	const [group, version] = av.length === 2 ? av : ["", av[0]];
	return { group, version, kind: r.kind, ns: r.metadata.namespace ?? "", name: r.metadata.name };
}

// kustomize's default output order (SortOrderTransformer, "legacy").
const order_first = ["Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition",
	"ServiceAccount", "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding",
	"ClusterRoleBinding", "ConfigMap", "Secret", "Endpoints", "Service", "LimitRange",
	"PriorityClass", "PersistentVolume", "PersistentVolumeClaim", "Deployment", "StatefulSet",
	"CronJob", "PodDisruptionBudget"];
const order_last = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];

function type_order(kind) {
	const f = order_first.indexOf(kind);
	if (f >= 0) return f - order_first.length;
	const l = order_last.indexOf(kind);
	return l >= 0 ? 1 + l : 0;
}

function legacy_less(a, b) {
	const x = id_of(a), y = id_of(b);
	const gvk = (i) => [i.group || "~G", i.version || "~V", i.kind || "~K"].join("_");
	if (gvk(x) !== gvk(y)) {
		if (type_order(x.kind) !== type_order(y.kind)) return type_order(x.kind) < type_order(y.kind);
		if (x.kind === "Namespace" && y.kind === "Namespace" && (!x.group || !y.group))
			return gvk(x) > gvk(y);
		return gvk(x) < gvk(y);
	}
	// same GVK: by namespace, then name
	const res = (i) => `${i.ns || "~X"}|${i.name || "~N"}`;
	return res(x) < res(y);
}

function compare_go(a, b) {
	return legacy_less(a, b) ? -1 : legacy_less(b, a) ? 1 : 0;
}

// One kustomization: its resources (a directory's rendered first), its
// generated ConfigMaps, then its labels and images over all of them.
// Returns the resources, each ConfigMap generated carrying its original
// name in generated[] so that references at every level are renamed.
function build(dir, seen, generated) {
	dir = resolve(dir);
	const file = kustomization_file(dir);
	if (!file) fail(dir, "no kustomization.yaml");
	if (seen.has(dir)) fail(dir, "cycle of kustomizations");
	seen.add(dir);
	const docs = read_yaml(file, file);
	if (docs.length !== 1 || !is_map(docs[0])) fail(file, "not one YAML mapping");
	const k = docs[0];
	refuse_unknown(k, kustomization_fields, file);
	if (k.apiVersion !== undefined && k.apiVersion !== "kustomize.config.k8s.io/v1beta1")
		fail(file, `apiVersion ${k.apiVersion} is not kustomize.config.k8s.io/v1beta1`);
	if (k.kind !== undefined && k.kind !== "Kustomization")
		fail(file, `kind ${k.kind} is not Kustomization`);

	const resources = [];
	for (const entry of list_of(k.resources, file, "resources")) {
		if (typeof entry !== "string") fail(file, `resource ${JSON.stringify(entry)} is not a path`);
		const path = resolve(dir, entry);
		if (!existsSync(path))
			fail(file, `resource ${entry} is no local file or directory ` +
				"(remote resources are not supported by the built-in kustomize)");
		if (statSync(path).isDirectory()) {
			resources.push(...build(path, seen, generated));
			continue;
		}
		for (const r of read_yaml(path, path)) {
			if (!is_map(r) || typeof r.apiVersion !== "string" || typeof r.kind !== "string" ||
			    typeof r.metadata?.name !== "string")
				fail(path, "a document lacks apiVersion, kind or metadata.name");
			if (r.kind === "List" || r.kind.endsWith("List"))
				fail(path, `kind ${r.kind} is not supported by the built-in kustomize`);
			resources.push(r);
		}
	}

	const level_generated = [];
	for (const [i, g] of list_of(k.configMapGenerator, file, "configMapGenerator").entries()) {
		const where = `${file}: configMapGenerator[${i}]`;
		if (!is_map(g)) fail(where, "not a mapping");
		refuse_unknown(g, generator_fields, where);
		if (typeof g.name !== "string" || !g.name) fail(where, "no name");
		const literals = list_of(g.literals, where, "literals");
		if (!literals.length) fail(where, "no literals");
		const data = {};
		for (const lit of literals) {
			const [key, value] = parse_literal(lit, where);
			if (key in data) fail(where, `key ${key} given twice`);
			data[key] = value;
		}
		const cm = { apiVersion: "v1", kind: "ConfigMap",
			metadata: { name: `${g.name}-${configmap_hash(data)}` }, data };
		level_generated.push([g.name, cm]);
		resources.push(cm);
	}
	generated.push(...level_generated);

	for (const [i, l] of list_of(k.labels, file, "labels").entries()) {
		const where = `${file}: labels[${i}]`;
		if (!is_map(l)) fail(where, "not a mapping");
		refuse_unknown(l, label_fields, where);
		for (const f of ["includeSelectors", "includeTemplates"])
			if (l[f] !== undefined && l[f] !== false)
				fail(where, `'${f}: ${l[f]}' is not supported by the built-in kustomize`);
		if (!is_map(l.pairs)) fail(where, "pairs is not a mapping");
		for (const [key, value] of Object.entries(l.pairs)) {
			if (typeof value !== "string") fail(where, `label ${key}'s value is not a string`);
			for (const r of resources) {
				r.metadata.labels ??= {};
				r.metadata.labels[key] = value;
			}
		}
	}

	for (const [i, img] of list_of(k.images, file, "images").entries()) {
		const where = `${file}: images[${i}]`;
		if (!is_map(img)) fail(where, "not a mapping");
		refuse_unknown(img, image_fields, where);
		if (typeof img.name !== "string" || !img.name) fail(where, "no name");
		for (const f of ["newName", "newTag"])
			if (img[f] !== undefined && typeof img[f] !== "string")
				fail(where, `${f} is not a string (quote it)`);
		for (const r of resources)
			if (r.kind !== "CustomResourceDefinition") walk_containers(r, img);
	}

	for (const [name, cm] of generated)
		rename_configmap_refs(resources, cm.metadata.namespace ?? "", name, cm.metadata.name);
	seen.delete(dir);
	return resources;
}

// The documents `kubectl kustomize dir` would print, as YAML text.
export function render_kustomization(dir) {
	const resources = build(dir, new Set(), []);
	const ids = new Set();
	for (const r of resources) {
		const i = id_of(r);
		const key = [i.group, i.version, i.kind, i.ns, i.name].join("|");
		if (ids.has(key))
			fail(dir, `${r.kind}/${r.metadata.name} is defined twice ` +
				"(kustomize: may not add resource with an already registered id)");
		ids.add(key);
	}
	resources.sort(compare_go);
	return resources.map((r) => stringify(r)).join("---\n");
}
