{{/*
The Collector configuration: profiling receiver -> memory_limiter ->
k8s_attributes (pod metadata by container.id) -> resource_detection ->
OTLP/gRPC exporter, with the health_check extension. .Values.config is
deep-merged over it.
*/}}
{{- define "ebpf-profiler.config" -}}
{{- $processors := list "memory_limiter" -}}
{{- if .Values.k8sAttributes.enabled -}}
{{- $processors = append $processors "k8s_attributes" -}}
{{- end -}}
{{- $processors = append $processors "resource_detection" -}}
{{- $base := include "ebpf-profiler.baseConfig" . | fromYaml -}}
{{- $_ := set (index $base.service.pipelines "profiles") "processors" $processors -}}
{{- $merged := mustMergeOverwrite $base (deepCopy .Values.config) -}}
{{- toYaml $merged -}}
{{- end -}}

{{- define "ebpf-profiler.baseConfig" -}}
receivers:
  profiling:
    samples_per_second: {{ .Values.profiling.samplesPerSecond | int }}
    reporter_interval: {{ .Values.profiling.reporterInterval | quote }}
    error_mode: {{ .Values.profiling.errorMode | quote }}
    {{- with .Values.profiling.interpreters }}
    interpreters:
      {{- toYaml . | nindent 6 }}
    {{- end }}
processors:
  memory_limiter:
    check_interval: 1s
    limit_percentage: {{ .Values.memoryLimiter.percentage | int }}
    spike_limit_percentage: {{ .Values.memoryLimiter.spikePercentage | int }}
  {{- if .Values.k8sAttributes.enabled }}
  k8s_attributes:
    filter:
      # Only this node's pods: a DaemonSet pod watches its own node.
      node_from_env_var: K8S_NODE_NAME
    pod_association:
      - sources:
          - from: resource_attribute
            name: container.id
    extract:
      metadata:
        - k8s.namespace.name
        - k8s.pod.name
        - k8s.pod.uid
        - k8s.node.name
        - k8s.container.name
        - k8s.deployment.name
        - k8s.statefulset.name
        - k8s.daemonset.name
        - k8s.cronjob.name
        - k8s.job.name
        - container.image.name
        - container.image.tag
  {{- end }}
  resource_detection:
    detectors: [env, system]
    override: false
exporters:
  otlp_grpc:
    endpoint: {{ .Values.exporter.endpoint | quote }}
    tls:
      insecure: {{ .Values.exporter.insecure }}
extensions:
  health_check:
    endpoint: "${env:MY_POD_IP}:{{ .Values.healthCheck.port | int }}"
service:
  extensions: [health_check]
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: "${env:MY_POD_IP}"
                port: {{ .Values.telemetry.metricsPort | int }}
  pipelines:
    profiles:
      receivers: [profiling]
      processors: []
      exporters: [otlp_grpc]
{{- end -}}
