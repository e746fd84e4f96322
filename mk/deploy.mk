# Kubernetes deployment: the container image and the Helm chart.
# Included by the top-level Makefile. Targets:
#
#   image       container image of ./otelcol-ebpf-profiler, built offline
#               (deploy/image/build.sh; docker import, no base image)
#   image-test  root: the image run with the chart's capabilities profiles a
#               workload in a second container (deploy/image/image_test.sh)
#   helm-test   helm lint/template + kubeconform + assertions on the chart
#               (deploy/helm/test/helm_test.sh; builds helm and kubeconform)

.PHONY: image image-test helm-test

image: otelcol-ebpf-profiler
	deploy/image/build.sh

image-test: otelcol-ebpf-profiler
	deploy/image/image_test.sh

helm-test:
	deploy/helm/test/helm_test.sh
