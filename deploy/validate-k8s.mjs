// validate-k8s.mjs -- make lint's check of the Kubernetes manifests: each
// overlay of deploy/k8s/overlays/ is rendered with `kubectl kustomize`
// when kubectl is on PATH, else with the built-in renderer of the
// kustomize subset the overlays use (kustomize-subset.mjs, which refuses
// any other kustomization field); stdout says which. A failure to render
// fails, and every document it renders must be a
// kind kubernetes-models knows (its apiVersion and kind; an unknown one
// fails) and valid against that kind's Kubernetes OpenAPI schema (ajv;
// unknown fields fail too) -- but the Prometheus operator's
// ServiceMonitor, which kubernetes-models lacks, is checked by hand: it
// selects a Service of the overlay by its labels and names one of its
// ports. The shared service must ship with auth on (DLOCKD_AUTH_FILE set)
// and a NetworkPolicy over its pods. Every pod template must
// meet Pod Security "restricted" as dlockd's manifests keep it, checked
// here so that a regression fails lint, not an admission controller:
// runAsNonRoot, seccompProfile RuntimeDefault (pod or container), and per
// container allowPrivilegeEscalation: false, capabilities.drop [ALL]
// (add: NET_BIND_SERVICE at most), readOnlyRootFilesystem: true, not
// privileged; no host namespaces, ports or paths; the volume types the
// profile allows. And no probe names httpGet.host (the kubelet would
// probe that address from the node, never the pod's loopback).
//   node deploy/validate-k8s.mjs [FILE...]    (default: the overlays)
//   node deploy/validate-k8s.mjs --self-test  (the built-in renderer: it
//       refuses what it does not support, and renders each kustomization
//       of deploy/k8s/ and of a test tree as kubectl does, when on PATH)
import { execFileSync } from "node:child_process";
import { accessSync, constants, mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync,
	writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { parseAllDocuments } from "yaml";
import { KustomizeError, configmap_hash, render_kustomization } from "./kustomize-subset.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const problems = [];

// The kubectl on PATH, or null.
function kubectl_path() {
	for (const d of (process.env.PATH ?? "").split(delimiter)) {
		if (!d) continue;
		try {
			accessSync(join(d, "kubectl"), constants.X_OK);
			return join(d, "kubectl");
		} catch {
			// not in this directory
		}
	}
	return null;
}
const kubectl = kubectl_path();

function render_kubectl(dir) {
	return execFileSync(kubectl, ["kustomize", dir],
		{ encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

// The built-in renderer against kubectl and what it must refuse
// (make lint runs it); exits.
if (process.argv[2] === "--self-test") {
	await self_test();
	process.exit(problems.length ? 1 : 0);
}

// [name, YAML text] of what to check: the files given, else each overlay
// as kubectl kustomize, or the built-in renderer, renders it
if (process.argv.length <= 2)
	console.log(kubectl
		? `validate-k8s: rendering the overlays with ${kubectl} kustomize`
		: "validate-k8s: kubectl is not on PATH: rendering the overlays with the built-in " +
		  "kustomize subset (deploy/kustomize-subset.mjs)");
const files = process.argv.length > 2
	? process.argv.slice(2).map((f) => [f, readFileSync(f, "utf8")])
	: readdirSync(join(here, "k8s", "overlays")).sort().map((o) => {
		const dir = join(here, "k8s", "overlays", o);
		try {
			return [`overlays/${o}`, kubectl ? render_kubectl(dir) : render_kustomization(dir)];
		} catch (e) {
			problems.push(`overlays/${o}: ${kubectl ? "kubectl kustomize" : "the built-in kustomize"} ` +
				`fails: ${e.stderr ?? e.message}`);
			return [`overlays/${o}`, ""];
		}
	});
let checked = 0;

// "apps/v1" -> kubernetes-models/apps/v1, "v1" -> kubernetes-models/v1
async function modelOf(apiVersion, kind) {
	if (typeof apiVersion !== "string" || !/^([a-z0-9.-]+\/)?v[0-9a-z]+$/.test(apiVersion) ||
	    typeof kind !== "string" || !/^[A-Z][A-Za-z0-9]*$/.test(kind))
		return null;
	try {
		const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
		return mod[kind] ?? null;
	} catch {
		return null;
	}
}

// The pod spec a workload runs, or null.
function podSpecOf(doc) {
	switch (doc.kind) {
	case "Pod": return doc.spec;
	case "Deployment": case "StatefulSet": case "DaemonSet": case "ReplicaSet": case "Job":
		return doc.spec?.template?.spec;
	case "CronJob": return doc.spec?.jobTemplate?.spec?.template?.spec;
	default: return null;
	}
}

const allowedVolumes = new Set(["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
	"persistentVolumeClaim", "projected", "secret"]);

function checkRestricted(spec, where) {
	const bad = (what) => problems.push(`${where}: ${what}`);
	const pod = spec.securityContext ?? {};

	for (const k of ["hostNetwork", "hostPID", "hostIPC"])
		if (spec[k]) bad(`${k} is set (Pod Security restricted forbids it)`);
	for (const v of spec.volumes ?? []) {
		const type = Object.keys(v).find((k) => k !== "name");
		if (!allowedVolumes.has(type)) bad(`volume ${v.name} is of type ${type}, not allowed by restricted`);
	}
	const containers = [
		...(spec.initContainers ?? []).map((c) => ["initContainers", c]),
		...(spec.containers ?? []).map((c) => ["containers", c]),
		...(spec.ephemeralContainers ?? []).map((c) => ["ephemeralContainers", c]),
	];
	if (!containers.length) bad("no containers");
	for (const [list, c] of containers) {
		const sc = c.securityContext ?? {};
		const at = `${list}[${c.name}]`;
		if ((sc.runAsNonRoot ?? pod.runAsNonRoot) !== true)
			bad(`${at}: runAsNonRoot is not true (in the container or the pod)`);
		if ((sc.runAsUser ?? pod.runAsUser) === 0) bad(`${at}: runAsUser is 0`);
		const seccomp = (sc.seccompProfile ?? pod.seccompProfile)?.type;
		if (seccomp !== "RuntimeDefault" && seccomp !== "Localhost")
			bad(`${at}: seccompProfile.type is ${seccomp ?? "unset"}, not RuntimeDefault`);
		if (sc.allowPrivilegeEscalation !== false) bad(`${at}: allowPrivilegeEscalation is not false`);
		if (sc.privileged) bad(`${at}: privileged`);
		if (sc.readOnlyRootFilesystem !== true) bad(`${at}: readOnlyRootFilesystem is not true`);
		if (!(sc.capabilities?.drop ?? []).includes("ALL")) bad(`${at}: capabilities.drop lacks ALL`);
		for (const cap of sc.capabilities?.add ?? [])
			if (cap !== "NET_BIND_SERVICE") bad(`${at}: adds capability ${cap}`);
		for (const p of c.ports ?? [])
			if (p.hostPort) bad(`${at}: hostPort ${p.hostPort}`);
		for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"])
			if (c[probe]?.httpGet?.host !== undefined)
				bad(`${at}: ${probe}.httpGet.host is set: the kubelet probes from the node`);
	}
}

// The ServiceMonitor selects a Service of the same rendering by its labels
// and scrapes a port the Service names.
function checkServiceMonitor(doc, all, where) {
	const sel = doc.spec?.selector?.matchLabels ?? {};
	const services = all.filter((d) => d?.kind === "Service" &&
		Object.entries(sel).every(([k, v]) => d.metadata?.labels?.[k] === v));
	if (!Object.keys(sel).length || !services.length)
		problems.push(`${where}: spec.selector.matchLabels selects no Service of the manifests`);
	for (const ep of doc.spec?.endpoints ?? [])
		if (!services.some((s) => (s.spec?.ports ?? []).some((p) => p.name === ep.port)))
			problems.push(`${where}: endpoint port '${ep.port}' is no port of the Service`);
	if (!(doc.spec?.endpoints ?? []).length) problems.push(`${where}: no endpoints`);
}

// The shared service: auth on, and a NetworkPolicy over its pods.
function checkSharedService(all, file) {
	const dep = all.find((d) => d?.kind === "Deployment" && d.metadata?.name === "dlockd");
	const c = dep?.spec?.template?.spec?.containers?.find((x) => x.name === "dlockd");
	if (!c || !(c.env ?? []).some((e) => e.name === "DLOCKD_AUTH_FILE" && e.value))
		problems.push(`${file}: the shared dlockd does not ship with auth on (DLOCKD_AUTH_FILE)`);
	const podLabels = dep?.spec?.template?.metadata?.labels ?? {};
	const np = all.find((d) => d?.kind === "NetworkPolicy" &&
		Object.entries(d.spec?.podSelector?.matchLabels ?? {}).every(([k, v]) => podLabels[k] === v));
	if (!np || !(np.spec?.ingress ?? []).length)
		problems.push(`${file}: no NetworkPolicy lets only some clients reach the dlockd pods`);
}

for (const [file, text] of files) {
	const docs = parseAllDocuments(text);
	const all = docs.map((d) => d.toJS());
	if (file === "overlays/shared-service") checkSharedService(all, file);
	docs.forEach((d, i) => {
		const where = `${file}#${i + 1}`;
		if (d.errors.length) problems.push(`${where}: ${d.errors[0].message}`);
	});
	for (const [i, d] of docs.entries()) {
		const doc = d.toJS();
		if (doc === null || doc === undefined) continue;
		const where = `${file}#${i + 1} ${doc.kind ?? "?"}/${doc.metadata?.name ?? "?"}`;
		if (doc.apiVersion === "monitoring.coreos.com/v1" && doc.kind === "ServiceMonitor") {
			checkServiceMonitor(doc, all, where);
			checked++;
			continue;
		}
		const Model = await modelOf(doc.apiVersion, doc.kind);
		if (!Model) {
			problems.push(`${where}: unknown apiVersion/kind ${doc.apiVersion}/${doc.kind}`);
			continue;
		}
		try {
			new Model(doc).validate();
		} catch (e) {
			const details = (e.errors ?? []).map((x) => `${x.instancePath} ${x.message}` +
				(x.params?.additionalProperty ? ` (${x.params.additionalProperty})` : ""));
			problems.push(`${where}: not valid against the Kubernetes schema: ` +
				(details.length ? details.join("; ") : e.message));
		}
		const spec = podSpecOf(doc);
		if (spec) checkRestricted(spec, where);
		checked++;
	}
}

for (const p of problems) console.error(`validate-k8s: ${p}`);
if (problems.length) process.exit(1);
console.log(`validate-k8s: ${checked} documents in ${files.length} files valid, pods restricted`);

// Where two parsed YAML values differ first: [path, a's, b's], or null.
function first_difference(a, b, path) {
	if (isDeepStrictEqual(a, b)) return null;
	if (a === null || b === null || typeof a !== "object" || typeof b !== "object" ||
	    Array.isArray(a) !== Array.isArray(b))
		return [path || " (all)", a, b];
	const keys = Array.isArray(a)
		? [...Array(Math.max(a.length, b.length)).keys()]
		: [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
	for (const k of keys) {
		const d = first_difference(a[k], b[k], Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`);
		if (d) return d;
	}
	return [path, a, b];
}

// --self-test: what kustomize-subset.mjs must refuse, kustomize's hashes,
// and (with kubectl on PATH) the same documents as kubectl kustomize for
// deploy/k8s/ and for a test tree that uses every supported field.
async function self_test() {
	const tmp = mkdtempSync(join(tmpdir(), "validate-k8s-"));
	const put = (path, text) => {
		mkdirSync(dirname(join(tmp, path)), { recursive: true });
		writeFileSync(join(tmp, path), text);
	};
	const docs = (text) => parseAllDocuments(text).map((d) => d.toJS());
	let passed = 0;
	const expect = (ok, what) => ok ? passed++ : problems.push(`self-test: ${what}`);
	try {
		// kustomize's hasher tests (api/hasher), and what kubectl
		// kustomize v5.5.0 named a generated ConfigMap x of a=b
		expect(configmap_hash({ one: "" }) === "9g67k2htb6", "hash of {one: ''}");
		expect(configmap_hash(undefined) === "6ct58987ht", "hash of no data");
		expect(configmap_hash({ a: "b" }) === "4h2mbtbbt6", "hash of {a: b}");

		// Refused: every field the built-in renderer does not implement
		put("r.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: r\n");
		const refused = {
			namePrefix: "namePrefix: x-",
			commonLabels: "commonLabels: {a: b}",
			patches: "patches:\n  - path: p.yaml",
			namespace: "namespace: x",
			secretGenerator: "secretGenerator:\n  - name: s\n    literals: [a=b]",
			bogus: "bogus: 1",
			includeSelectors: "labels:\n  - pairs: {a: b}\n    includeSelectors: true",
			files: "configMapGenerator:\n  - name: c\n    files: [r.yaml]",
			options: "configMapGenerator:\n  - name: c\n    literals: [a=b]\n" +
				"    options: {disableNameSuffixHash: true}",
			digest: "images:\n  - name: web\n    digest: sha256:0123",
			"remote resources": "resources: [../r.yaml, 'https://github.com/example/k8s//base']",
		};
		for (const [field, text] of Object.entries(refused)) {
			put("refuse/kustomization.yaml",
				(text.startsWith("resources:") ? "" : "resources: [../r.yaml]\n") + `${text}\n`);
			try {
				render_kustomization(join(tmp, "refuse"));
				expect(false, `a kustomization with ${field} is rendered, not refused`);
			} catch (e) {
				expect(e instanceof KustomizeError && e.message.includes(field),
					`a kustomization with ${field} fails with another error: ${e.message}`);
			}
		}

		// A tree that uses all the renderer supports
		put("t/base/kustomization.yaml", `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [app.yaml, more]
labels:
  - pairs: {tier: base, app.kubernetes.io/part-of: t}
configMapGenerator:
  - name: settings
    literals: ["A=1", "B='quoted'", "C=x=y", 'D="<&>"', "E=0440", "F="]
images:
  - name: web
    newTag: "2.0"
`);
		put("t/base/app.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      initContainers:
        - name: tool
          image: registry.example.org:5000/tool:1@sha256:0123456789abcdef
          envFrom: [{configMapRef: {name: settings}}]
      containers:
        - name: web
          image: web:1.0
          env:
            - name: A
              valueFrom: {configMapKeyRef: {name: settings, key: A}}
            - name: P
              valueFrom: {configMapKeyRef: {name: plain, key: P}}
      volumes:
        - name: s
          configMap: {name: settings}
        - name: p
          projected:
            sources: [{configMap: {name: settings}}, {configMap: {name: other}}]
        - name: k
          secret: {secretName: k, defaultMode: 0440}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: plain}
data: {P: "1"}
`);
		put("t/base/more/kustomization.yaml", `resources: [cron.yaml]
labels:
  - pairs: {sub: more}
configMapGenerator:
  - name: other
    literals: [X=1]
`);
		put("t/base/more/cron.yaml", `apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: job
              image: web
              envFrom: [{configMapRef: {name: other}}, {configMapRef: {name: settings}}]
`);
		put("t/overlay/kustomization.yaml", `resources: [../base, extra.yaml]
labels:
  - pairs: {env: test}
    includeSelectors: false
configMapGenerator:
  - name: overlay-settings
    literals: [Z=z]
images:
  - name: registry.example.org:5000/tool
    newName: tools.example.org/tool
    newTag: "3"
  - name: busybox
    newName: mirror.example.org/busybox
`);
		put("t/overlay/extra.yaml", `apiVersion: v1
kind: Pod
metadata: {name: probe}
spec:
  containers:
    - name: b
      image: busybox
      envFrom: [{configMapRef: {name: overlay-settings}}, {configMapRef: {name: settings}}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: z}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: a}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
---
apiVersion: apps.example.com/v1
kind: Widget
metadata: {name: w}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g}
`);
		const overlay = docs(render_kustomization(join(tmp, "t", "overlay")));
		const web = overlay.find((d) => d.kind === "Deployment");
		expect(web?.spec?.template?.spec?.volumes?.[2]?.secret?.defaultMode === 288,
			"defaultMode: 0440 is not read as octal (288)");
		expect(web?.spec?.template?.spec?.initContainers?.[0]?.image === "tools.example.org/tool:3",
			"the overlay's image is not set");
		expect(web?.metadata?.labels?.env === "test" && web?.metadata?.labels?.tier === "base" &&
			web?.spec?.template?.metadata?.labels?.env === undefined,
			"labels are not on metadata.labels only");

		const dirs = [
			["deploy/k8s/base", join(here, "k8s", "base")],
			...readdirSync(join(here, "k8s", "overlays")).sort().map((o) =>
				[`deploy/k8s/overlays/${o}`, join(here, "k8s", "overlays", o)]),
			["test tree base", join(tmp, "t", "base")],
			["test tree overlay", join(tmp, "t", "overlay")],
		];
		for (const [name, dir] of dirs) {
			let ours;
			try {
				ours = docs(render_kustomization(dir));
			} catch (e) {
				expect(false, `${name}: the built-in kustomize fails: ${e.message}`);
				continue;
			}
			if (!kubectl) continue;
			const theirs = docs(render_kubectl(dir));
			const diff = first_difference(ours, theirs, "");
			expect(diff === null, `${name}: the built-in kustomize renders otherwise than kubectl: ` +
				`at document${diff?.[0]}: built-in ${JSON.stringify(diff?.[1])}, ` +
				`kubectl ${JSON.stringify(diff?.[2])}`);
		}
	} finally {
		rmSync(tmp, { recursive: true, force: true });
	}
	for (const p of problems) console.error(`validate-k8s: ${p}`);
	if (!problems.length)
		console.log(`validate-k8s: self-test: ${passed} checks passed; the built-in kustomize ` +
			(kubectl ? `renders as ${kubectl} kustomize does` :
				"not compared (kubectl is not on PATH)"));
}
