// validate-k8s.mjs -- make lint's check of the Kubernetes manifests: each
// overlay of deploy/k8s/overlays/ is rendered with `kubectl kustomize`
// (a failure to render fails), and every document it renders must be a
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
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const problems = [];
// [name, YAML text] of what to check: the files given, else each overlay
// as kubectl kustomize renders it
const files = process.argv.length > 2
	? process.argv.slice(2).map((f) => [f, readFileSync(f, "utf8")])
	: readdirSync(join(here, "k8s", "overlays")).sort().map((o) => {
		const dir = join(here, "k8s", "overlays", o);
		try {
			return [`overlays/${o}`, execFileSync("kubectl", ["kustomize", dir],
				{ encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })];
		} catch (e) {
			problems.push(`overlays/${o}: kubectl kustomize fails: ${e.stderr ?? e.message}`);
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
