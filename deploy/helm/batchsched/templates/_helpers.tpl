{{/* The namespace every namespaced object goes into. */}}
{{- define "batchsched.namespace" -}}
{{- required "namespace.name is required" .Values.namespace.name -}}
{{- end -}}

{{/* The image both workloads run: the chart's appVersion unless image.tag is set. */}}
{{- define "batchsched.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
Labels of every object: the component's name and part-of, as deploy/'s manifests have them,
plus Helm's release labels (metadata only: selectors and pod templates keep deploy/'s, which
a Deployment cannot change once created).
*/}}
{{- define "batchsched.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: batchsched
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The KubeSchedulerConfiguration: scheduler.config with the chart's leaderElection. */}}
{{- define "batchsched.schedulerConfig" -}}
{{- $election := dict "leaderElect" .Values.scheduler.leaderElection.enabled "resourceLock" "leases" "resourceName" .Values.scheduler.leaderElection.leaseName "resourceNamespace" (include "batchsched.namespace" .) -}}
{{- $config := dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" -}}
{{- $config = merge $config (deepCopy .Values.scheduler.config) -}}
{{- $_ := set $config "leaderElection" $election -}}
{{- toYaml $config -}}
{{- end -}}
