#!/usr/bin/env bash
# Tests of deploy/helm: `helm lint`, `helm template` for the default values
# and every examples/*.yaml, each rendering validated against the
# Kubernetes schemas with kubeconform (strict), checked by
# check_rendered.py (hostPID, capabilities, mounts, resources, RBAC, the
# Collector configuration), and its Collector configuration validated by
# ./otelcol-ebpf-profiler. Plus the values file for the community
# opentelemetry-collector chart.
#
# Offline: helm and kubeconform are built from their Go modules (kept in
# GOPATH/bin, rebuilt only when the version differs); the schemas are
# generated from the OpenAPI v3 spec in the k8s.io/kubernetes module (from
# the Go module proxy) by k8s_schemas.py and cached.
#
# Under CI=true a missing tool or binary fails; otherwise the
# otelcol validation is skipped when ./otelcol-ebpf-profiler is absent.
# OTEL_COLLECTOR_CHART=/path/to/charts/opentelemetry-collector also renders
# the community chart with our values (it cannot be downloaded here).
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
export CI="${CI:-}"

HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
KUBERNETES_VERSION=v1.34.1

gobin=$(go env GOPATH)/bin
helm=$gobin/helm
kubeconform=$gobin/kubeconform
# The module version go install built (the binaries' own --version does not
# carry it).
built_version() { go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3 }'; }
if ! [ -x "$helm" ] || [ "$(built_version "$helm")" != "$HELM_VERSION" ]; then
  echo "helm_test: installing helm $HELM_VERSION"
  go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
if ! [ -x "$kubeconform" ] || [ "$(built_version "$kubeconform")" != "$KUBECONFORM_VERSION" ]; then
  echo "helm_test: installing kubeconform $KUBECONFORM_VERSION"
  go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
fi

schemas=${XDG_CACHE_HOME:-$HOME/.cache}/ebpf-profiler/k8s-schemas-$KUBERNETES_VERSION
if ! [ -s "$schemas/daemonset-apps-v1.json" ]; then
  spec=$(cd /tmp && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/api/openapi-spec/v3
  rm -rf "$schemas.tmp"
  python3 deploy/helm/test/k8s_schemas.py "$spec" "$schemas.tmp"
  rm -rf "$schemas" && mv "$schemas.tmp" "$schemas"
fi
schema_location="$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json"

otelcol=$root/otelcol-ebpf-profiler
if ! [ -x "$otelcol" ]; then
  if [ "$CI" = true ]; then echo "helm_test: $otelcol missing (make otelcol-ebpf-profiler)" >&2; exit 1; fi
  echo "helm_test: $otelcol missing: the rendered Collector configurations are not validated"
  otelcol=
fi

tmp=$(mktemp -d /tmp/helm_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chart=deploy/helm/ebpf-profiler

validate_config() {
  [ -n "$otelcol" ] || return 0
  MY_POD_IP=127.0.0.1 K8S_NODE_NAME=node-1 "$otelcol" validate \
    --feature-gates=service.profilesSupport --config "$1" ||
    { echo "helm_test: FAIL: otelcol-ebpf-profiler rejects the configuration of $2" >&2; exit 1; }
}

# kubeconform must reject what Kubernetes rejects: a misspelled field.
printf '%s\n' 'apiVersion: apps/v1' 'kind: DaemonSet' 'metadata: {name: x}' \
  'spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}},' \
  '  spec: {hostPid: true, containers: [{name: c, image: i}]}}}' > "$tmp/bad.yaml"
if "$kubeconform" -strict -schema-location "$schema_location" "$tmp/bad.yaml" >/dev/null 2>&1; then
  echo "helm_test: FAIL: kubeconform accepted a DaemonSet with hostPid (misspelled)" >&2; exit 1
fi

"$helm" lint --strict "$chart"
for variant in default $(cd "$chart/examples" && ls *.yaml | sed 's/\.yaml$//'); do
  values=()
  [ "$variant" = default ] || values=(-f "$chart/examples/$variant.yaml")
  "$helm" lint --strict "$chart" "${values[@]}" >/dev/null
  "$helm" template profiler "$chart" --namespace profiling --kube-version "$KUBERNETES_VERSION" "${values[@]}" > "$tmp/$variant.yaml"
  "$kubeconform" -strict -summary -schema-location "$schema_location" "$tmp/$variant.yaml"
  python3 deploy/helm/test/check_rendered.py "$tmp/$variant.yaml" "$variant" "$tmp/$variant.config.yaml"
  validate_config "$tmp/$variant.config.yaml" "$variant"
done

# The community chart's values: our image with its profiling preset, and a
# configuration our distribution accepts.
community=deploy/helm/opentelemetry-collector-values.yaml
python3 - "$community" "$tmp/community.config.yaml" <<'PY'
import sys, yaml
v = yaml.safe_load(open(sys.argv[1]))
assert v["mode"] == "daemonset", v["mode"]
assert v["presets"]["profiling"]["enabled"] is True
assert v["presets"]["kubernetesAttributes"]["enabled"] is True
assert v["image"]["repository"].endswith("/otelcol-ebpf-profiler"), v["image"]
assert v["command"]["name"] == "otelcol-ebpf-profiler"
assert "--feature-gates=service.profilesSupport" in v["command"]["extraArgs"]
cfg = v["alternateConfig"]
assert cfg["service"]["pipelines"]["profiles"]["receivers"] == ["profiling"]
assert cfg["extensions"]["health_check"]["endpoint"] == "${env:MY_POD_IP}:13133"
# The preset adds k8s_attributes (the chart rewrites the deprecated
# k8sattributes name) with its own settings; validate with a
# stand-in so every component is checked.
cfg.setdefault("processors", {})["k8s_attributes"] = {
    "pod_association": [{"sources": [{"from": "resource_attribute", "name": "container.id"}]}]}
cfg["service"]["pipelines"]["profiles"]["processors"].insert(0, "k8s_attributes")
assert not [p for p, o in v["ports"].items() if o.get("enabled") and p != "metrics"], "host ports left open"
yaml.safe_dump(cfg, open(sys.argv[2], "w"))
print("helm_test: community values: ok")
PY
validate_config "$tmp/community.config.yaml" "$community"
if [ -n "${OTEL_COLLECTOR_CHART:-}" ]; then
  "$helm" template profiler "$OTEL_COLLECTOR_CHART" --namespace profiling --kube-version "$KUBERNETES_VERSION" -f "$community" > "$tmp/community.yaml"
  "$kubeconform" -strict -summary -schema-location "$schema_location" "$tmp/community.yaml"
  python3 - "$tmp/community.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = [d for d in docs if d["kind"] == "DaemonSet"][0]["spec"]["template"]["spec"]
assert ds["hostPID"] is True
c = ds["containers"][0]
assert c["image"].endswith("/otelcol-ebpf-profiler:0.1.0"), c["image"]
assert c["command"] == ["/otelcol-ebpf-profiler"], c["command"]
assert "SYS_ADMIN" not in c["securityContext"]["capabilities"]["add"]
assert c["securityContext"]["privileged"] is False
cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
cfg = yaml.safe_load(cm["data"]["relay"])
assert cfg["service"]["pipelines"]["profiles"]["processors"][0] == "k8s_attributes", cfg["service"]["pipelines"]
assert {"from": "resource_attribute", "name": "container.id"} in cfg["processors"]["k8s_attributes"]["pod_association"][0]["sources"]
print("helm_test: community chart rendering: ok")
PY
fi
echo "helm_test: ok"
