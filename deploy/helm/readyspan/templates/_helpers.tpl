{{/*
The chart's name (app.kubernetes.io/name), 63 characters at most (a label value).
*/}}
{{- define "readyspan.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of every object: the release name when it contains the chart's name, else
RELEASE-readyspan; 63 characters at most (some names are DNS labels).
*/}}
{{- define "readyspan.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
chart label value: name-version (+ replaced, as labels do not allow it).
*/}}
{{- define "readyspan.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: name and instance, so two releases in one namespace never select each other's Pods.
*/}}
{{- define "readyspan.selectorLabels" -}}
app.kubernetes.io/name: {{ include "readyspan.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Common labels of every object.
*/}}
{{- define "readyspan.labels" -}}
helm.sh/chart: {{ include "readyspan.chart" . }}
{{ include "readyspan.selectorLabels" . }}
app.kubernetes.io/version: {{ include "readyspan.version" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The release readyspan runs: the image tag, else the chart's appVersion.
*/}}
{{- define "readyspan.version" -}}
{{- default .Chart.AppVersion .Values.image.tag | trunc 63 }}
{{- end }}

{{- define "readyspan.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount of every replica.
*/}}
{{- define "readyspan.serviceAccountName" -}}
{{- include "readyspan.fullname" . }}
{{- end }}

{{- define "readyspan.leaseName" -}}
{{- default (include "readyspan.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/*
The Secret holding OTEL_EXPORTER_OTLP_HEADERS: the user's, else the chart's when headers are given.
*/}}
{{- define "readyspan.otlpHeadersSecret" -}}
{{- if .Values.otlp.headersSecret.name }}
{{- .Values.otlp.headersSecret.name }}
{{- else if .Values.otlp.headers }}
{{- printf "%s-otlp-headers" (include "readyspan.fullname" .) }}
{{- end }}
{{- end }}

{{/*
Whether prometheus-operator's API is served (or was named with helm template --api-versions).
*/}}
{{- define "readyspan.hasMonitoringAPI" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}true{{ end }}
{{- end }}

{{/*
Checks of settings that the schema cannot express.
*/}}
{{- define "readyspan.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas above 1 need leaderElection.enabled: without it every replica exports every trace" }}
{{- end }}
{{- if and .Values.otlp.headers .Values.otlp.headersSecret.name }}
{{- fail "set otlp.headers or otlp.headersSecret.name, not both" }}
{{- end }}
{{- if .Values.node.enabled }}
{{- if not .Values.otlpReceive.enabled }}
{{- fail "node.enabled needs otlpReceive.enabled: the node component reports to readyspan's OTLP input" }}
{{- end }}
{{- if or (ne (int .Values.replicas) 1) (ne (int .Values.shards) 1) }}
{{- fail "node.enabled needs replicas: 1 and shards: 1: only the leader joins what it received, and the Service spreads the nodes' connections over every readyspan Pod" }}
{{- end }}
{{- if and (not .Values.otlpReceive.insecure) (not .Values.otlpReceive.tls.secretName) }}
{{- fail "node.enabled needs otlpReceive.tls.secretName: the node component verifies the input's certificate, and the one readyspan makes at start is self-signed" }}
{{- end }}
{{- if and (not .Values.otlpReceive.insecure) (not .Values.node.caConfigMap.name) }}
{{- fail "node.enabled needs node.caConfigMap.name (the CA of otlpReceive's certificate, in node.namespace): the node component sends its token only to a receiver it can verify" }}
{{- end }}
{{- if eq .Values.node.namespace .Release.Namespace }}
{{- fail "node.namespace must not be the release's namespace: the node component needs hostNetwork and NET_ADMIN, which readyspan's restricted namespace refuses" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The node component's name (its DaemonSet and ServiceAccount), and its labels: the release's, and
app.kubernetes.io/component: node, so its selector never matches the central readyspan's Pods.
*/}}
{{- define "readyspan.nodeName" -}}
{{- printf "%s-node" (include "readyspan.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "readyspan.nodeSelectorLabels" -}}
{{ include "readyspan.selectorLabels" . }}
app.kubernetes.io/component: node
{{- end }}

{{/*
Where the node component sends: the central readyspan's OTLP input through its Service.
*/}}
{{- define "readyspan.nodeEndpoint" -}}
{{- printf "%s://%s.%s.svc:%v" (ternary "http" "https" .Values.otlpReceive.insecure) (include "readyspan.fullname" .) .Release.Namespace .Values.otlpReceive.port }}
{{- end }}

{{/*
The node component's ServiceAccount as an RBAC subject: bound to the node-sender role, its
node-bound token may send the spans of its own node only.
*/}}
{{- define "readyspan.nodeSubject" -}}
{{- dict "kind" "ServiceAccount" "name" (include "readyspan.nodeName" .) "namespace" .Values.node.namespace | toJson }}
{{- end }}
