{{/* Name of every object the chart makes; cluster-scoped ones are unique per release. */}}
{{- define "vnest.fullname" -}}
{{- if contains "vnest" .Release.Name -}}
{{- printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-vnest-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vnest.selectorLabels" -}}
app.kubernetes.io/name: vnest-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vnest.labels" -}}
{{ include "vnest.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
