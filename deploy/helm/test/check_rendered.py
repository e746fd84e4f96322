#!/usr/bin/env python3
"""Assertions over `helm template` output of deploy/helm/ebpf-profiler.

usage: check_rendered.py RENDERED.yaml VARIANT CONFIG_OUT
VARIANT is "default" or the name of an examples/*.yaml values file; the
Collector configuration in the ConfigMap is written to CONFIG_OUT so the
caller can `otelcol-ebpf-profiler validate` it.
"""
import sys

import yaml

BASE_CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "CHECKPOINT_RESTORE", "DAC_READ_SEARCH", "SYS_RESOURCE", "SYSLOG"}
READ_VERBS = ["get", "list", "watch"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path, variant, config_out = sys.argv[1:]
    with open(path) as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    rbac = variant != "privileged"
    want = {"DaemonSet", "ConfigMap"} | ({"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} if rbac else set())
    check(set(by_kind) == want, f"kinds {sorted(by_kind)} != {sorted(want)}")
    for kind, objs in by_kind.items():
        check(len(objs) == 1, f"{len(objs)} objects of kind {kind}")

    ds = by_kind["DaemonSet"][0]
    pod = ds["spec"]["template"]["spec"]
    check(pod.get("hostPID") is True, "hostPID is not true")
    check(pod.get("hostNetwork") is not True, "hostNetwork must stay off")
    check({"operator": "Exists"} in pod.get("tolerations", []), "no toleration for every taint")
    containers = pod["containers"]
    check(len(containers) == 1, "one container")
    c = containers[0]
    sc = c["securityContext"]
    check(sc.get("readOnlyRootFilesystem") is True, "root file system is not read-only")
    check(sc.get("runAsUser") == 0, "capabilities need uid 0")
    if variant == "privileged":
        check(sc.get("privileged") is True, "privileged value not applied")
    else:
        check(sc.get("privileged") is False, "privileged must be false by default")
        check(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities", {})
        check(caps.get("drop") == ["ALL"], f"capabilities.drop {caps.get('drop')} != [ALL]")
        want_caps = BASE_CAPS | ({"SYS_ADMIN"} if variant == "old-kernel" else set())
        check(set(caps.get("add", [])) == want_caps, f"capabilities.add {caps.get('add')} != {sorted(want_caps)}")
        check(len(caps.get("add", [])) == len(want_caps), "duplicate capabilities")

    # Mounts: the config (read-only) and /tmp, nothing from the host.
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    check(set(mounts) == {"/conf", "/tmp"}, f"mounts {sorted(mounts)}")
    check(mounts.get("/conf", {}).get("readOnly") is True, "/conf must be read-only")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    check(not any("hostPath" in v for v in vols.values()), "no hostPath volume expected")
    check("emptyDir" in vols.get("tmp", {}), "/tmp is an emptyDir")

    # Resources: a memory limit, handed to the Go runtime.
    res = c.get("resources", {})
    limit = res.get("limits", {}).get("memory")
    check(limit == ("1Gi" if variant == "backend-and-interpreters" else "512Mi"), f"memory limit {limit}")
    check("memory" in res.get("requests", {}), "memory request")
    env = {e["name"]: e for e in c.get("env", [])}
    gml = env.get("GOMEMLIMIT", {}).get("valueFrom", {}).get("resourceFieldRef", {})
    check(gml.get("resource") == "limits.memory", "GOMEMLIMIT from limits.memory")
    check(env.get("K8S_NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
          "K8S_NODE_NAME from spec.nodeName")

    # Health checks through the health_check extension's port.
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    for probe in ("livenessProbe", "readinessProbe"):
        check(c.get(probe, {}).get("httpGet", {}).get("port") == "health", f"{probe} on the health port")
    check(ports.get("health") == 13133, f"health port {ports.get('health')}")
    args = c.get("args", [])
    check("--feature-gates=service.profilesSupport" in args, "profiles feature gate")
    check("--config=/conf/config.yaml" in args, "config path")

    # RBAC: read-only access to what k8s_attributes reads.
    if rbac:
        sa = by_kind["ServiceAccount"][0]["metadata"]["name"]
        check(pod.get("serviceAccountName") == sa, "the pod uses the chart's service account")
        role = by_kind["ClusterRole"][0]
        got = {(g, r): sorted(rule["verbs"]) for rule in role["rules"]
               for g in rule["apiGroups"] for r in rule["resources"]}
        want_rules = {("", "pods"): READ_VERBS, ("", "namespaces"): READ_VERBS, ("", "nodes"): READ_VERBS,
                      ("apps", "replicasets"): READ_VERBS, ("batch", "jobs"): READ_VERBS}
        check(got == {k: sorted(v) for k, v in want_rules.items()}, f"ClusterRole rules {got}")
        binding = by_kind["ClusterRoleBinding"][0]
        check(binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                     "name": role["metadata"]["name"]}, "binding's roleRef")
        check(binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "profiling"}],
              f"binding's subjects {binding['subjects']}")

    # The Collector configuration.
    cm = by_kind["ConfigMap"][0]
    check(vols.get("config", {}).get("configMap", {}).get("name") == cm["metadata"]["name"], "config volume")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    recv = cfg["receivers"]["profiling"]
    pipe = cfg["service"]["pipelines"]["profiles"]
    check(pipe["receivers"] == ["profiling"], "profiling receiver in the pipeline")
    check(cfg["extensions"]["health_check"]["endpoint"] == "${env:MY_POD_IP}:13133", "health_check endpoint")
    check(cfg["service"]["extensions"] == ["health_check"], "health_check enabled")
    check(cfg["processors"]["memory_limiter"]["limit_percentage"] == 80, "memory_limiter from the limit")
    if variant == "privileged":
        check(pipe["processors"] == ["memory_limiter", "resource_detection"], f"processors {pipe['processors']}")
        check("k8s_attributes" not in cfg["processors"], "k8s_attributes off")
    else:
        check(pipe["processors"] == ["memory_limiter", "k8s_attributes", "resource_detection"],
              f"processors {pipe['processors']}")
        k8s = cfg["processors"]["k8s_attributes"]
        check(k8s["pod_association"] == [{"sources": [{"from": "resource_attribute", "name": "container.id"}]}],
              "pods associated by container.id")
        for attr in ("k8s.pod.name", "k8s.namespace.name", "k8s.deployment.name", "k8s.container.name"):
            check(attr in k8s["extract"]["metadata"], f"k8s_attributes extracts {attr}")
        check(k8s["filter"]["node_from_env_var"] == "K8S_NODE_NAME", "only this node's pods")
    if variant == "backend-and-interpreters":
        check(recv == {"samples_per_second": 97, "reporter_interval": "10s", "error_mode": "propagate",
                       "interpreters": {"python": {"disabled": True}}}, f"receiver {recv}")
        check(cfg["exporters"]["otlp_grpc"]["endpoint"] == "pyroscope-distributor.pyroscope.svc:4317", "endpoint")
        check(pipe["exporters"] == ["otlp_grpc", "debug"], f"exporters {pipe['exporters']}")
    else:
        check(recv == {"samples_per_second": 20, "reporter_interval": "5s", "error_mode": "ignore"},
              f"receiver {recv}")
        check(pipe["exporters"] == ["otlp_grpc"], f"exporters {pipe['exporters']}")

    with open(config_out, "w") as fh:
        yaml.safe_dump(cfg, fh)
    if failures:
        for f in failures:
            print(f"check_rendered.py [{variant}]: FAIL: {f}", file=sys.stderr)
        sys.exit(1)
    print(f"check_rendered.py [{variant}]: ok ({len(docs)} objects)")


if __name__ == "__main__":
    main()
